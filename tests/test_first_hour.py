"""What a newcomer meets in the first hour, with no model loaded: where -v goes, the startup line, files
written by other tools (a UTF-8 BOM), and a YAML typo."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcp_sim.base.errors import SpecError
from mcp_sim.cli import cli
from mcp_sim.core.specs import load_catalog
from mcp_sim.sources.openapi import import_openapi
from tests.conftest import REPO, SPECS, mcp_sim_command, start_http_server, stop, subprocess_env

WEATHER = SPECS / "weather.yaml"


@pytest.mark.parametrize("args", [["check", str(WEATHER), "-v"], ["-v", "check", str(WEATHER)],
                                  ["worlds", "list", "--url", "http://127.0.0.1:9", "-vv"]])
def test_verbose_works_after_the_subcommand_too(args: list[str]) -> None:
    """Regression: `mcp-sim serve ... -v` failed with "No such option '-v'"."""
    logging.getLogger().setLevel(logging.WARNING)
    result = CliRunner().invoke(cli, args)
    assert "No such option" not in result.output
    assert logging.getLogger().level == (logging.DEBUG if "-vv" in args else logging.INFO)


def test_http_startup_says_where_what_and_that_a_replay_loads_no_model() -> None:
    """Regression: one WARNING line and no URL; --replay-only named a model it never loaded."""
    process, url = start_http_server(str(WEATHER), "--replay-only")
    try:
        log = _log_of(process)
    finally:
        stop(process)
    assert f"mcp-sim ready at {url}: 2 tool(s) from {WEATHER}" in log
    assert "no model (--replay-only" in log and "?world=NAME" in log
    assert "gguf" not in log and "model loaded" not in log and "WARNING" not in log


def test_stdio_startup_line_shows_by_default() -> None:
    process = subprocess.Popen(mcp_sim_command("serve", str(WEATHER), "--replay-only"), env=subprocess_env(),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, stderr = process.communicate(b"", timeout=60)
    first = stderr.decode().splitlines()[0]
    assert first.startswith(f"mcp-sim serving on stdio: 2 tool(s) from {WEATHER} (prompt "), stderr.decode()
    assert "of 6,656 tokens); no model" in first
    assert '"mcp-sim/world"' in first


def _log_of(process: subprocess.Popen[bytes]) -> str:
    """The stderr file that start_http_server gave the process, once the startup line is in it."""
    log = next(target for target in (fd.resolve() for fd in Path(f"/proc/{process.pid}/fd").iterdir())
               if target.name.startswith("mcp-sim-serve-") and target.suffix == ".log")
    deadline = time.monotonic() + 10
    while "mcp-sim ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    return log.read_text()


def test_json_and_yaml_specs_and_openapi_documents_may_start_with_a_utf8_bom(tmp_path: Path) -> None:
    """Regression: "Unexpected UTF-8 BOM" (.NET writes one)."""
    bom = "\ufeff"
    tools = {"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}
    (tmp_path / "spec.json").write_text(bom + json.dumps(tools), encoding="utf-8")
    (tmp_path / "spec2.yaml").write_text(bom + "tools:\n  - {name: pong, inputSchema: {type: object}}\n",
                                         encoding="utf-8")
    assert set(load_catalog([tmp_path]).tools) == {"ping", "pong"}
    document = (REPO / "tests" / "data" / "openapi" / "openapi30.json").read_text()
    (tmp_path / "api.json").write_text(bom + document, encoding="utf-8")
    assert import_openapi(tmp_path / "api.json").document["tools"]


def test_a_yaml_syntax_error_names_the_file_and_the_place_in_one_line(tmp_path: Path) -> None:
    """Regression: PyYAML's 7-line message, with "<unicode string>" where the file name belongs."""
    spec = tmp_path / "broken.yaml"
    spec.write_text("tools:\n  - name: ping\n    inputSchema: {type: object\n  - name: pong\n")
    with pytest.raises(SpecError) as caught:
        load_catalog([spec])
    (problem,) = caught.value.problems
    assert problem.startswith(f"{spec}: not valid YAML: line ") and "column" in problem
    assert "<unicode string>" not in problem and "\n" not in problem
    api = tmp_path / "api.yaml"
    api.write_text("openapi: 3.0.0\ninfo: {title: x\n")
    result = CliRunner().invoke(cli, ["import", "openapi", str(api), "--out", str(tmp_path / "out.yaml")])
    assert result.exit_code == 1 and f"{api}: not valid YAML: line" in result.output
    assert "<unicode string>" not in result.output


def test_http_startup_line_reaches_a_file_while_the_model_loads() -> None:
    """Regression: with a model, the line never appeared: the quiet model load pointed fd 2 at /dev/null for
    the whole process while it was written."""
    process, url = start_http_server(str(WEATHER))
    try:
        log = _log_of(process)
    finally:
        stop(process)
    assert f"mcp-sim ready at {url}: 2 tool(s) from {WEATHER}" in log, log
    assert "; model " in log
