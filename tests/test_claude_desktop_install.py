"""`install claude-desktop` against temporary config files: entries added and updated, nothing else lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from mcp_sim.base.errors import SpecError
from mcp_sim.cli.sources import register
from mcp_sim.sources.claude_desktop import (
    ClaudeDesktopConfigError,
    default_command,
    default_config_path,
    install_claude_desktop,
)
from tests.conftest import SPECS, subprocess_env

WEATHER = SPECS / "weather.yaml"
CRM = SPECS / "crm.yaml"
COMMAND = ["/opt/mcp-sim/.venv/bin/mcp-sim"]
OTHERS: dict[str, Any] = {"globalShortcut": "Ctrl+Space",
          "mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"],
                                        "env": {"DEBUG": "1"}}}}


def test_adds_an_entry_keeping_every_other_key_and_backing_up_the_old_file(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    old_text = json.dumps(OTHERS, indent=4)
    config.write_text(old_text)
    result = install_claude_desktop([WEATHER], name=None, config=config, command=COMMAND)
    written = json.loads(config.read_text())
    assert written["globalShortcut"] == "Ctrl+Space"
    assert written["mcpServers"]["filesystem"] == OTHERS["mcpServers"]["filesystem"]
    assert written["mcpServers"]["weather-simulated"] == {"command": COMMAND[0],
                                                          "args": ["serve", str(WEATHER.resolve())]}
    assert result.name == "weather-simulated" and not result.updated and result.config == config
    assert result.backup is not None and result.backup.read_text() == old_text
    assert result.backup.parent == tmp_path and result.backup.name.startswith("claude_desktop_config.json.")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([config.name, result.backup.name])  # no temp left


def test_updates_an_entry_of_the_same_name_and_keeps_its_env(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"sim": {"command": "old", "args": ["serve", "x.yaml"],
                                                         "env": {"MCP_SIM_HOME": "/data"}}}}))
    first = install_claude_desktop([WEATHER, CRM], name="sim", config=config,
                                   command=[sys.executable, "-m", "mcp_sim"])
    second = install_claude_desktop([WEATHER, CRM], name="sim", config=config,
                                    command=[sys.executable, "-m", "mcp_sim"])
    entry = json.loads(config.read_text())["mcpServers"]["sim"]
    assert entry == {"command": sys.executable, "args": ["-m", "mcp_sim", "serve", str(WEATHER.resolve()),
                                                         str(CRM.resolve())], "env": {"MCP_SIM_HOME": "/data"}}
    assert first.updated and first.changed and first.backup
    # Regression: a re-run with no change wrote another backup and said "updated".
    assert second.updated and not second.changed and second.backup is None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([config.name, first.backup.name])


def test_creates_a_missing_config_and_its_folder_without_a_backup(tmp_path: Path) -> None:
    config = tmp_path / "Claude" / "claude_desktop_config.json"
    result = install_claude_desktop([WEATHER, CRM], name=None, config=config, command=COMMAND)
    assert result.backup is None and result.name == "mcp-sim"
    assert list(json.loads(config.read_text())["mcpServers"]) == ["mcp-sim"]


def test_a_malformed_config_is_a_clear_error_and_nothing_is_written(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    for text, message in [('{"mcpServers": {,}}', r"config.json: not valid JSON \(line 1, column 17"),
                          ("[1, 2]", "expected a JSON object at the top, got list"),
                          ('{"mcpServers": []}', r"config.json#/mcpServers: expected an object of servers")]:
        config.write_text(text)
        with pytest.raises(ClaudeDesktopConfigError, match=message):
            install_claude_desktop([WEATHER], name=None, config=config, command=COMMAND)
        assert config.read_text() == text and [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_a_spec_that_does_not_load_is_refused_before_the_config_is_touched(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    with pytest.raises(SpecError, match="no such file or directory"):
        install_claude_desktop([tmp_path / "nope.yaml"], name=None, config=config, command=COMMAND)
    assert not config.exists()


def test_default_config_path_per_operating_system(tmp_path: Path) -> None:
    home = Path("/home/ada")
    assert default_config_path("darwin", {}, home) == home / "Library/Application Support/Claude" / \
        "claude_desktop_config.json"
    assert default_config_path("win32", {"APPDATA": str(tmp_path)}, home) == tmp_path / "Claude" / \
        "claude_desktop_config.json"
    assert default_config_path("linux", {}, home) == home / ".config/Claude/claude_desktop_config.json"


def test_the_default_command_is_this_install_and_runs(tmp_path: Path) -> None:
    command = default_command()
    assert Path(command[0]).is_absolute()
    # What Claude Desktop will start must run.
    done = subprocess.run([*command, "serve", "--help"], capture_output=True, text=True, timeout=60,
                          env=subprocess_env())
    assert done.returncode == 0 and "--transport" in done.stdout


@click.group()
def cli() -> None:
    """A group like mcp-sim's own, with these commands registered."""


register(cli)


def test_install_command_prints_where_it_wrote_and_the_backup(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps(OTHERS))
    result = CliRunner().invoke(cli, ["install", "claude-desktop", str(WEATHER), "--name", "wx",
                                      "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert f"added server 'wx' in {config}" in result.stdout and "backup of the previous config: " in result.stdout
    entry = json.loads(config.read_text())["mcpServers"]["wx"]
    assert Path(entry["command"]).is_absolute() and entry["args"][-2:] == ["serve", str(WEATHER.resolve())]
    config.write_text("{not json")
    broken = CliRunner().invoke(cli, ["install", "claude-desktop", str(WEATHER), "--config", str(config)])
    assert broken.exit_code == 1 and broken.stderr.startswith("Error: ") and "not valid JSON" in broken.stderr
    assert "Traceback" not in broken.output


def test_serve_options_reach_the_entry_with_absolute_paths_and_a_rerun_is_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: install could not pass --model, --faults, --cache or --scenario to serve."""
    from mcp_sim.cli import cli as full_cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "outage.yaml").write_text((SPECS.parent / "examples" / "faults" / "outage.yaml").read_text())
    config = tmp_path / "config.json"
    ops = str(SPECS / "ops.yaml")
    args = ["install", "claude-desktop", ops, "--config", str(config), "--faults", "outage.yaml",
            "--cache", "c.db", "--scenario=postgres-down", "--model", "qwen-agentworld-35b-a3b", "--simulate-errors"]
    first = CliRunner().invoke(full_cli, args)
    assert first.exit_code == 0, first.output
    entry = json.loads(config.read_text())["mcpServers"]["ops-simulated"]
    assert entry["args"][-10:] == ["serve", ops, "--faults", str(tmp_path / "outage.yaml"), "--cache",
                                   str(tmp_path / "c.db"), "--scenario=postgres-down", "--model",
                                   "qwen-agentworld-35b-a3b", "--simulate-errors"]
    again = CliRunner().invoke(full_cli, args)
    assert again.exit_code == 0 and again.stdout.startswith("unchanged: ") and "backup" not in again.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "outage.yaml"]
    typo = CliRunner().invoke(full_cli, [*args, "--modle", "x"])
    assert typo.exit_code == 2 and "--modle" in typo.output
