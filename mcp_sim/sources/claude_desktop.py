"""Add a simulated server to Claude Desktop's `claude_desktop_config.json`, keeping everything else in it."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_sim.base.errors import McpSimError, parse_failure
from mcp_sim.core.specs import load_catalog

CONFIG_NAME = "claude_desktop_config.json"


class ClaudeDesktopConfigError(McpSimError):
    """The existing Claude Desktop config cannot be read or updated; nothing was written."""


@dataclass(frozen=True)
class InstallResult:
    config: Path
    backup: Path | None  # None when there was no config file before
    name: str
    entry: dict[str, Any]
    updated: bool  # an entry of that name was already there
    changed: bool = True  # False: the entry was already exactly this, and nothing was written


def install_claude_desktop(spec_paths: list[Path], *, name: str | None = None, config: Path | None = None,
                           command: list[str] | None = None, serve_options: list[str] | None = None) -> InstallResult:
    """Add (or update) `mcpServers.NAME` so that Claude Desktop runs `mcp-sim serve SPEC... SERVE_OPTIONS`
    from this install. An entry that is already exactly that is left alone: no write, no backup."""
    specs = [Path(p).resolve() for p in spec_paths]
    load_catalog(list(specs))  # a spec that does not load would only fail later, inside Claude Desktop
    config = Path(config) if config is not None else default_config_path()
    name = name or default_server_name(specs)
    if not name.strip():
        raise ClaudeDesktopConfigError("the server name must not be empty (pass --name NAME)")
    current = read_config(config)
    launcher = command or default_command()
    servers = current.setdefault("mcpServers", {})
    updated = name in servers
    kept = servers.get(name) if isinstance(servers.get(name), dict) else {}  # e.g. an "env" the user added
    entry = {**kept, "command": launcher[0],
             "args": [*launcher[1:], "serve", *map(str, specs), *(serve_options or [])]}
    if servers.get(name) == entry:
        return InstallResult(config, None, name, entry, updated, changed=False)
    servers[name] = entry
    backup = _backup(config) if config.exists() else None
    write_atomically(config, json.dumps(current, indent=2, ensure_ascii=False) + "\n")
    return InstallResult(config, backup, name, entry, updated)


def default_config_path(platform: str = sys.platform, environ: Mapping[str, str] = os.environ,
                        home: Path | None = None) -> Path:
    """Where Claude Desktop keeps its config on this operating system."""
    home = home or Path.home()
    if platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / CONFIG_NAME
    if platform.startswith("win"):
        appdata = environ.get("APPDATA")
        return (Path(appdata) if appdata else home / "AppData" / "Roaming") / "Claude" / CONFIG_NAME
    config_home = environ.get("XDG_CONFIG_HOME")
    return (Path(config_home) if config_home else home / ".config") / "Claude" / CONFIG_NAME


def default_command() -> list[str]:
    """This install's `mcp-sim` console script by absolute path, else this interpreter with `-m mcp_sim`."""
    scripts = Path(sys.executable).parent
    for candidate in (scripts / "mcp-sim", scripts / "mcp-sim.exe"):
        if candidate.is_file():
            return [str(candidate.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "mcp_sim"]


def default_server_name(specs: list[Path]) -> str:
    return f"{specs[0].stem}-simulated" if len(specs) == 1 else "mcp-sim"


def read_config(config: Path) -> dict[str, Any]:
    """The config as a mapping ({} when there is none yet); a malformed one is an error naming the file."""
    if not config.exists():
        return {}
    try:
        text = config.read_text(encoding="utf-8-sig")  # -sig: a UTF-8 BOM (Windows editors) is dropped
    except (OSError, UnicodeDecodeError) as exc:
        raise ClaudeDesktopConfigError(f"{config}: cannot read: {exc}") from None
    if not text.strip():
        return {}
    try:
        current = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClaudeDesktopConfigError(f"{config}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                                       f"{exc.msg}); fix or move the file, then run this again. "
                                       "Nothing was written.") from None
    except (ValueError, RecursionError) as exc:  # integers past 4300 digits, nesting past the stack
        raise ClaudeDesktopConfigError(f"{config}: not a usable JSON config ({parse_failure(exc)}); fix or move "
                                       "the file, then run this again. Nothing was written.") from None
    if not isinstance(current, dict):
        raise ClaudeDesktopConfigError(f"{config}: expected a JSON object at the top, got {type(current).__name__}; "
                                       "nothing was written")
    if not isinstance(current.get("mcpServers", {}), dict):
        raise ClaudeDesktopConfigError(f"{config}#/mcpServers: expected an object of servers; nothing was written")
    return current


def _backup(config: Path) -> Path:
    """A copy of the old file beside it, named by the time (and a counter, should that name be taken)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    backup = config.with_name(f"{config.name}.{stamp}.bak")
    number = 1
    while backup.exists():
        number += 1
        backup = config.with_name(f"{config.name}.{stamp}-{number}.bak")
    shutil.copy2(config, backup)
    return backup


def write_atomically(path: Path, text: str) -> None:
    """Write a temporary file beside `path`, then rename it over: readers see the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            Path(temporary).chmod(mode)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
