"""The one error wrapper of every `mcp-sim` command: an error a person can act on is one message, not a traceback.

Outside the cli package on purpose: cli/__init__ imports the command modules (rehearsal, sources), so they
cannot import mcp_sim.cli.options without a cycle. Click only; no other mcp-sim import but the errors.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from mcp_sim.base.errors import McpSimError

Command = Callable[..., Any]


def handle_errors(command: Command) -> Command:
    """mcp-sim errors and OS errors (a missing or unreadable file) become "Error: ..." on stderr and exit
    code 1; with -vv (debug logging) the traceback is shown instead."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (McpSimError, OSError) as exc:
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                raise
            click.echo(f"Error: {_message(exc)}", err=True)
            sys.exit(1)

    return wrapper


def _message(exc: McpSimError | OSError) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename is not None else exc.strerror
    return str(exc)
