"""Cassettes replay the real traces in tool_specs/traces: recorded answers, in order, per world."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from mcp_sim.base.errors import McpSimError
from mcp_sim.core.prompt import render_action
from mcp_sim.rehearsal.cassettes import Cassette, CassetteError
from mcp_sim.rehearsal.traces import TraceError, read_traces
from tests.conftest import SPECS

TRACES = SPECS / "traces"
FILESYSTEM = TRACES / "filesystem.jsonl"
NOTES = {"path": "/sandbox/notes.txt"}


@pytest.fixture
def cassette() -> Cassette:
    return Cassette.load(sorted(TRACES.glob("*.jsonl")))


def test_every_recorded_call_answers_with_its_real_result_in_a_fresh_world() -> None:
    cassette = Cassette.load([TRACES / "memory.jsonl", TRACES / "time.jsonl"])
    records = read_traces([TRACES / "memory.jsonl", TRACES / "time.jsonl"])
    assert len(cassette) == len(records) == 11
    for record in records:  # each call is recorded once in these two files
        taken = cassette.take("fresh", record.tool, record.arguments)
        assert taken is not None
        assert (taken.result, taken.is_error, taken.text) == (record.result, record.is_error, record.text)


def test_a_recorded_call_returns_the_real_structured_result(cassette: Cassette) -> None:
    # Key order of the arguments does not matter: the match is on canonical JSON.
    taken = cassette.take("w", "convert_time", {"time": "16:30", "target_timezone": "Asia/Tokyo",
                                                "source_timezone": "Europe/London"})
    assert taken is not None and not taken.is_error
    assert taken.structured is not None
    assert taken.structured["source"]["timezone"] == "Europe/London"
    assert taken.structured["target"]["timezone"] == "Asia/Tokyo"
    assert json.loads(taken.text) == taken.structured  # the text block carries the same JSON
    assert taken.origin.startswith(f"{TRACES / 'time.jsonl'}:3 time-eval#3")


def test_a_recorded_failure_keeps_its_error_text(cassette: Cassette) -> None:
    missing = cassette.take("w", "read_text_file", {"path": "/sandbox/missing.txt"})
    assert missing is not None and missing.is_error and missing.structured is None
    assert missing.text == "ENOENT: no such file or directory, open '/sandbox/missing.txt'"
    assert missing.turn().observation == missing.text


def test_repeated_identical_calls_answer_in_recorded_order_then_miss(cassette: Cassette) -> None:
    # The filesystem session reads notes.txt before and after editing it: beta, then gamma.
    first = cassette.take("w", "read_text_file", NOTES)
    second = cassette.take("w", "read_text_file", NOTES)
    assert first is not None and second is not None
    assert "beta" in first.text and "gamma" not in first.text
    assert "gamma" in second.text and "beta" not in second.text
    assert cassette.take("w", "read_text_file", NOTES) is None
    assert cassette.remaining("w", "read_text_file", NOTES) == 0


def test_each_world_has_its_own_cursor(cassette: Cassette) -> None:
    in_a = cassette.take("a", "read_text_file", NOTES)
    in_b = cassette.take("b", "read_text_file", NOTES)
    assert in_a is not None and in_b is not None and in_a.text == in_b.text  # both start at the first
    cassette.fork("a", "a-fork")
    assert cassette.remaining("a-fork", "read_text_file", NOTES) == 1
    cassette.reset("a")
    assert cassette.remaining("a", "read_text_file", NOTES) == 2


def test_unrecorded_calls_miss(cassette: Cassette) -> None:
    assert cassette.take("w", "read_text_file", {"path": "/sandbox/other.txt"}) is None
    assert cassette.take("w", "get_current_time", {"timezone": "utc"}) is None  # values must be equal
    assert cassette.take("w", "no_such_tool", {}) is None
    assert cassette.take("w", "read_graph", {"extra": 1}) is None


def test_a_recorded_call_becomes_a_history_turn(cassette: Cassette) -> None:
    taken = cassette.take("turns", "list_directory", {"path": "/sandbox"})
    assert taken is not None
    turn = taken.turn()
    assert turn.action == render_action("list_directory", {"path": "/sandbox"})
    assert json.loads(turn.observation) == taken.structured


def test_concurrent_takes_hand_out_each_recorded_answer_once() -> None:
    cassette = Cassette.load([FILESYSTEM])
    taken: list[str] = []
    lock = threading.Lock()

    def take() -> None:
        call = cassette.take("shared", "read_text_file", NOTES)
        if call is not None:
            with lock:
                taken.append(call.origin)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted({o for o in taken}) and len(taken) == 2


def test_bad_cassette_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"cannot read trace file .*nope\.jsonl"):
        Cassette.load([tmp_path / "nope.jsonl"])
    spec = SPECS / "weather.yaml"
    with pytest.raises(TraceError, match=rf"{spec}:1: not a trace record .* written by `mcp-sim record`"):
        Cassette.load([spec])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(CassetteError, match=r"empty.jsonl: holds no recorded calls; write one with `mcp-sim record"):
        Cassette.load([FILESYSTEM, empty])
    assert issubclass(TraceError, McpSimError) and issubclass(CassetteError, McpSimError)
