"""System prompts' model states kept on disk: a new engine (a restarted server) loads what an earlier one read
and answers byte for byte as it did; a damaged, truncated or foreign file is deleted and the prompt read again;
the folder stays under its budget; a disk that cannot be written costs only the reading."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp_sim.base.defaults import PROMPT_CACHE_ENV
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.llama import loading as engine_loading
from mcp_sim.engines.llama.prompt_store import MAGIC, PromptStore
from mcp_sim.engines.llama.state_cache import Snapshot
from mcp_sim.serving.warmup import Warmup
from tests.conftest import SPECS, subprocess_env

GREEDY = SimOptions(temperature=0.0, max_tokens=96)


def snapshot(tokens: list[int], size: int, fill: int = 7) -> Snapshot:
    return Snapshot(tuple(tokens), memoryview(bytearray([fill]) * size))


def test_a_saved_state_comes_back_whole_and_only_for_its_own_engine_and_tokens(tmp_path: Path) -> None:
    store = PromptStore(tmp_path, 1 << 20, "engine-a")
    store.put([1, 2, 3], snapshot([1, 2, 3], 1000))
    loaded = store.get([1, 2, 3])
    assert loaded is not None and loaded.tokens == (1, 2, 3) and bytes(loaded.state) == bytes([7]) * 1000
    assert store.get([1, 2, 4]) is None  # another prompt
    assert PromptStore(tmp_path, 1 << 20, "engine-b").get([1, 2, 3]) is None  # another model or build
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "garbage", "huge"])
def test_a_damaged_or_foreign_file_is_deleted_and_read_as_missing(tmp_path: Path, damage: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    store = PromptStore(tmp_path, 1 << 20, "engine-a")
    store.put([5, 6], snapshot([5, 6], 4096))
    (path,) = tmp_path.glob("*.state")
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-100] ^= 0xFF
    elif damage == "truncate":
        del data[-10:]
    elif damage == "foreign":  # another engine's file under this one's name
        other = PromptStore(tmp_path / "other", 1 << 20, "engine-b")
        other.put([5, 6], snapshot([5, 6], 4096))
        data = bytearray(next((tmp_path / "other").glob("*.state")).read_bytes())
    elif damage == "huge":  # a header that asks for a terabyte must not be believed
        data = bytearray(bytes(data).replace(b'"bytes": 4096', b'"bytes": 1000000000000'))
    else:
        data = bytearray(b"not a state at all\n" + MAGIC)
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        assert store.get([5, 6]) is None
    assert not path.exists()
    assert "ignoring the saved prompt state" in caplog.text


def test_the_folder_stays_under_its_budget_least_recently_used_first(tmp_path: Path) -> None:
    store = PromptStore(tmp_path, 10_000, "engine")
    for n in range(3):
        time.sleep(0.02)  # apart in the file system's clock, which orders them
        store.put([n], snapshot([n], 4000))
        time.sleep(0.02)
        assert store.get([0]) is not None  # the first is used again after each, so it outlives the second
    assert store.get([0]) is not None and store.get([1]) is None and store.get([2]) is not None
    assert sum(p.stat().st_size for p in tmp_path.glob("*.state")) <= 10_000
    store.put([9], snapshot([9], 20_000))  # larger than the whole budget: not kept, nothing evicted for it
    assert store.get([9]) is None and store.get([2]) is not None


def test_a_half_written_file_left_by_a_killed_writer_is_cleared_once_stale(tmp_path: Path) -> None:
    store = PromptStore(tmp_path, 1 << 20, "engine")
    stale, fresh = tmp_path / "a.partial", tmp_path / "b.partial"
    stale.write_bytes(MAGIC)
    fresh.write_bytes(MAGIC)  # perhaps another process, writing now
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    store.put([1], snapshot([1], 100))
    assert not stale.exists() and fresh.exists() and store.get([1]) is not None


def test_a_folder_that_cannot_be_written_is_reported_once_and_never_fails(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    store = PromptStore(blocked / "states", 1 << 20, "engine")
    with caplog.at_level(logging.WARNING):
        store.put([1], snapshot([1], 100))
        store.put([2], snapshot([2], 100))
    assert caplog.text.count("cannot keep system prompt states") == 1
    assert store.get([1]) is None


def test_a_new_engine_loads_the_prompt_an_earlier_one_read_and_answers_the_same(
        model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = load_catalog([SPECS / "weather.yaml"])

    def first_call(engine: LlamaEngine) -> tuple[str, int]:
        simulator = Simulator(catalog, engine, GREEDY)
        try:
            engine.warm(Warmup(simulator).system_prompts())
            result = simulator.simulate("get_weather", {"city": "Oslo"}, world="w")
        finally:
            engine.close()
        assert not result.is_error, result.text
        return result.text, result.meta[META_KEY]["evaluated_tokens"]

    reference = first_call(LlamaEngine(model_path, n_ctx=4096, n_threads=2, prompt_cache_dir=tmp_path))
    (saved,) = tmp_path.glob("*.state")
    # The next engine must not read the prompt: it loads it, and answers as the one that read it.
    reads: list[int] = []
    original = engine_loading.warm_system_prompt
    monkeypatch.setattr("mcp_sim.engines.llama.warm_system_prompt",
                        lambda decoder, tokens, key, codec: (reads.append(len(tokens)),
                                                             original(decoder, tokens, key, codec)))
    assert first_call(LlamaEngine(model_path, n_ctx=4096, n_threads=2, prompt_cache_dir=tmp_path)) == reference
    assert reads == []
    # A damaged file is read again (and saved again), with the same answer.
    data = bytearray(saved.read_bytes())
    data[len(data) // 2] ^= 0xFF
    saved.write_bytes(bytes(data))
    assert first_call(LlamaEngine(model_path, n_ctx=4096, n_threads=2, prompt_cache_dir=tmp_path)) == reference
    assert len(reads) == 1 and saved.exists()
    # Another context size is another engine: its own file, never the first one's.
    first_call(LlamaEngine(model_path, n_ctx=2048, n_threads=2, prompt_cache_dir=tmp_path))
    assert len(reads) == 2 and len(list(tmp_path.glob("*.state"))) == 2


@pytest.mark.anyio
async def test_a_restarted_server_loads_its_specs_prompt_instead_of_reading_it(tmp_path: Path) -> None:
    env = subprocess_env(**{PROMPT_CACHE_ENV: str(tmp_path)})
    params = StdioServerParameters(command=sys.executable, env=env, args=[
        "-m", "mcp_sim", "serve", str(SPECS / "weather.yaml"), "--ctx", "4096", "--max-tokens", "96", "-v"])
    logs = []
    for _ in range(2):
        log = tmp_path / f"serve-{len(logs)}.log"
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=300) as client:
                result = await client.call_tool("get_weather", {"city": "Oslo"})
        assert not result.is_error, result.content
        logs.append(log.read_text())
    assert list(tmp_path.glob("*.state")) and "loaded from" not in logs[0]
    assert f"loaded from {tmp_path}" in logs[1]
