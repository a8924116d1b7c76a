"""The `mcp-sim` command line. Each module of this package registers its commands on the group:

serve.py (serve, call, check), worlds.py (worlds list|show|reset|fork|export), models.py (models list|pull,
doctor), fidelity.py (mirror, record, learn, eval), the rehearsal commands (ledger, cache) and the sources
(import openapi, install claude-desktop). They import the shared options from options.py, never this module.
"""

from __future__ import annotations

import logging
import sys

import click

from mcp_sim.cli import fidelity, models, serve, worlds
from mcp_sim.rehearsal import cache_commands
from mcp_sim.rehearsal import commands as rehearsal
from mcp_sim.sources import commands as sources


@click.group()
@click.version_option(package_name="mcp-sim")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug and tracebacks).")
def cli(verbose: int) -> None:
    """Simulated MCP tools, answered by a local GGUF world model."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    # stderr only: on stdio, stdout is the protocol.
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


for _module in (serve, worlds, models, fidelity, rehearsal, cache_commands, sources):
    _module.register(cli)


def main() -> None:
    cli(prog_name="mcp-sim")
