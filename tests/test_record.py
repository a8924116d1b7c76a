"""`mcp-sim record` as a transparent proxy in front of real servers, driven by a real client."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.rehearsal.traces import REDACTED, read_traces
from tests.conftest import free_port, mcp_sim_command, stop, subprocess_env, wait_for_port
from tests.fidelity_helpers import (
    LINGERING_SERVER,
    PAGED_SERVER,
    everything_server,
    filesystem_server,
    live_tools,
    recorder,
    stdio,
    time_server,
    wire,
)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_record_filesystem_session_is_transparent_redirected_and_flushed_per_line(tmp_path: Path) -> None:
    root = os.path.realpath(tmp_path / "work")
    Path(root).mkdir()
    trace = tmp_path / "fs.jsonl"
    calls = [("write_file", {"path": f"{root}/notes.txt", "content": "alpha\nbeta\n"}),
             ("read_text_file", {"path": f"{root}/notes.txt"}),
             ("list_directory", {"path": root}),
             ("edit_file", {"path": f"{root}/notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
             ("read_text_file", {"path": f"{root}/notes.txt"}),
             ("read_text_file", {"path": f"{root}/missing.txt"})]
    received = []

    async def agent() -> list[dict]:
        proxy = recorder(trace, filesystem_server(root), "--session", "fs-1", "--replace", f"{root}=/sandbox")
        async with Client(proxy, mode="legacy") as client:
            assert client.server_info is not None and client.server_info.name == "secure-filesystem-server"
            listed = [t.model_dump(by_alias=True, exclude_none=True, mode="json")
                      for t in (await client.list_tools()).tools]
            for number, (tool, arguments) in enumerate(calls, 1):
                result = await client.call_tool(tool, arguments)
                received.append(wire(result))
                # Each call is on disk before the agent sees its result: flushed per line.
                assert len(lines(trace)) == number
            return listed

    listed = anyio.run(agent)
    assert listed == anyio.run(live_tools, stdio(filesystem_server(root)))  # tools/list passed through as is
    assert (Path(root) / "notes.txt").read_text() == "alpha\ngamma\n"  # the real server really ran
    assert received[4]["structuredContent"] == {"content": "alpha\ngamma\n"}
    assert received[5]["isError"] is True

    records = read_traces([trace])
    expected_steps = [("fs-1", number, tool) for number, (tool, _) in enumerate(calls, 1)]
    assert [(r.session, r.step, r.tool) for r in records] == expected_steps
    for record, result, (_, arguments) in zip(records, received, calls, strict=True):
        expected = json.loads(json.dumps(result).replace(root, "/sandbox"))
        assert record.result == expected
        assert record.arguments == json.loads(json.dumps(arguments).replace(root, "/sandbox"))
        assert record.is_error == result["isError"]
        assert record.latency_ms > 0 and record.server == "secure-filesystem-server" and record.recorded_at
    assert records[0].arguments["path"] == "/sandbox/notes.txt"
    assert root not in trace.read_text()


def test_record_redacts_secret_looking_fields_but_forwards_them(tmp_path: Path) -> None:
    trace = tmp_path / "env.jsonl"
    secret = "hunter2-not-for-traces"

    async def agent(*options: str) -> tuple[str, str]:
        proxy = recorder(trace, everything_server(), *options, MY_API_KEY=secret)
        async with Client(proxy, mode="legacy") as client:
            env_text = (await client.call_tool("get-env", {})).content[0].text  # type: ignore[union-attr]
            echo_text = (await client.call_tool("echo", {"message": "hello there"})).content[0].text  # type: ignore[union-attr]
            return env_text, echo_text

    env_text, echo_text = anyio.run(agent)
    assert json.loads(env_text)["MY_API_KEY"] == secret  # the agent gets the real answer
    assert echo_text == "Echo: hello there"
    assert secret not in trace.read_text()
    recorded_env = json.loads(read_traces([trace])[0].text)
    assert recorded_env["MY_API_KEY"] == REDACTED
    assert recorded_env["PATH"] == json.loads(env_text)["PATH"]  # only secret-looking names are touched

    trace.unlink()
    anyio.run(agent, "--redact", "(?i)^message$")
    first, second = read_traces([trace])
    assert second.arguments == {"message": REDACTED}
    # --redact replaces the default patterns: the API key is no longer a secret-looking name.
    assert json.loads(first.text)["MY_API_KEY"] == secret


def test_record_keeps_protocol_errors_and_raises_them_to_the_agent(tmp_path: Path) -> None:
    trace = tmp_path / "paged.jsonl"

    async def agent() -> None:
        async with Client(recorder(trace, PAGED_SERVER, "--session", "p"), mode="legacy") as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["ping"]  # page 1, cursor passed on
            page2 = await client.list_tools(cursor="1")
            assert [t.name for t in page2.tools] == ["bad_schema", "boom"]
            with pytest.raises(MCPError, match="boom refuses every call"):
                await client.call_tool("boom", {"password": "s3cret"})
            assert (await client.call_tool("ping", {})).content[0].text == "pong"  # type: ignore[union-attr]

    anyio.run(agent)
    boom, ping = read_traces([trace])
    assert boom.protocol_error == -32602 and boom.is_error and "boom refuses" in boom.text
    assert boom.arguments == {"password": REDACTED}
    assert (ping.step, ping.is_error, ping.protocol_error) == (2, False, None)

    # Appending to the same file with the same session name continues its step count.
    anyio.run(agent)
    assert [r.step for r in read_traces([trace])] == [1, 2, 3, 4]


def test_record_over_http_gives_each_agent_connection_its_own_session(tmp_path: Path) -> None:
    trace = tmp_path / "time.jsonl"
    port = free_port()
    proxy = subprocess.Popen(
        mcp_sim_command("record", "--out", str(trace), "--transport", "http", "--port", str(port), "--",
                        *time_server()),
        env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    async def agent(zone: str) -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            await client.call_tool("get_current_time", {"timezone": zone})
            await client.call_tool("convert_time", {"source_timezone": zone, "time": "12:00",
                                                    "target_timezone": "UTC"})

    try:
        wait_for_port(port, proxy)
        anyio.run(agent, "Europe/Paris")
        anyio.run(agent, "Asia/Tokyo")
    finally:
        stop(proxy)
    records = read_traces([trace])
    sessions = list(dict.fromkeys(r.session for r in records))
    assert len(sessions) == 2
    for session, zone in zip(sessions, ["Europe/Paris", "Asia/Tokyo"], strict=True):
        steps = [r for r in records if r.session == session]
        assert [(r.step, r.tool) for r in steps] == [(1, "get_current_time"), (2, "convert_time")]
        assert steps[0].structured["timezone"] == zone and steps[0].server == "mcp-time"


def test_record_in_front_of_an_http_server(tmp_path: Path) -> None:
    trace = tmp_path / "everything.jsonl"
    port = free_port()
    upstream = subprocess.Popen(everything_server("streamableHttp"), env=subprocess_env(PORT=str(port)),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def agent() -> str:
        proxy = stdio(mcp_sim_command("record", "--out", str(trace), "--session", "web", "--url",
                                      f"http://127.0.0.1:{port}/mcp"))
        async with Client(proxy, mode="legacy") as client:
            assert client.server_info is not None and client.server_info.name == "mcp-servers/everything"
            result = await client.call_tool("get-sum", {"a": 2, "b": 40})
            return result.content[0].text  # type: ignore[union-attr]

    try:
        wait_for_port(port, upstream)
        answer = anyio.run(agent)
    finally:
        stop(upstream)
    (record,) = read_traces([trace])
    assert "42" in answer and record.text == answer
    assert (record.session, record.step, record.tool) == ("web", 1, "get-sum")
    assert record.arguments == {"a": 2, "b": 40}
    assert record.server == "mcp-servers/everything"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie nobody reaped yet has stopped too
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_record_stops_a_real_server_that_outlives_its_stdin(tmp_path: Path) -> None:
    # Like server-redis: after its stdin closes the server lingers (here 60 s), so the agent's client runs
    # out of grace and SIGTERMs the proxy while the proxy is still stopping the server.
    pid_file = tmp_path / "server.pid"

    async def agent() -> str:
        proxy = recorder(tmp_path / "t.jsonl", LINGERING_SERVER, "--session", "s", LINGER_PID_FILE=str(pid_file))
        async with Client(proxy, mode="legacy") as client:
            await client.call_tool("write_note", {"text": "kept"})
            result = await client.call_tool("read_note", {})
            return wire(result)["content"][0]["text"]

    assert anyio.run(agent) == "kept"
    deadline = time.monotonic() + 10
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the real server outlived the recording proxy"
    assert [r["tool"] for r in lines(tmp_path / "t.jsonl")] == ["write_note", "read_note"]
