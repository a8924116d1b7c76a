"""Bad days through the real Simulator and MCP layer (a scripted world model): every fault kind fires at its
rate under a seed and is labelled, does to the call what it says, and the ledger records what would change."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from click.testing import CliRunner
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.app import assemble
from mcp_sim.base.errors import SpecError
from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY, SimOptions, SimulationResult, Simulator
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.base import Generation, GenerationRequest
from mcp_sim.rehearsal.fault_hook import FaultInjector, plan_rules
from mcp_sim.rehearsal.ledger import LedgerError, read_ledger
from mcp_sim.rehearsal.setup import RehearsalSettings
from mcp_sim.serving.server import create_server
from mcp_sim.xsim.fault_effects import injections
from mcp_sim.xsim.fault_kinds import Error
from mcp_sim.xsim.faults import AFTER_MODEL, BEFORE_MODEL, FaultFileError
from tests.conftest import REPO, SPECS
from tests.scripted import ScriptedEngine

OPS, CRM, FILES = SPECS / "ops.yaml", SPECS / "crm.yaml", SPECS / "files.yaml"
EXAMPLES = REPO / "examples" / "faults"
WORLD_ERROR = "service worker is locked by a running deploy"
# What each kind needs to be quick in a test; the rest of a rule is tool, kind and when.
QUICK: dict[str, dict[str, Any]] = {
    "latency": {"ms": 1}, "oversized": {"bytes": 2048}, "protocol_error": {"code": -32000, "message": "gone"},
    "error": {"message": "locked"}}


class WorldEngine(ScriptedEngine):
    """A scripted world model for ops.yaml: a valid answer per tool (each restart gives a new pid), and a
    failure when the grammar asks for one."""

    def __init__(self) -> None:
        super().__init__()
        self.restarts = 0

    def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        tool = (request.schema_key or "").split(":")[0]
        if tool == "mcp-sim/error":
            text = json.dumps({"error": WORLD_ERROR})
        elif tool == "restart_service":
            self.restarts += 1
            text = json.dumps({"service": "worker", "state": "running", "pid": 4100 + self.restarts,
                               "restarted_at": "2025-06-01T12:00:00Z"})
        elif tool == "get_service_status":
            text = json.dumps({"service": "api", "state": "running", "version": "2.14.1", "uptime_s": 10,
                               "pid": 2211, "healthy": True})
        elif tool == "drop_cache":
            text = json.dumps({"cache": "redis", "keys_removed": 3, "freed_mb": 1.5})
        elif tool == "create_ticket":
            text = json.dumps({"customer_id": "C-1001", "ticket": {
                "id": "T-9001", "subject": "help", "priority": "low", "status": "open", "assignee": None,
                "created_at": "2025-06-01T12:00:00Z", "closed_at": None}})
        else:
            text = "2025-06-01T12:00:00Z INFO all quiet"
        return Generation(text=text, prompt_tokens=self.count_tokens(request.messages),
                          completion_tokens=len(text.split()), finish_reason="stop")


def rules_file(tmp_path: Path, *rules: dict[str, Any]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump({"faults": list(rules)}), encoding="utf-8")
    return path


def bad_day(tmp_path: Path, *rules: dict[str, Any], specs: tuple[Path, ...] = (OPS,), seed: int = 7,
            ledger: bool = False) -> Simulator:
    """A simulator over SPECS with the rehearsal options a user would give: --faults, --ledger, --seed."""
    return assemble(load_catalog(list(specs)), WorldEngine(), SimOptions(seed=seed, attempts=1),
                    rehearsal=RehearsalSettings(faults=rules_file(tmp_path, *rules) if rules else None,
                                                ledger=tmp_path / "ledger.jsonl" if ledger else None))


def faults_of(result: SimulationResult | types.CallToolResult) -> list[dict[str, Any]]:
    meta = result.meta
    assert meta is not None
    return list(meta[META_KEY].get("faults", []))


RESTART = ("restart_service", {"service": "worker"})


# --- every kind: its rate under a seed, its label, its log line ------------------------------------------------

def fired_calls(simulator: Simulator, kind: str, calls: int) -> dict[int, dict[str, Any]]:
    """The calls (1-based) of restart_service on which a fault of KIND was applied, with its label."""
    fired = {}
    for number in range(1, calls + 1):
        result = simulator.simulate(*RESTART, world="w")
        if result.protocol_error is not None:  # the client gets a JSON-RPC error; the result still names it
            assert (result.protocol_error.code, result.protocol_error.message) == (-32000, "gone")
        labels = faults_of(result)
        assert [entry["kind"] for entry in labels] in ([], [kind]), labels
        if labels:
            fired[number] = {key: value for key, value in labels[0].items() if key != "source"}
            assert labels[0]["source"].endswith("faults.yaml#/faults/0")
    return fired


def seeded_run(tmp_path: Path, kind: str, seed: int) -> tuple[Simulator, dict[int, dict[str, Any]]]:
    rule = {"tool": "restart_*", "kind": kind, "probability": 0.3, **QUICK.get(kind, {})}
    simulator = bad_day(tmp_path, rule, seed=seed, ledger=kind == "protocol_error")
    assert isinstance(simulator.faults, FaultInjector)
    simulator.faults.timeout_hold_s = 0  # no client here to cancel: answer at once
    return simulator, fired_calls(simulator, kind, 100)


@pytest.mark.parametrize("kind", sorted(BEFORE_MODEL | AFTER_MODEL))
def test_every_kind_fires_at_its_rate_through_the_simulator_and_is_labelled(
        tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mcp_sim.rehearsal"):
        _simulator, first = seeded_run(tmp_path / "a", kind, seed=7)
    assert 15 <= len(first) <= 45, sorted(first)  # 30 expected
    assert seeded_run(tmp_path / "b", kind, seed=7)[1] == first  # the same seed, the same calls and labels
    assert sorted(seeded_run(tmp_path / "c", kind, seed=8)[1]) != sorted(first)
    assert f"fault {kind} applied to restart_service in world w" in caplog.text
    if kind == "protocol_error":
        entries = read_ledger(tmp_path / "a" / "ledger.jsonl")
        assert [e.faults for e in entries if e.is_error] == [["protocol_error"]] * len(first)
        assert {e.result for e in entries if e.is_error} == {"JSON-RPC error -32000: gone"}
        return
    for call, label in first.items():
        assert label["kind"] == kind and label["rule"] == 0 and label["call"] == call
        assert label["tool"] == "restart_service"


# --- what each kind does, seen by a real mcp.Client through create_server -------------------------------------

async def through_server(simulator: Simulator, *calls: tuple[str, dict[str, Any]],
                         world: str = "w") -> list[types.CallToolResult]:
    async with Client(create_server(simulator)) as client:
        await client.list_tools()  # the client validates structuredContent against the listed outputSchema
        return [await client.call_tool(name, arguments, meta={"mcp-sim/world": world}) for name, arguments in calls]


def history(simulator: Simulator, world: str = "w") -> list[str]:
    """What the world remembers of restart_service calls: the observations its next prompts hold."""
    found = simulator.worlds.find(world)
    assert found is not None
    return [turn.observation for turn in found.history(str(OPS))]


@pytest.mark.anyio
async def test_an_error_with_a_message_is_an_is_error_the_world_remembers(tmp_path: Path) -> None:
    message = "restart refused: worker is locked by another agent"
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "error", "nth": 1, "message": message})
    failed, after = await through_server(simulator, RESTART, RESTART)
    assert failed.is_error and failed.content[0].text == message  # type: ignore[union-attr]
    assert failed.structured_content is None and faults_of(failed)[0]["message"] == message
    assert faults_of(failed)[0]["kind"] == "error" and failed.meta[META_KEY]["source"] == "fault"  # type: ignore[index]
    assert not after.is_error and faults_of(after) == []
    assert history(simulator)[0] == json.dumps({"error": message})  # the next prompt holds the failure
    assert json.dumps({"error": message}) in simulator.engine.requests[0].messages[2].content  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_rate_limit_names_its_retry_after_and_leaves_the_world_alone(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "rate_limit", "after": 1, "retry_after": 120})
    first, limited = await through_server(simulator, RESTART, RESTART)
    assert not first.is_error and limited.is_error
    assert limited.content[0].text == "Rate limit exceeded for tool 'restart_service': retry after 120 s"  # type: ignore[union-attr]
    assert faults_of(limited) == [{"kind": "rate_limit", "rule": 0, "tool": "restart_service", "call": 2,
                                   "source": f"{tmp_path}/faults.yaml#/faults/0", "retry_after": 120}]
    assert len(history(simulator)) == 1


@pytest.mark.anyio
async def test_a_protocol_error_reaches_the_client_as_a_json_rpc_error_with_its_code(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "protocol_error", "nth": 1, "code": -32001,
                                   "message": "upstream connection reset"}, ledger=True)
    async with Client(create_server(simulator)) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool(*RESTART)
        assert (caught.value.code, caught.value.message) == (-32001, "upstream connection reset")
        assert not (await client.call_tool(*RESTART)).is_error  # the server goes on answering
    assert [e.faults for e in read_ledger(tmp_path / "ledger.jsonl")] == [["protocol_error"], []]


@pytest.mark.anyio
async def test_latency_delays_the_answer_and_is_labelled(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "get_*", "kind": "latency", "nth": 1, "ms": 400})
    started = time.monotonic()
    (slow,) = await through_server(simulator, ("get_service_status", {"service": "api"}))
    assert time.monotonic() - started >= 0.4
    assert not slow.is_error and slow.structured_content is not None and faults_of(slow)[0]["ms"] == 400


@pytest.mark.anyio
async def test_a_timeout_gets_no_answer_until_the_client_gives_up_then_the_server_answers(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "timeout", "nth": 1})
    async with Client(create_server(simulator), read_timeout_seconds=2) as client:
        started = time.monotonic()
        with pytest.raises((MCPError, TimeoutError)):
            await client.call_tool(*RESTART)
        assert 2 <= time.monotonic() - started < 10
        with anyio.fail_after(10):  # the held call let go of the world: the next one is answered
            answered = await client.call_tool(*RESTART)
    assert not answered.is_error and answered.structured_content is not None
    assert history(simulator, "default") == [answered.content[0].text]  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_empty_is_a_valid_result_with_no_content(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "empty", "nth": 1},
                        {"tool": "tail_logs", "kind": "empty", "nth": 1})
    empty, text_tool = await through_server(simulator, RESTART, ("tail_logs", {"service": "api"}))
    assert empty.content == [] and not empty.is_error and faults_of(empty)[0]["kind"] == "empty"
    schema = simulator.catalog.tools["restart_service"].output_schema
    assert schema is not None and validation_error(empty.structured_content, schema) is None
    assert text_tool.content == [] and text_tool.structured_content is None and not text_tool.is_error


@pytest.mark.anyio
async def test_oversized_pads_the_result_to_its_size(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "oversized", "nth": 1, "bytes": 200_000})
    (big,) = await through_server(simulator, RESTART)
    text = big.content[0].text  # type: ignore[union-attr]
    assert len(text.encode()) == 200_000 and json.loads(text) == big.structured_content
    assert faults_of(big)[0]["bytes"] == 200_000 and len(history(simulator)[0]) < 200  # the world keeps the answer


@pytest.mark.anyio
async def test_a_real_client_rejects_a_malformed_result_end_to_end(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "malformed", "nth": 2})
    async with Client(create_server(simulator)) as client:
        await client.list_tools()
        assert not (await client.call_tool(*RESTART)).is_error
        with pytest.raises(RuntimeError, match="Invalid structured content returned by tool restart_service"):
            await client.call_tool(*RESTART)


@pytest.mark.anyio
async def test_an_injection_rides_in_a_valid_field_and_the_shipped_attack_loads(tmp_path: Path) -> None:
    rules = yaml.safe_load((EXAMPLES / "injection.yaml").read_text())["faults"]
    assert plan_rules(load_catalog([FILES, SPECS / "crm.yaml"]), EXAMPLES / "injection.yaml")
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "injection", "nth": 1})
    (injected,) = await through_server(simulator, RESTART)
    label = faults_of(injected)[0]
    assert label["injection"] in injections() and label["at"].startswith("/")
    assert label["injection"] in json.dumps(injected.structured_content) and not injected.is_error
    assert label["injection"] not in history(simulator)[0]  # the world's history keeps the clean answer
    assert {rule["kind"] for rule in rules} == {"injection"}


@pytest.mark.anyio
async def test_stale_repeats_an_earlier_answer_of_the_tool(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "stale", "nth": 3})
    first, second, stale = await through_server(simulator, RESTART, RESTART, RESTART)
    assert first.structured_content != second.structured_content  # each restart gives a new pid
    assert stale.structured_content == second.structured_content
    assert faults_of(stale)[0]["repeats_turn"] == 2 and faults_of(stale)[0]["kind"] == "stale"
    assert json.loads(history(simulator)[2])["pid"] == 4103  # the world moved on all the same


@pytest.mark.anyio
async def test_an_error_without_a_message_is_written_by_the_world_model(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "restart_service", "kind": "error", "nth": 1})
    written, after = await through_server(simulator, RESTART, RESTART)
    assert written.is_error and written.content[0].text == WORLD_ERROR  # type: ignore[union-attr]
    assert faults_of(written)[0]["written_by"] == "model" and written.meta[META_KEY]["simulated_error"]  # type: ignore[index]
    first, second = simulator.engine.requests  # type: ignore[attr-defined]
    instruction = Error.instruction("restart_service")
    assert first.messages[-1].content.endswith(instruction) and first.json_schema["required"] == ["error"]
    assert instruction not in second.messages[-1].content  # the instruction was for that call only
    assert second.messages[-2].content == json.dumps({"error": WORLD_ERROR}) and not after.is_error


# --- rules in a spec, and what is refused at startup -----------------------------------------------------------

def ops_with_spec_faults(tmp_path: Path, faults: Any) -> Path:
    document = yaml.safe_load(OPS.read_text())
    document["tools"][0]["x-sim"]["faults"] = faults
    spec = tmp_path / "ops.yaml"
    spec.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return spec


def test_x_sim_faults_in_a_spec_fire_with_a_pointer_into_the_spec(tmp_path: Path) -> None:
    spec = ops_with_spec_faults(tmp_path, [{"kind": "rate_limit", "nth": 1, "retry_after": 9}])
    simulator = assemble(load_catalog([spec]), WorldEngine(), SimOptions(attempts=1))
    limited = simulator.simulate(*RESTART)
    assert limited.is_error and faults_of(limited)[0]["source"] == f"{spec}#/tools/0/x-sim/faults/0"
    assert not simulator.simulate(*RESTART).is_error


def test_bad_x_sim_faults_are_spec_problems_with_their_pointers(tmp_path: Path) -> None:
    spec = ops_with_spec_faults(tmp_path, [{"kind": "eror", "nth": 1}, {"tool": "drop_cache", "kind": "stale",
                                                                         "nth": 1}])
    with pytest.raises(SpecError) as caught:
        load_catalog([spec])
    where = f"{spec}#/tools/0/x-sim/faults"
    assert caught.value.problems[0].startswith(f"{where}/1/tool: 'drop_cache' does not name this tool")
    assert caught.value.problems[1].startswith(f"{where}/0/kind: Input should be 'error'")


def test_a_bad_rule_file_or_a_rule_for_no_tool_is_refused_at_startup(tmp_path: Path) -> None:
    with pytest.raises(FaultFileError) as caught:
        bad_day(tmp_path, {"tool": "restart_service", "kind": "latency", "nth": 1, "retry_after": 3})
    assert caught.value.problems == [f"{tmp_path}/faults.yaml#/faults/0: retry_after does not apply to kind "
                                     "'latency' (it takes ms)"]
    with pytest.raises(FaultFileError) as caught:
        bad_day(tmp_path, {"tool": "restart_servcie", "kind": "empty", "nth": 1})
    assert caught.value.problems[0].startswith(f"{tmp_path}/faults.yaml#/faults/0/tool: 'restart_servcie' "
                                               "matches no tool (tools: drop_cache, get_service_status")


def test_the_shipped_outage_loads_against_ops(tmp_path: Path) -> None:
    rules = plan_rules(load_catalog([OPS]), EXAMPLES / "outage.yaml")
    assert {rule.tool for rule in rules} == {"get_service_status", "restart_service", "tail_logs", "drop_cache"}
    with pytest.raises(FaultFileError, match="matches no tool"):
        plan_rules(load_catalog([SPECS / "weather.yaml"]), EXAMPLES / "outage.yaml")


def test_an_unwritable_ledger_is_refused_at_startup(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(LedgerError, match=r"cannot write the ledger .*pick a writable file with --ledger"):
        assemble(load_catalog([OPS]), WorldEngine(), rehearsal=RehearsalSettings(ledger=blocker / "ledger.jsonl"))


def test_call_refuses_a_bad_rule_file_with_its_pointer_before_the_model_loads(tmp_path: Path) -> None:
    bad = rules_file(tmp_path, {"tool": "nope", "kind": "timeout", "nth": 1})
    result = CliRunner().invoke(cli, ["call", str(OPS), "--tool", "restart_service", "--args", "{}",
                                      "--faults", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}#/faults/0/tool: 'nope' matches no tool" in result.output


# --- the ledger ------------------------------------------------------------------------------------------------

def test_the_ledger_records_writing_and_destructive_calls_and_skips_read_only_ones(tmp_path: Path) -> None:
    simulator = bad_day(tmp_path, {"tool": "drop_cache", "kind": "latency", "nth": 1, "ms": 5},
                        specs=(OPS, SPECS / "crm.yaml"), ledger=True)
    simulator.simulate(*RESTART, world="incident")
    simulator.simulate("get_service_status", {"service": "api"}, world="incident")
    simulator.simulate("tail_logs", {"service": "api"}, world="incident")
    simulator.simulate("drop_cache", {"cache": "redis"}, world="incident")
    simulator.simulate("create_ticket", {"customer_id": "C-1001", "subject": "help", "priority": "low"}, world="crm")
    entries = read_ledger(tmp_path / "ledger.jsonl")
    assert [(e.tool, e.destructive, e.world) for e in entries] == [
        ("restart_service", True, "incident"), ("drop_cache", True, "incident"), ("create_ticket", False, "crm")]
    assert entries[0].arguments == {"service": "worker"} and entries[0].structured is not None
    assert entries[1].faults == ["latency"] and entries[1].latency_ms is not None and entries[1].latency_ms >= 5
    assert {e.source for e in entries} == {"model"} and not any(e.is_error for e in entries)
