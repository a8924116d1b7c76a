"""The documentation against the code: every option `--help` shows is in docs/OPTIONS.md, and no more."""

from __future__ import annotations

import re

import click
import pytest

from mcp_sim.cli import cli
from tests.conftest import REPO

OPTIONS_DOC = REPO / "docs" / "OPTIONS.md"


def help_options(command: str) -> set[str]:
    params = cli.commands[command].params
    return {name for p in params if isinstance(p, click.Option) and not p.hidden
            for name in (*p.opts, *p.secondary_opts) if name.startswith("--")}


def documented_options() -> set[str]:
    table = [line for line in OPTIONS_DOC.read_text().splitlines() if line.startswith("| `")]
    names: set[str] = set()
    for row in table:
        first_cell = row.split(" | ")[0]
        for flag in re.findall(r"`([^`]+)`", first_cell):
            for word in flag.split():
                for part in word.split("/"):  # --think/--no-think
                    if part.startswith("--"):
                        names.add(part.split("|")[0].split("=")[0])
    return names


@pytest.mark.parametrize("command", ["serve", "call", "shadow"])
def test_the_options_table_names_every_option_help_shows(command: str) -> None:
    """Regression: the README's table left out flags that --help shows (--warm-start, --verbose, ...)."""
    missing = help_options(command) - documented_options()
    assert not missing, f"docs/OPTIONS.md lacks {sorted(missing)}"


def test_the_options_table_names_no_option_that_does_not_exist() -> None:
    stale = documented_options() - help_options("serve") - help_options("call") - help_options("shadow")
    assert not stale, f"docs/OPTIONS.md names options no command has: {sorted(stale)}"
