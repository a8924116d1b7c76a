"""The `mcp-sim` command line. Each module of this package registers its commands on the group:

serve.py (serve, call, check), shadow.py (shadow), ui.py (ui), worlds.py (worlds list|show|reset|fork|export),
models.py (models list|pull, doctor), fidelity.py (mirror, record, learn, eval), the rehearsal commands (ledger,
cache) and the sources (import openapi, install claude-desktop). They import the shared options from options.py,
never this module.
"""

from __future__ import annotations

import logging
import sys

import click

from mcp_sim.cli import cache as cache_commands
from mcp_sim.cli import fidelity, models, serve, shadow, ui, worlds
from mcp_sim.cli import rehearsal as rehearsal
from mcp_sim.cli import sources as sources

VERBOSE_HELP = "More logging on stderr (-vv for debug and tracebacks); before or after the command."


@click.group()
@click.version_option(package_name="mcp-sim")
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
def cli(verbose: int) -> None:
    """Simulated MCP tools, answered by a local GGUF world model."""
    set_verbosity(verbose)


def set_verbosity(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    # stderr only: on stdio, stdout is the protocol.
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)


def _subcommand_verbosity(ctx: click.Context, param: click.Parameter, value: int) -> None:
    """`mcp-sim serve ... -v` as `mcp-sim -v serve ...`: the counts before and after the command add up."""
    if value:
        set_verbosity(value + (ctx.find_root().params.get("verbose") or 0))


def _accept_verbose(command: click.Command) -> None:
    """Give COMMAND, and every command under it, its own -v (people put it after the command)."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_verbose(sub)
        return
    command.params.append(click.Option(["-v", "--verbose", "sub_verbose"], count=True, expose_value=False,
                                       callback=_subcommand_verbosity, help=VERBOSE_HELP))


for _module in (serve, shadow, ui, worlds, models, fidelity, rehearsal, cache_commands, sources):
    _module.register(cli)
for _command in cli.commands.values():
    _accept_verbose(_command)


def main() -> None:
    cli(prog_name="mcp-sim")
