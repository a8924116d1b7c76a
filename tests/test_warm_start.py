"""Warm start (issue 14): the server answers `initialize` and `tools/list` while the model loads; calls wait for
it, with progress; a missing or corrupt model still fails at startup."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from mcp_sim.base.errors import ModelFileError
from mcp_sim.core.prompt import INDEX_FIRST_CALL, INDEX_INTRO
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import ChatMessage, Generation, GenerationRequest
from mcp_sim.serving import warmup as warmup_module
from mcp_sim.serving.server import create_server
from mcp_sim.serving.warmup import Warmup
from tests.conftest import SPECS, mcp_sim_command, subprocess_env
from tests.scripted import ScriptedEngine

pytestmark = pytest.mark.anyio

OPS = SPECS / "ops.yaml"
# What ops.yaml's data says of api; the model adds only `healthy`, which the data lacks.
STATUS = '{"service": "api", "state": "running", "version": "2.14.1", "uptime_s": 864000, "pid": 2211, "healthy": true}'


class SlowLoadingEngine(ScriptedEngine):
    """Its warm-up lasts until the test opens `gate` (a model that takes a while to load)."""

    def __init__(self, *answers: str, failure: Exception | None = None):
        super().__init__(*answers)
        self.gate = threading.Event()
        self.failure = failure
        self.warmed: list[list[ChatMessage]] = []

    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        assert self.gate.wait(30)
        if self.failure is not None:
            raise self.failure
        self.warmed = prompts


def started(engine: SlowLoadingEngine, monkeypatch: pytest.MonkeyPatch) -> tuple[Simulator, Warmup]:
    monkeypatch.setattr(warmup_module, "WAIT_REPORT_S", 0.05)
    simulator = Simulator(load_catalog([OPS]), engine, SimOptions(attempts=1))
    warmup = Warmup(simulator)
    warmup.start()
    return simulator, warmup


async def test_tools_are_listed_at_once_and_a_call_waits_for_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = SlowLoadingEngine(STATUS)
    simulator, warmup = started(engine, monkeypatch)
    progress: list[float] = []
    results = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(create_server(simulator, warmup=warmup)) as client:
        listed = await client.list_tools()
        assert not warmup.ready and {tool.name for tool in listed.tools} == set(simulator.catalog.tools)

        async def call() -> None:
            results.append(await client.call_tool("get_service_status", {"service": "api"},
                                                  progress_callback=on_progress))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await anyio.sleep(0.5)
            assert not results and not engine.requests  # still waiting for the model
            engine.gate.set()
    assert not results[0].is_error and results[0].structured_content == json.loads(STATUS)
    assert len(progress) >= 3 and progress == sorted(set(progress))  # strictly increasing, as MCP requires
    system = simulator.system_prompt(simulator.catalog.spec_sets[0], simulator.worlds.default_scenario)
    assert engine.warmed == [[ChatMessage("system", system)]]


async def test_a_failed_warm_up_answers_calls_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = SlowLoadingEngine(failure=ModelFileError("model file /x.gguf is truncated"))
    simulator, warmup = started(engine, monkeypatch)
    engine.gate.set()
    async with Client(create_server(simulator, warmup=warmup)) as client:
        result = await client.call_tool("get_service_status", {"service": "api"})
    assert result.is_error and "truncated" in result.content[0].text
    assert result.meta is not None and result.meta[META_KEY]["stage"] == "engine"


def test_serve_still_fails_at_startup_on_a_corrupt_model(tmp_path: Path, model_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with model_path.open("rb") as source:
        cut.write_bytes(source.read(model_path.stat().st_size * 9 // 10))  # the header is whole, the weights not
    completed = subprocess.run(mcp_sim_command("serve", str(OPS), "--model", str(cut)), env=subprocess_env(),
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert completed.returncode == 1
    assert f"cannot load {cut}" in completed.stderr and "Traceback" not in completed.stderr


async def test_a_real_server_warms_the_system_prompt_before_the_first_call() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_sim", "serve", str(OPS), "--ctx", "4096",
                                                                 "--max-tokens", "96"], env=subprocess_env())
    async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
        assert (await client.list_tools()).tools
        result = await client.call_tool("get_service_status", {"service": "api"})
    assert not result.is_error, result.content
    meta = result.meta[META_KEY]  # type: ignore[index]
    # The first call of the world reads its own tokens only: the system prompt was read during the warm-up.
    assert meta["evaluated_tokens"] < meta["prompt_tokens"] / 4, meta


class PerSpecWarmEngine(ScriptedEngine):
    """Loads at once; reading a spec's system prompt lasts until the test opens that spec's gate."""

    MARKERS: ClassVar[dict[str, str]] = {"get_service_status": "ops", "read_file": "files", "get_customer": "crm"}

    def __init__(self, *answers: str):
        super().__init__(*answers)
        self.gates = {spec: threading.Event() for spec in self.MARKERS.values()}
        self.loaded = threading.Event()
        self.loaded.set()
        self.order: list[str] = []

    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        assert self.loaded.wait(30)
        for messages in prompts:
            spec = next(s for marker, s in self.MARKERS.items() if marker in messages[0].content)
            self.order.append(spec)
            assert self.gates[spec].wait(30)


async def test_a_call_waits_only_for_its_own_specs_prompt_which_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the first call waited for every spec's warm-up (152 s with four specs, 10.9 s with one)."""
    monkeypatch.setattr(warmup_module, "WAIT_REPORT_S", 0.05)
    engine = PerSpecWarmEngine('{"found": false}')
    simulator = Simulator(load_catalog([OPS, SPECS / "files.yaml", SPECS / "crm.yaml"]), engine,
                          SimOptions(attempts=1))
    warmup = Warmup(simulator)
    async with Client(create_server(simulator, warmup=warmup)) as client:
        warmup.start()
        await anyio.sleep(0.3)  # the background has begun reading the first spec (ops)

        async def open_gates_once_the_call_waits() -> None:
            # Opened before the call waits, the ops gate would let the background go on to files first.
            while "crm" not in "".join(warmup._order):
                await anyio.sleep(0.01)
            engine.gates["ops"].set()  # the prompt being read when the call came is finished, never cut
            engine.gates["crm"].set()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(open_gates_once_the_call_waits)
                await client.call_tool("get_customer", {"customer_id": "C-1009"})  # not in the data: the model answers
        assert engine.requests and not engine.gates["files"].is_set() and not warmup.ready
        assert engine.order[:2] == ["ops", "crm"]  # crm was called, so it went before files
        engine.gates["files"].set()
        with anyio.fail_after(10):
            await warmup.wait()
    assert engine.order == ["ops", "crm", "files"]


