"""Bad days with the real parts: the SmolLM2 world model writes a failure, `mcp-sim call` and a real
`mcp-sim serve` take --faults and --ledger, and a server killed with -9 leaves a readable ledger."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from click.testing import CliRunner
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.app import assemble
from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY, SimOptions
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.rehearsal.ledger import read_ledger
from mcp_sim.rehearsal.setup import RehearsalSettings
from mcp_sim.xsim.fault_kinds import Error
from tests.conftest import SPECS, start_http_server, stop

OPS, CRM = SPECS / "ops.yaml", SPECS / "crm.yaml"
LOCKED = "restart refused: worker is locked by another agent"


def rules_file(tmp_path: Path, *rules: dict[str, Any]) -> Path:
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump({"faults": list(rules)}), encoding="utf-8")
    return path


def test_the_world_model_writes_a_failure_for_the_call_and_the_world_remembers_it(
        tmp_path: Path, model_path: Path) -> None:
    simulator = assemble(load_catalog([OPS]), LlamaEngine(model_path, n_ctx=4096, n_threads=2),
                         SimOptions(max_tokens=64, attempts=2, expose_prompt=True),
                         rehearsal=RehearsalSettings(faults=rules_file(tmp_path, {"tool": "restart_service",
                                                                                  "kind": "error", "nth": 1})))
    failed = simulator.simulate("restart_service", {"service": "worker"}, world="bad")
    instruction = Error.instruction("restart_service")
    assert failed.is_error and failed.structured is None
    assert failed.text.strip() and failed.text not in instruction and "<" not in failed.text, failed.text
    fault = failed.meta[META_KEY]["faults"][0]
    assert fault["kind"] == "error" and fault["written_by"] == "model"
    later = simulator.simulate("get_service_status", {"service": "worker"}, world="bad")
    prompt = later.meta[META_KEY]["prompt"]
    assert prompt[2] == {"role": "assistant", "content": json.dumps({"error": failed.text}, ensure_ascii=False)}
    assert instruction not in json.dumps(prompt)  # the instruction was in that one call's prompt only


def test_call_takes_faults_and_ledger_and_the_ledger_command_sums_them_up(tmp_path: Path) -> None:
    faults = rules_file(tmp_path, {"tool": "restart_service", "kind": "error", "nth": 1, "message": LOCKED},
                        {"tool": "drop_cache", "kind": "protocol_error", "nth": 1, "code": -32001,
                         "message": "orchestrator unreachable"})
    ledger = tmp_path / "ledger.jsonl"
    common = ["--faults", str(faults), "--ledger", str(ledger), "--max-tokens", "48"]
    restart = CliRunner().invoke(cli, ["call", str(OPS), "--tool", "restart_service", "--args",
                                       '{"service": "worker"}', *common])
    assert restart.exit_code == 1, restart.output
    payload = json.loads(restart.stdout)
    assert payload["isError"] and payload["content"][0]["text"] == LOCKED
    assert payload["_meta"][META_KEY]["faults"][0]["kind"] == "error"
    dropped = CliRunner().invoke(cli, ["call", str(OPS), "--tool", "drop_cache", "--args", '{"cache": "cdn"}',
                                       *common])
    assert dropped.exit_code == 1 and "JSON-RPC error -32001: orchestrator unreachable" in dropped.output
    status = CliRunner().invoke(cli, ["call", str(OPS), "--tool", "get_service_status", "--args",
                                      '{"service": "api"}', *common])  # read-only: answered, not in the ledger
    assert json.loads(status.stdout)["_meta"][META_KEY]["source"] == "model", status.output
    assert [(e.tool, e.destructive, e.faults) for e in read_ledger(ledger)] == [
        ("restart_service", True, ["error"]), ("drop_cache", True, ["protocol_error"])]
    summary = CliRunner().invoke(cli, ["ledger", str(ledger)])
    assert summary.exit_code == 0
    assert ("2 calls that change the world in 1 world: 2 destructive (drop_cache x1, restart_service x1); "
            "2 failed, 2 under injected faults.") in summary.output


async def calls_of_every_sort(url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(url, read_timeout_seconds=120) as client:
        seen["restart"] = await client.call_tool("restart_service", {"service": "worker"})
        with pytest.raises(MCPError) as caught:
            await client.call_tool("drop_cache", {"cache": "redis"})
        seen["protocol"] = (caught.value.code, caught.value.message)
        seen["ticket"] = await client.call_tool("create_ticket", {"customer_id": "C-1001", "subject": "Refund",
                                                                  "priority": "high"})
        seen["status"] = await client.call_tool("get_service_status", {"service": "api"})
    return seen


async def kill_while_a_call_is_held(url: str, pid: int) -> Exception | None:
    """kill -9 the server while a call (held by a timeout fault) waits for its answer; what the client got."""
    try:
        with anyio.fail_after(30):
            async with Client(url, read_timeout_seconds=120) as client, anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "restart_service", {"service": "api"})
                await anyio.sleep(1.0)
                os.kill(pid, signal.SIGKILL)
    except Exception as exc:  # the held call dies with the server
        return exc
    return None


@pytest.mark.anyio
async def test_a_served_bad_day_fills_the_ledger_and_survives_kill_9(tmp_path: Path) -> None:
    faults = rules_file(tmp_path, {"tool": "restart_service", "kind": "error", "nth": 1, "message": LOCKED},
                        {"tool": "restart_service", "kind": "timeout", "nth": 2},
                        {"tool": "drop_cache", "kind": "protocol_error", "nth": 1, "code": -32001},
                        {"tool": "create_ticket", "kind": "rate_limit", "probability": 1.0, "retry_after": 60})
    ledger = tmp_path / "ledger.jsonl"
    process, url = start_http_server(str(OPS), str(CRM), "--faults", str(faults), "--ledger", str(ledger),
                                     "--max-tokens", "48", "--seed", "3")
    try:
        seen = await calls_of_every_sort(url)
        held = await kill_while_a_call_is_held(url, process.pid)
    finally:
        stop(process)
    assert process.returncode == -signal.SIGKILL and held is not None
    assert seen["restart"].is_error and seen["restart"].content[0].text == LOCKED
    assert seen["protocol"] == (-32001, "Internal error")
    assert "retry after 60 s" in seen["ticket"].content[0].text
    assert seen["status"].meta[META_KEY]["source"] == "model"
    entries = read_ledger(ledger)  # every completed call, none torn; the read-only one is not there
    assert [(e.tool, e.destructive, e.faults, e.is_error) for e in entries] == [
        ("restart_service", True, ["error"], True), ("drop_cache", True, ["protocol_error"], True),
        ("create_ticket", False, ["rate_limit"], True)]
    summary = CliRunner().invoke(cli, ["ledger", str(ledger)])
    assert "2 destructive (drop_cache x1, restart_service x1), 1 write (create_ticket x1)" in summary.output
