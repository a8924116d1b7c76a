"""Resolving --model specs offline, through huggingface_hub's real cache layout and lookup functions.

Every test runs with HF_HUB_OFFLINE=1 and a proxy that refuses connections, so a network call would
fail loudly instead of quietly succeeding.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from huggingface_hub import hf_hub_download

from mcp_sim.base.errors import ModelFileError
from mcp_sim.models.hub import hub_cache_dir, locate, pull, resolve
from mcp_sim.models.registry import find_manifest
from tests.conftest import SPECS, mcp_sim_command, subprocess_env

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CACHED_REPO = "tests-owner/cached-smol-GGUF"
UNLISTED_REPO = "other-owner/SmolLM2-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEAD_PROXY = "http://127.0.0.1:9"

MANIFEST = f"""\
name = "cached-smol"
repo = "{CACHED_REPO}"
architecture = "llama"
context_length = 8192
license = "apache-2.0"
prompt_style = "generic"
thinks = false
default_quant = "Q4_1"

[sampling]
temperature = 0.1
top_p = 0.9
top_k = 30
max_tokens = 200

[quants.Q4_1]
file = "{FILE}"

[quants.Q8_0]
file = "SmolLM2-135M-Instruct.Q8_0.gguf"
"""


def add_to_hub_cache(cache: Path, repo: str, source: Path, filename: str) -> Path:
    """Lay a file out as huggingface_hub stores a download: blob by sha256, snapshot symlink, refs/main."""
    root = cache / f"models--{repo.replace('/', '--')}"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    blob = root / "blobs" / digest
    blob.parent.mkdir(parents=True, exist_ok=True)
    if not blob.exists():
        try:
            os.link(source, blob)
        except OSError:
            shutil.copyfile(source, blob)
    snapshot = root / "snapshots" / COMMIT / filename
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.symlink_to(os.path.relpath(blob, snapshot.parent))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_path: Path) -> Path:
    """An HF_HOME whose hub cache holds the SmolLM2 file under two repos, and a manifest for one."""
    hf_home = tmp_path / "hf"
    add_to_hub_cache(hf_home / "hub", CACHED_REPO, model_path, FILE)
    add_to_hub_cache(hf_home / "hub", UNLISTED_REPO, model_path, FILE)
    models = tmp_path / "models"
    models.mkdir()
    (models / "cached-smol.toml").write_text(MANIFEST)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HTTPS_PROXY", DEAD_PROXY)
    monkeypatch.setenv("HTTP_PROXY", DEAD_PROXY)
    monkeypatch.setenv("MCP_SIM_MODELS_DIR", str(models))
    return hf_home


def test_registry_name_resolves_from_the_cache(offline_hub: Path, model_path: Path) -> None:
    resolved = resolve("cached-smol:Q4_1")
    assert resolved.source == "hugging face cache"
    assert resolved.path.parent.name == COMMIT and resolved.path.name == FILE
    assert resolved.path.read_bytes()[:4] == b"GGUF"
    assert resolved.path.stat().st_size == model_path.stat().st_size
    assert resolved.manifest is not None and resolved.manifest.name == "cached-smol"
    # The same file that huggingface_hub itself hands out offline.
    assert Path(hf_hub_download(CACHED_REPO, FILE, cache_dir=hub_cache_dir(), local_files_only=True)) \
        == resolved.path
    assert resolve("cached-smol").path == resolved.path  # the default quant


def test_repo_and_quant_resolve_through_the_manifest_or_the_cache_listing(offline_hub: Path) -> None:
    by_repo = resolve(f"{CACHED_REPO}:Q4_1")
    assert by_repo.manifest is not None and by_repo.manifest.name == "cached-smol"
    unlisted = resolve(f"{UNLISTED_REPO}:q4_1")
    assert unlisted.repo == UNLISTED_REPO and unlisted.filename == FILE
    assert unlisted.path.is_file() and unlisted.source == "hugging face cache"
    exact = resolve(f"hf://{UNLISTED_REPO}/{FILE}")
    assert exact.path == unlisted.path


def test_missing_models_fail_with_the_pull_command(offline_hub: Path) -> None:
    with pytest.raises(ModelFileError) as caught:
        resolve("cached-smol:Q8_0")
    assert "`mcp-sim models pull cached-smol:Q8_0`" in str(caught.value)
    assert "HF_HUB_OFFLINE is set" in str(caught.value)
    with pytest.raises(ModelFileError, match=r"`mcp-sim models pull qwen-agentworld-35b-a3b`"):
        resolve("qwen-agentworld-35b-a3b")
    with pytest.raises(ModelFileError, match=r"`mcp-sim models pull qwen-agentworld-35b-a3b:Q8_0`"):
        resolve("qwen-agentworld-35b-a3b:Q8_0")
    with pytest.raises(ModelFileError, match=r"`mcp-sim models pull hf://nobody/none/x.gguf`"):
        resolve("hf://nobody/none/x.gguf")
    with pytest.raises(ModelFileError, match=rf"available: Q4_1. Pass one as {UNLISTED_REPO}:QUANT"):
        resolve(f"{UNLISTED_REPO}:Q2_K")
    with pytest.raises(ModelFileError, match="HF_HUB_OFFLINE is set"):
        pull("qwen3-4b")


def test_unknown_quant_and_unknown_names_are_explained(offline_hub: Path) -> None:
    with pytest.raises(ModelFileError, match="known quants: Q4_1, Q8_0"):
        resolve("cached-smol:Q2_K")
    with pytest.raises(ModelFileError, match=r"unknown model 'no-such-model'.*cached-smol"):
        resolve("no-such-model")
    with pytest.raises(ModelFileError, match="does not exist"):
        resolve("./nowhere/model.gguf")


def test_default_paths_and_dropped_files_need_no_hub(offline_hub: Path, tmp_path: Path,
                                                     model_path: Path) -> None:
    default = resolve(None)
    assert default.path == model_path and default.source == "bundled"
    assert default.manifest is not None and default.manifest.name == "smollm2-135m"
    dropped = tmp_path / "models" / "my-world.gguf"
    shutil.copyfile(model_path, dropped)
    for spec in ("my-world.gguf", "my-world"):
        found = resolve(spec)
        assert found.path == dropped and found.source == "models folder"
    assert resolve(str(model_path)).source == "file"
    manifest = find_manifest("cached-smol")
    assert manifest is not None
    assert locate(manifest, manifest.quant("Q4_1")) == (resolve("cached-smol").path, "hugging face cache")
    assert locate(manifest, manifest.quant("Q8_0")) is None


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcp_sim_command(*args), env=subprocess_env(**env), capture_output=True, text=True,
                          timeout=300)


def test_cli_serves_a_cached_model_offline_and_lists_it(offline_hub: Path, tmp_path: Path) -> None:
    env = {"HF_HOME": str(offline_hub), "HF_HUB_OFFLINE": "1", "HTTPS_PROXY": DEAD_PROXY,
           "HTTP_PROXY": DEAD_PROXY, "MCP_SIM_MODELS_DIR": str(tmp_path / "models")}
    called = run_cli("call", str(SPECS / "weather.yaml"), "--tool", "get_weather",
                     "--args", '{"city": "Lisbon"}', "--model", "cached-smol:Q4_1", "--max-tokens", "200",
                     env=env)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["structuredContent"]
    listed = run_cli("models", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("cached-smol"))
    assert "Q4_1" in row and str(offline_hub / "hub") in row
    missing = run_cli("models", "pull", "cached-smol:Q8_0", env=env)
    assert missing.returncode == 1
    assert "HF_HUB_OFFLINE is set" in missing.stderr
    assert "mcp-sim models pull cached-smol:Q8_0" in missing.stderr


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """Just enough of the Hub's file endpoint for hf_hub_download: HEAD for metadata, GET with ranges."""

    files: ClassVar[dict[str, Path]] = {}

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def _answer(self, with_body: bool) -> None:
        match = re.fullmatch(r"/([^/]+/[^/]+)/resolve/[^/]+/(.+)", self.path.split("?")[0])
        source = self.files.get(f"{match.group(1)}/{match.group(2)}") if match else None
        if source is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = source.read_bytes()
        start = int(re.findall(r"bytes=(\d+)-", self.headers.get("Range", "bytes=0-"))[0])
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if with_body:
            self.wfile.write(data[start:])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_hub(model_path: Path) -> Iterator[str]:
    _FakeHub.files = {f"{CACHED_REPO}/{FILE}": model_path}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_pull_downloads_into_the_hub_cache_then_resolves_offline(fake_hub: str, tmp_path: Path,
                                                                 model_path: Path) -> None:
    """A download through huggingface_hub itself, from a stand-in for the Hub on loopback (HF_ENDPOINT)."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "cached-smol.toml").write_text(MANIFEST)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": fake_hub, "MCP_SIM_MODELS_DIR": str(models),
           "HF_HUB_DISABLE_XET": "1", "NO_PROXY": "127.0.0.1"}
    pulled = run_cli("models", "pull", "cached-smol", env=env)
    assert pulled.returncode == 0, pulled.stderr
    repo_dir = tmp_path / "hf" / "hub" / f"models--{CACHED_REPO.replace('/', '--')}"
    cached = repo_dir / "snapshots" / COMMIT / FILE
    assert f"cached-smol: {cached} (98 MB, downloaded)" in pulled.stdout
    assert cached.is_symlink() and cached.stat().st_size == model_path.stat().st_size
    offline = run_cli("models", "list", env={**env, "HF_HUB_OFFLINE": "1"})
    assert f"hugging face cache: {cached}" in offline.stdout
    missing = run_cli("models", "pull", "cached-smol:Q8_0", env=env)
    assert missing.returncode == 1
    assert f"{CACHED_REPO} has no file SmolLM2-135M-Instruct.Q8_0.gguf" in missing.stderr
