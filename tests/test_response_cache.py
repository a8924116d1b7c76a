"""The response cache: exact bytes back, keys that cover everything, foreign files refused, crash safety."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from mcp_sim.base.errors import McpSimError, ModelFileError
from mcp_sim.core.prompt import Turn
from mcp_sim.rehearsal.cache import CacheError, ResponseCache, cache_key
from tests.cache_writer import result_bytes
from tests.conftest import REPO, subprocess_env

WRITER = [sys.executable, str(REPO / "tests" / "cache_writer.py")]
# Spacing, key order, raw and escaped unicode: what the server sent, not a re-serialization of it.
RESULT = '{"structuredContent": {"b": 1,  "a": "é\\u00e9"}, "content": [], "isError": false}\n'.encode()
PARTS: dict[str, Any] = {
    "model_hash": "f" * 64, "prompt_version": "1", "spec_digest": "s1", "history": [("call 1", "answer 1")],
    "tool": "get_weather", "arguments": {"city": "Oslo", "units": "metric"}, "seed": 0, "options_digest": "o1"}


def key(**changes: Any) -> str:
    return cache_key(**{**PARTS, **changes})


def put(cache: ResponseCache, cache_key: str, result: bytes = RESULT, model_name: str = "tiny",
        model_hash: str = PARTS["model_hash"]) -> bool:
    return cache.put(cache_key, result, model_hash=model_hash, model_name=model_name,
                     tool="get_weather", arguments=PARTS["arguments"], world="w1")


def test_a_stored_result_comes_back_byte_for_byte_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    with ResponseCache(path) as cache:
        assert cache.get(key()) is None
        assert put(cache, key())
    with ResponseCache(path) as cache:
        hit = cache.get(key())
    assert hit is not None
    assert hit.result == RESULT and type(hit.result) is bytes
    assert (hit.tool, hit.arguments, hit.world, hit.model_name) == ("get_weather", PARTS["arguments"], "w1", "tiny")


@pytest.mark.parametrize("change", [
    {"model_hash": "e" * 64}, {"prompt_version": "2"}, {"spec_digest": "s2"}, {"history": []},
    {"history": [("call 1", "answer 2")]}, {"history": [("call 1", "answer 1"), ("call 2", "answer 2")]},
    {"tool": "get_forecast"}, {"arguments": {"city": "Oslo", "units": "imperial"}}, {"seed": 1}, {"seed": None},
    {"options_digest": "o2"},
])
def test_every_part_of_the_key_decides_it(change: dict[str, Any]) -> None:
    assert key(**change) != key()


def test_argument_order_and_turn_objects_do_not_change_the_key() -> None:
    assert key(arguments={"units": "metric", "city": "Oslo"}) == key()
    assert key(history=[Turn("call 1", "answer 1")]) == key()


def test_a_cache_from_an_older_prompt_version_is_a_miss_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    with ResponseCache(path) as cache:
        put(cache, key(prompt_version="1"))
    with ResponseCache(path) as cache:  # a newer mcp-sim, whose prompt is version 2
        assert cache.get(key(prompt_version="2")) is None
        assert cache.get(key(prompt_version="1")) is not None


def test_the_first_answer_for_a_key_is_kept(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "cache.db") as cache:
        assert put(cache, key(), b'{"first": true}')
        assert not put(cache, key(), b'{"second": true}')
        hit = cache.get(key())
    assert hit is not None and hit.result == b'{"first": true}'


def test_a_result_that_is_not_json_is_refused(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "cache.db") as cache, pytest.raises(CacheError, match="not UTF-8 JSON"):
        put(cache, key(), b"{not json")


def test_replay_finds_the_model_by_its_name_when_the_file_is_gone(tmp_path: Path) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF" + os.urandom(4096))
    path = tmp_path / "cache.db"
    with ResponseCache(path) as cache:
        digest = cache.model_fingerprint(model)
        assert digest == hashlib.sha256(model.read_bytes()).hexdigest()
        put(cache, key(model_hash=digest), model_name="tiny", model_hash=digest)
    model.unlink()
    with ResponseCache(path) as cache:  # a CI machine: same --model argument, no weights
        found = cache.model_for_name("tiny")
        assert found == digest
        assert cache.get(key(model_hash=found)) is not None
        assert cache.model_for_name("other") is None
        with pytest.raises(ModelFileError, match=r"cannot read the model file .*tiny\.gguf"):
            cache.model_fingerprint(model)


def test_a_name_follows_the_model_file_that_last_answered_under_it(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "cache.db") as cache:
        cache.put("k1", b"{}", model_hash="old", model_name="qwen", tool="t", arguments={}, world="w")
        cache.put("k2", b"{}", model_hash="new", model_name="qwen", tool="t", arguments={}, world="w")
        assert cache.model_for_name("qwen") == "new"


def test_a_model_file_is_hashed_once_per_path_size_and_mtime(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"a" * 1000)
    with ResponseCache(tmp_path / "cache.db") as cache:
        first = cache.model_fingerprint(model)
        stamp = model.stat().st_mtime_ns
        model.write_bytes(b"b" * 1000)  # same size; mtime put back: the stored hash answers, unread
        os.utime(model, ns=(stamp, stamp))
        assert cache.model_fingerprint(model) == first
        os.utime(model, ns=(stamp + 10**9, stamp + 10**9))
        assert cache.model_fingerprint(model) == hashlib.sha256(b"b" * 1000).hexdigest() != first


def test_a_non_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes\n")
    with pytest.raises(CacheError, match=rf"{path} is not an mcp-sim response cache \(not an SQLite database\)\. "
                                         "Give --cache a new file name"):
        ResponseCache(path)
    assert path.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_another_applications_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text)")
    before = path.read_bytes()
    with pytest.raises(CacheError, match=r"is an SQLite database but not an mcp-sim response cache "
                                         r"\(application_id 0x0, tables: notes\)"):
        ResponseCache(path)
    assert path.read_bytes() == before


def test_a_damaged_cache_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    ResponseCache(path).close()
    path.write_bytes(path.read_bytes()[:16] + b"\xff" * 200)  # the SQLite header, then garbage
    with pytest.raises(CacheError, match=rf"{path} is damaged or not an SQLite database .* delete {path}"):
        ResponseCache(path)


def test_a_cache_from_a_newer_mcp_sim_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    ResponseCache(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 9")
    with pytest.raises(CacheError, match="schema 9, written by a newer mcp-sim; upgrade mcp-sim"):
        ResponseCache(path)


def test_paths_that_cannot_be_a_cache(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="is a folder; --cache takes a file path"):
        ResponseCache(tmp_path)
    with pytest.raises(CacheError, match="no response cache at"):
        ResponseCache(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    (tmp_path / "empty.db").touch()  # an empty file becomes a new cache
    with ResponseCache(tmp_path / "empty.db") as cache:
        assert cache.stats()["entries"] == 0
    assert issubclass(CacheError, McpSimError)


def test_threads_share_one_cache(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.db")
    failures: list[str] = []

    def work(thread: int) -> None:
        for number in range(25):
            name = f"{thread}-{number}"
            cache.put(name, result_bytes(name, number), model_hash="h", model_name="m", tool="t",
                      arguments={}, world=name)
            hit = cache.get(name)
            if hit is None or hit.result != result_bytes(name, number):
                failures.append(name)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and cache.stats()["entries"] == 150
    cache.close()


def test_two_processes_write_one_new_cache_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    writers = [subprocess.Popen([*WRITER, str(path), prefix, "150"], env=subprocess_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for prefix in ("a", "b")]
    outputs = [writer.communicate(timeout=120) for writer in writers]
    assert [w.returncode for w in writers] == [0, 0], [err.decode() for _, err in outputs]
    with ResponseCache(path) as cache:
        assert cache.stats()["tools"] == {"tool-a": 150, "tool-b": 150}
        for prefix in ("a", "b"):
            for number in range(150):
                hit = cache.get(f"{prefix}-{number}")
                assert hit is not None and hit.result == result_bytes(prefix, number)


def test_kill_9_of_a_writer_leaves_every_committed_entry_readable(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    writer = subprocess.Popen([*WRITER, str(path), "k", "0"], env=subprocess_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert writer.stdout is not None
    committed = [writer.stdout.readline().decode().strip() for _ in range(40)]
    os.kill(writer.pid, signal.SIGKILL)  # mid-stream: the next put may be half written
    rest, _ = writer.communicate(timeout=30)
    committed += rest.decode().split()
    assert writer.returncode == -signal.SIGKILL
    with ResponseCache(path) as cache:
        for name in committed:
            hit = cache.get(name)
            assert hit is not None and hit.result == result_bytes("k", int(name.split("-")[1]))
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
