"""Repeatable rehearsals with the real model: identical bytes from fresh processes and fresh worlds, a cache
that replays with the model file gone, cassettes with the model filling the gaps.

Loads SmolLM2: run under the model lock (`flock /tmp/mcp-sim-model.lock ...`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY
from mcp_sim.pytest_plugin import McpSim
from tests.conftest import SPECS, subprocess_env

pytestmark = pytest.mark.anyio

WEATHER = str(SPECS / "weather.yaml")
CALLS = [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Paris", "units": "metric"})]
FAST = ["--max-tokens", "64", "--threads", "2"]


def client_bytes(result: Any) -> str:
    """What the client received, less the per-call _meta (latency, world, turn)."""
    return str(result.model_dump_json(by_alias=True, exclude_none=True, exclude={"meta"}))


async def serve_and_call() -> list[tuple[str, dict[str, Any]]]:
    """A fresh `mcp-sim serve` process over stdio; CALLS in world a, then the same in a fresh world b."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_sim", "serve", WEATHER, *FAST],
                                   env=subprocess_env())
    answers = []
    async with Client(params) as client:
        for world in ("a", "b"):
            for name, arguments in CALLS:
                result = await client.call_tool(name, arguments, meta={"mcp-sim/world": world})
                answers.append((client_bytes(result), result.meta[META_KEY] if result.meta else {}))
    return answers


async def test_two_fresh_processes_and_two_fresh_worlds_give_identical_bytes() -> None:
    first, second = await serve_and_call(), await serve_and_call()
    assert [b for b, _ in first] == [b for b, _ in second]
    assert [b for b, _ in first[:2]] == [b for b, _ in first[2:]]  # world b, after world a answered
    assert all(meta["source"] == "model" for _, meta in first + second)
    assert first[0][1]["world"] == "a" and first[2][1]["world"] == "b"
    assert [m["completion_tokens"] for _, m in first] == [m["completion_tokens"] for _, m in second]
    assert first[1][1]["history_turns"] == 1  # Paris saw Oslo: the history is part of what repeats


def call(*args: str) -> tuple[int, dict[str, Any]]:
    outcome = CliRunner().invoke(cli, ["call", WEATHER, "--tool", "get_weather", "--args", '{"city": "Oslo"}',
                                       *FAST, *args])
    return outcome.exit_code, json.loads(outcome.stdout)


def test_a_cached_answer_replays_with_the_model_file_gone(model_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "models" / model_path.name
    copy.parent.mkdir()
    shutil.copyfile(model_path, copy)
    cache = str(tmp_path / "c.db")
    code, recorded = call("--model", str(copy), "--cache", cache)
    assert code == 0 and recorded["_meta"][META_KEY]["source"] == "model"
    copy.unlink()
    code, replayed = call("--model", str(copy), "--cache", cache, "--replay-only")
    assert code == 0 and replayed["_meta"][META_KEY]["source"] == "cache"
    assert {k: v for k, v in replayed.items() if k != "_meta"} == {k: v for k, v in recorded.items() if k != "_meta"}
    other = tmp_path / "other.gguf"  # another model file: never loaded under --replay-only, only hashed
    other.write_bytes(b"GGUF" + bytes(64))
    for model in (str(other), str(tmp_path / "never-recorded.gguf")):
        code, missed = call("--model", model, "--cache", cache, "--replay-only")
        assert code == 1 and missed["_meta"][META_KEY]["source"] == "miss"
        assert "Replay miss: tool 'get_weather'" in missed["content"][0]["text"]


async def test_a_cassette_answers_a_recorded_call_and_the_model_answers_the_next_one_after_it() -> None:
    traces = SPECS / "traces"
    mcp_sim = McpSim()
    async with mcp_sim(traces / "time.yaml", replay=[traces / "time.jsonl"], expose_prompt=True, max_tokens=64,
                       threads=2) as client:
        real = await client.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
        simulated = await client.call_tool("get_current_time", {"timezone": "America/Denver"})
    assert mcp_sim.journal.sources() == ["cassette", "model"]
    assert real.structured_content is not None
    assert real.structured_content["datetime"] == "2026-11-30T10:41:38+09:00"  # the real server's answer
    assert simulated.meta is not None
    prompt = json.dumps(simulated.meta[META_KEY]["prompt"], ensure_ascii=False)
    assert json.dumps(json.dumps(real.structured_content, ensure_ascii=False))[1:-1] in prompt
    assert simulated.meta[META_KEY]["history_turns"] == 1
