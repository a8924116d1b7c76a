"""`mcp-sim record` keeps what the real server sends the client during a call (progress, log messages, sampling
and elicitation requests with their answers), and a cassette sends them again: the real everything server
behind the real recording proxy, a real MCP client on both sides, no model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.rehearsal.cassettes import Cassette
from mcp_sim.rehearsal.sources import CassetteSource
from mcp_sim.serving.server import create_server
from tests.fidelity_helpers import everything_server, recorder, wire
from tests.scripted import ScriptedEngine

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")

CALLS = [("trigger-sampling-request", {"prompt": "hello", "maxTokens": 10}),
         ("trigger-long-running-operation", {"duration": 1, "steps": 2}),
         ("trigger-elicitation-request", {})]
SPEC = "tools:\n" + "".join(f"  - {{name: {name}, inputSchema: {{type: object}}}}\n" for name, _ in CALLS)


class Agent:
    """A client that answers sampling and declines elicitation, and notes everything it is sent."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.heard: list[tuple[str, Any]] = []

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.heard.append(("sampling", params.model_dump(by_alias=True, exclude_none=True, mode="json")))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=self.answer),
                                         model="agent-model")

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.heard.append(("elicitation", params.model_dump(by_alias=True, exclude_none=True, mode="json")))
        return types.ElicitResult(action="decline")

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.heard.append(("progress", (progress, total)))

    def client(self, target: Any) -> Client:
        return Client(target, mode="legacy", sampling_callback=self.sampling, elicitation_callback=self.elicitation)

    async def run(self, target: Any) -> list[dict[str, Any]]:
        async with self.client(target) as client:
            return [wire(await client.call_tool(name, arguments, progress_callback=self.progress))
                    for name, arguments in CALLS]


def test_record_keeps_the_servers_requests_and_notifications_and_a_cassette_replays_them(tmp_path: Path) -> None:
    trace = tmp_path / "everything.jsonl"
    live = Agent("a real answer")
    real = anyio.run(live.run, recorder(trace, everything_server()))

    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [record["tool"] for record in records] == [name for name, _ in CALLS]
    # The everything server also asks for roots after connecting (this agent has none) and sends log messages
    # on a timer: those land in whichever call is in flight, so each call is checked for its own kind only.
    sampling, progress, elicitation = (record["interactions"] for record in records)
    sampled = [event for event in sampling if event.get("request") == "sampling/createMessage"]
    assert len(sampled) == 1
    assert sampled[0]["params"] == live.heard[0][1]  # as the real server asked it
    assert sampled[0]["result"]["content"] == {"type": "text", "text": "a real answer"}  # as the agent answered
    assert [e["params"]["progress"] for e in progress if e.get("notification") == "notifications/progress"] == [1, 2]
    elicited = [event for event in elicitation if event.get("request") == "elicitation/create"]
    assert len(elicited) == 1 and elicited[0]["result"] == {"action": "decline"}
    assert "a real answer" in json.dumps(real[0])  # the real server's result used the agent's answer

    spec = tmp_path / "everything.yaml"
    spec.write_text(SPEC)
    cassette = CassetteSource(Cassette.load([trace]))
    server = create_server(Simulator(load_catalog([spec]), ScriptedEngine(), SimOptions(attempts=1),
                                     sources=[cassette]))
    rehearsed = Agent("another answer")
    replayed = anyio.run(rehearsed.run, server)
    assert replayed == real  # the recorded results, byte for byte
    # The rehearsed agent is asked and told what the live one was, in the same order.
    assert [kind for kind, _ in rehearsed.heard] == [kind for kind, _ in live.heard]
    assert rehearsed.heard == live.heard
