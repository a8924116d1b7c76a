"""Shared fixtures: the real model, the shipped specs, and how to start mcp-sim as a subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from mcp_sim.base.defaults import PROMPT_CACHE_ENV
from mcp_sim.models.bundled import default_model_path
from mcp_sim.models.registry import MODELS_DIR_ENV

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "tool_specs"


@pytest.fixture(scope="session", autouse=True)
def prompt_states(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One folder of system prompts' model states for the whole run, set before any server starts (module
    fixtures included): a server the suite starts loads the prompts an earlier one read, as a restarted
    server would, and the developer's own cache is left alone."""
    folder = tmp_path_factory.mktemp("prompt-states")
    before = os.environ.get(PROMPT_CACHE_ENV)
    os.environ[PROMPT_CACHE_ENV] = str(folder)
    yield folder
    if before is None:
        os.environ.pop(PROMPT_CACHE_ENV, None)
    else:
        os.environ[PROMPT_CACHE_ENV] = before


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the code under test (and the servers it starts) away from the developer's model folders and
    Hugging Face cache: every variable mcp-sim reads for them points into a fresh directory."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HF_HOME", str(home / "huggingface"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(home / "models"))
    for variable in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN", "HF_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    return home


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def model_path() -> Path:
    return default_model_path()


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a child mcp-sim: it imports this checkout, whichever worktree that is."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def mcp_sim_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcp_sim", *args]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


def start_http_server(*serve_args: str, timeout: float = 60.0) -> tuple[subprocess.Popen[bytes], str]:
    """`mcp-sim serve ... --transport http` on a free loopback port; returns the process and its URL."""
    port = free_port()
    # stderr goes to a file: a pipe nobody reads fills after ~64 KB of log lines and blocks the server.
    log = tempfile.NamedTemporaryFile(prefix=f"mcp-sim-serve-{port}-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(
        mcp_sim_command("serve", *serve_args, "--transport", "http", "--port", str(port)),
        env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=log)
    log.close()
    wait_for_port(port, process, timeout)
    return process, f"http://127.0.0.1:{port}/mcp"


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """One real HTTP server over every shipped spec, with prompts exposed for inspection."""
    process, url = start_http_server(str(SPECS), "--expose-prompt")
    try:
        yield url
    finally:
        stop(process)


@contextmanager
def llama_cpp_server(model: Path, log: Path, alias: str, *options: str) -> Iterator[str]:
    """`python -m llama_cpp.server` serving MODEL on a free loopback port (through tests/peers/llama_cpp_server.py,
    which applies --cpu-repack auto); yields its /v1 URL once it answers.
    Its log goes to a file: the server logs a lot, and a full pipe would stall it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.peers.llama_cpp_server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--model_alias", alias, *options], stdout=subprocess.DEVNULL, stderr=log.open("wb"),
        env=subprocess_env(), cwd=REPO)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("llama_cpp.server did not come up within 120 s")
            time.sleep(0.3)
        yield url
    finally:
        stop(process)
