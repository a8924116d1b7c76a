"""Engine faults through the real Simulator and an in-memory MCP server: an engine that raises mid-call, a
generation past --call-timeout. The call at fault fails alone; the others are answered and the model is
free for the next call."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import Generation, GenerationRequest
from mcp_sim.serving.server import create_server
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

WEATHER = json.dumps({"city": "Oslo", "temperature": 3.5, "conditions": "snow", "units": "metric"})


class BreakingEngine(ScriptedEngine):
    """Decodes a few tokens, then raises in the middle of the call whose prompt names the city "Boom"."""

    def generate(self, request: GenerationRequest) -> Generation:
        if "Boom" in request.messages[-1].content:
            for token in (1, 2, 3):
                if request.on_token:
                    request.on_token(token)
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return super().generate(request)


class TokenByToken(ScriptedEngine):
    """Decodes one token every `pause` seconds until the answer's length, stopping between tokens when
    cancelled, as the llama engine does; records how each generation ended and when."""

    def __init__(self, tokens: int, pause: float = 0.02):
        super().__init__()
        self.tokens, self.pause = tokens, pause
        self.ended: list[tuple[str, float]] = []

    def generate(self, request: GenerationRequest) -> Generation:
        for produced in range(self.tokens):
            if request.cancel.is_set():
                self.ended.append(("cancelled", time.monotonic()))
                return Generation("", 10, produced, "cancelled")
            time.sleep(self.pause)
        self.ended.append(("stop", time.monotonic()))
        return Generation(WEATHER, 10, self.tokens, "stop")


def weather(engine: ScriptedEngine, **options: Any) -> Simulator:
    return Simulator(load_catalog([SPECS / "weather.yaml"]), engine, SimOptions(attempts=1, **options))


def meta(result: Any) -> dict[str, Any]:
    return result.meta[META_KEY]  # type: ignore[no-any-return]


@pytest.mark.anyio
async def test_an_engine_that_raises_mid_call_fails_that_call_alone() -> None:
    engine = BreakingEngine(*[WEATHER] * 4)
    results: dict[str, Any] = {}
    async with Client(create_server(weather(engine))) as client:
        async def call(world: str, city: str) -> None:
            results[world] = await client.call_tool("get_weather", {"city": city}, meta={"mcp-sim/world": world})

        async with anyio.create_task_group() as group:
            for world, city in (("a", "Oslo"), ("boom", "Boom"), ("c", "Rome")):
                group.start_soon(call, world, city)
        after = await client.call_tool("get_weather", {"city": "Oslo"}, meta={"mcp-sim/world": "boom"})
    failed = results["boom"]
    assert failed.is_error and meta(failed)["stage"] == "engine"
    assert "internal error (RuntimeError: CUDA error" in failed.content[0].text
    assert not results["a"].is_error and not results["c"].is_error
    assert not after.is_error and meta(after)["turn"] == 1  # the failed call left nothing in the world


def test_a_generation_past_the_call_timeout_is_stopped_and_the_model_is_free() -> None:
    engine = TokenByToken(tokens=500)  # ten seconds of decoding
    simulator = weather(engine, call_timeout=0.3)
    started = time.monotonic()
    stopped = simulator.simulate("get_weather", {"city": "Oslo"}, world="slow")
    assert time.monotonic() - started < 1.5
    assert stopped.is_error and meta(stopped)["stage"] == "timeout" and meta(stopped)["call_timeout_s"] == 0.3
    assert "call timeout of 0.3 s (--call-timeout)" in stopped.text
    assert engine.ended[0][0] == "cancelled" and engine.ended[0][1] - started < 1.0
    engine.tokens = 5
    answered = simulator.simulate("get_weather", {"city": "Oslo"}, world="slow")
    assert not answered.is_error and meta(answered)["turn"] == 1  # the stopped call is not in the history
    assert simulator.worlds.existing("slow").all_turns() == 1


def test_an_answer_within_the_call_timeout_is_untouched() -> None:
    engine = TokenByToken(tokens=5)
    result = weather(engine, call_timeout=5).simulate("get_weather", {"city": "Oslo"})
    assert not result.is_error and result.structured == json.loads(WEATHER)


@pytest.mark.anyio
async def test_the_call_timeout_stops_one_served_call_while_the_others_are_answered() -> None:
    engine = TokenByToken(tokens=500)
    simulator = weather(engine, call_timeout=0.3)
    async with Client(create_server(simulator)) as client:
        stopped = await client.call_tool("get_weather", {"city": "Oslo"}, meta={"mcp-sim/world": "a"})
        engine.tokens = 3
        answered = await client.call_tool("get_weather", {"city": "Oslo"}, meta={"mcp-sim/world": "b"})
    assert stopped.is_error and meta(stopped)["stage"] == "timeout"
    assert not answered.is_error


def test_call_timeout_is_a_flag_of_serve_and_call() -> None:
    for command in ("serve", "call"):
        shown = CliRunner().invoke(cli, [command, "--help"])
        assert "--call-timeout SECONDS" in shown.output
    refused = CliRunner().invoke(cli, ["call", str(SPECS / "weather.yaml"), "--tool", "get_weather",
                                       "--call-timeout", "-1"])
    assert refused.exit_code == 2 and "--call-timeout" in refused.output


def test_a_thread_waits_for_no_timer_after_the_call() -> None:
    before = threading.active_count()
    weather(TokenByToken(tokens=1), call_timeout=60).simulate("get_weather", {"city": "Oslo"})
    time.sleep(0.1)
    assert threading.active_count() == before  # the limit's timer ends with its call