async def test_the_background_reads_no_other_prompt_while_a_call_is_in_flight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warmup_module, "WAIT_REPORT_S", 0.05)
    engine = PerSpecWarmEngine()
    for gate in engine.gates.values():
        gate.set()
    engine.loaded.clear()
    simulator = Simulator(load_catalog([OPS, SPECS / "files.yaml"]), engine, SimOptions(attempts=1))
    warmup = Warmup(simulator)
    warmup.start()

    async def load_soon() -> None:
        await anyio.sleep(0.2)
        engine.loaded.set()

    async with anyio.create_task_group() as group:
        group.start_soon(load_soon)
        with anyio.fail_after(10):
            async with warmup.call(simulator.catalog.spec_sets[1].source):
                assert engine.order == ["files"]  # called first, so read first
                await anyio.sleep(0.3)
                assert engine.order == ["files"]  # ops waits until the call is done
    with anyio.fail_after(10):
        await warmup.wait()
    assert engine.order == ["files", "ops"]


class SilentEngine(ScriptedEngine):
    """Reads its prompt for a while without a token to report (a long prefill)."""

    def generate(self, request: GenerationRequest) -> Generation:
        time.sleep(1.0)
        return super().generate(request)


async def test_a_call_with_nothing_to_report_still_sends_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients that reset their timeout on progress (the Inspector CLI gives up after 60 s without) must hear
    from the server while it reads a long prompt; the values keep increasing, as MCP requires."""
    from mcp_sim.serving import call_path

    monkeypatch.setattr(call_path, "HEARTBEAT_S", 0.2)
    engine = SilentEngine(STATUS)
    simulator = Simulator(load_catalog([OPS]), engine, SimOptions(attempts=1))
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(create_server(simulator)) as client:
        result = await client.call_tool("get_service_status", {"service": "api"}, progress_callback=on_progress)
    assert not result.is_error
    assert len(progress) >= 3 and progress == sorted(set(progress))


async def test_a_resource_read_waits_for_the_model_as_a_call_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """resources/read takes the tools/call path (mcp_sim.serving.call_path): it waits for the warm-up, and a failed
    warm-up is an error naming it, not a read against a model that never loaded."""
    engine = SlowLoadingEngine("buy milk\n")
    monkeypatch.setattr(warmup_module, "WAIT_REPORT_S", 0.05)
    simulator = Simulator(load_catalog([SPECS / "files.yaml"]), engine, SimOptions(attempts=1))
    warmup = Warmup(simulator)
    warmup.start()
    reads = []
    async with Client(create_server(simulator, warmup=warmup)) as client:

        async def read() -> None:
            reads.append(await client.read_resource("file:///notes/todo.txt"))

        async with anyio.create_task_group() as group:
            group.start_soon(read)
            await anyio.sleep(0.5)
            assert not reads and not engine.requests  # still waiting for the model
            engine.gate.set()
    assert reads[0].contents[0].text == "buy milk"  # type: ignore[union-attr]

    failing = SlowLoadingEngine(failure=ModelFileError("model file /x.gguf is truncated"))
    simulator = Simulator(load_catalog([SPECS / "files.yaml"]), failing, SimOptions(attempts=1))
    warmup = Warmup(simulator)
    warmup.start()
    failing.gate.set()
    async with Client(create_server(simulator, warmup=warmup)) as client:
        with pytest.raises(MCPError, match="truncated") as caught:
            await client.read_resource("file:///notes/todo.txt")
    assert caught.value.error.code == types.INTERNAL_ERROR and not failing.requests


class GatedIndexEngine(ScriptedEngine):
    """Loads at once and reads a first-call prompt at once; reading an index lasts until `index_gate` opens."""

    def __init__(self, *answers: str):
        super().__init__(*answers)
        self.index_gate = threading.Event()
        self.warmed: list[str] = []

    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        for messages in prompts:
            self.warmed.append(messages[0].content)
            if INDEX_INTRO in messages[0].content:
                assert self.index_gate.wait(30)


async def test_an_indexed_specs_first_call_waits_for_no_index_which_is_read_once_no_call_is_in_flight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: the first call of a 400-tool spec took 2.7x the same call in a 4-tool spec, as it read the
    whole index first. A world's first call goes without it; the index is read after, for the later calls."""
    monkeypatch.setattr(warmup_module, "WAIT_REPORT_S", 0.05)
    engine = GatedIndexEngine('{"found": false}', '{"found": false}')
    simulator = Simulator(load_catalog([SPECS / "crm.yaml"]), engine, SimOptions(attempts=1))
    simulator.catalog.spec_sets[0].prompt_layout = "index"  # as prompt_budget lays out a spec too large
    warmup = Warmup(simulator)
    async with Client(create_server(simulator, warmup=warmup)) as client:
        warmup.start()
        with anyio.fail_after(10):
            await client.call_tool("get_customer", {"customer_id": "C-1009"})  # answered with the gate shut
        first_system = engine.requests[0].messages[0].content
        assert INDEX_FIRST_CALL in first_system and INDEX_INTRO not in first_system
        assert engine.warmed[0] == first_system  # the prompt the call waited for is the one it was asked with
        with anyio.fail_after(10):
            while len(engine.warmed) < 2:  # the index, once the call was done
                await anyio.sleep(0.01)
        assert INDEX_INTRO in engine.warmed[1] and not warmup.ready
        engine.index_gate.set()
        with anyio.fail_after(10):
            await warmup.wait()
            await client.call_tool("get_customer", {"customer_id": "C-1010"})
    assert engine.requests[1].messages[0].content == engine.warmed[1]  # the world's later calls have the index
