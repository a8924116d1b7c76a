"""The HTTP transport's guarantees, against real `mcp-sim serve` subprocesses: loopback by default, a network
bind only with --allow-remote and a bearer token, Host and Origin checked on every bind.

Servers may bind 0.0.0.0 here, but every request goes to 127.0.0.1.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_sim.base.errors import McpSimError
from mcp_sim.serving.http_guard import check_bind, transport_security
from tests.conftest import SPECS, free_port, mcp_sim_command, stop, subprocess_env, wait_for_port

TOKEN_ENV = "MCP_SIM_TEST_TOKEN"
TOKEN = "s3cret-token-for-tests-0123456789abcdef"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "transport-test", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    port: int
    stderr: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def serve(tmp: Path, *args: str, **env: str) -> Served:
    port = free_port()
    stderr = tmp / f"serve-{port}.log"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            mcp_sim_command("serve", str(SPECS / "ops.yaml"), "--transport", "http", "--port", str(port),
                            "--max-tokens", "32", *args),
            env=subprocess_env(**env), stdout=subprocess.DEVNULL, stderr=sink)
    wait_for_port(port, process)
    return Served(process, port, stderr)


@pytest.fixture(scope="module")
def loopback_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = serve(tmp_path_factory.mktemp("loopback"))
    try:
        yield served
    finally:
        stop(served.process)


@pytest.fixture(scope="module")
def remote_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = serve(tmp_path_factory.mktemp("remote"), "--host", "0.0.0.0", "--allow-remote",
                   "--auth-token-env", TOKEN_ENV, "--allowed-host", "sim.example.test", **{TOKEN_ENV: TOKEN})
    try:
        yield served
    finally:
        stop(served.process)


def initialize(url: str, **headers: str) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=30)


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the LISTEN sockets on `port`, from the kernel's own table."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.rpartition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


# --- the bind ----------------------------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the kernel's socket table in /proc")
def test_http_binds_loopback_by_default(loopback_server: Served) -> None:
    assert listening_addresses(loopback_server.port) == {"0100007F"}  # 127.0.0.1, and nothing else


@pytest.mark.parametrize("args, env, says", [
    ([], {}, "Pass --allow-remote and --auth-token-env VAR"),
    (["--allow-remote"], {}, "Pass --auth-token-env VAR"),
    (["--auth-token-env", TOKEN_ENV], {TOKEN_ENV: TOKEN}, "Pass --allow-remote (VAR"),
    (["--allow-remote", "--auth-token-env", TOKEN_ENV], {TOKEN_ENV: ""},
     f"the environment variable {TOKEN_ENV} is empty or not set"),
], ids=["no-flags", "no-token", "no-allow-remote", "empty-token"])
def test_a_network_bind_without_both_flags_refuses_to_start(args: list[str], env: dict[str, str],
                                                             says: str) -> None:
    done = subprocess.run(
        mcp_sim_command("serve", str(SPECS / "ops.yaml"), "--transport", "http", "--host", "0.0.0.0",
                        "--port", str(free_port()), *args),
        env=subprocess_env(**env), capture_output=True, timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert says in stderr and "Traceback" not in stderr
    assert "refusing to serve HTTP on 0.0.0.0" in stderr or "--auth-token-env" in stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "mcp-box.local"])
def test_check_bind_refuses_every_non_loopback_address(host: str) -> None:
    with pytest.raises(McpSimError, match="--allow-remote and --auth-token-env VAR"):
        check_bind(host, allow_remote=False, auth_token=None)
    with pytest.raises(McpSimError, match="Pass --auth-token-env VAR"):
        check_bind(host, allow_remote=True, auth_token="")
    check_bind(host, allow_remote=True, auth_token=TOKEN)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_check_bind_lets_loopback_through_without_flags(host: str) -> None:
    check_bind(host, allow_remote=False, auth_token=None)


def test_allowed_hosts_add_names_and_a_lan_bind_allows_its_own_address() -> None:
    settings = transport_security("192.168.1.20", ["sim.example.test", "fe80::1", "box.lan:8443"])
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*", "192.168.1.20:*", "sim.example.test",
            "sim.example.test:*", "[fe80::1]:*", "box.lan:8443"} <= set(settings.allowed_hosts)
    assert "box.lan:8443:*" not in settings.allowed_hosts
    assert "https://sim.example.test:*" in settings.allowed_origins
    wildcard = transport_security("0.0.0.0")
    assert not any(host.startswith("0.0.0.0") for host in wildcard.allowed_hosts)


# --- DNS rebinding, on every bind ----------------------------------------------------------------------------


def test_a_loopback_server_refuses_a_foreign_host_and_origin(loopback_server: Served) -> None:
    assert initialize(loopback_server.url).status_code == 200
    assert initialize(loopback_server.url, Host="evil.example.com").status_code == 421
    assert initialize(loopback_server.url, Origin="http://evil.example.com").status_code == 403
    assert initialize(loopback_server.url, Origin=f"http://localhost:{loopback_server.port}").status_code == 200


def test_a_remote_server_refuses_a_foreign_host_and_origin_even_with_the_token(remote_server: Served) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert initialize(remote_server.url, Host="evil.example.com", **auth).status_code == 421
    assert initialize(remote_server.url, Origin="http://evil.example.com", **auth).status_code == 403
    named = f"sim.example.test:{remote_server.port}"
    assert initialize(remote_server.url, Host=named, Origin=f"http://{named}", **auth).status_code == 200


# --- the token --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}",
                                           f"Basic {TOKEN}", TOKEN, "Bearer"],
                         ids=["none", "wrong", "longer", "shorter", "basic", "no-scheme", "empty"])
def test_a_request_without_the_right_token_gets_401(remote_server: Served, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = initialize(remote_server.url, **headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "Bearer TOKEN" in response.json()["error_description"]


def test_a_remote_bind_says_so_at_startup(remote_server: Served) -> None:
    log = remote_server.stderr.read_text()
    assert "serving HTTP on 0.0.0.0" in log and "REACHABLE FROM OTHER MACHINES" in log
    assert TOKEN not in log


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_with_the_token_a_real_client_lists_and_calls_the_tools(remote_server: Served) -> None:
    # mcp 2.x's client speaks through httpx2; the header rides on the client handed to the transport.
    http_client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                                     timeout=httpx2.Timeout(30, read=120))
    async with http_client, Client(streamable_http_client(remote_server.url, http_client=http_client),
                                   mode="legacy", read_timeout_seconds=120) as client:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == {"restart_service", "drop_cache", "get_service_status",
                                                        "tail_logs"}
        result = await client.call_tool("get_service_status", {"service": "api"})
        assert result.meta is not None and result.meta["mcp-sim/simulation"]["simulated"] is True
