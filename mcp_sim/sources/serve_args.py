"""`mcp-sim serve` arguments as another program will run them: checked by serve's own parser, paths absolute."""

from __future__ import annotations

from pathlib import Path

import click


def split_serve_args(root: click.Command, args: list[str]) -> tuple[list[str], list[str]]:
    """ARGS (spec paths mixed with serve options) as (specs, options), checked as `serve` would check them
    (a typo fails here, not later inside the client) and with every path made absolute."""
    serve = root.commands.get("serve") if isinstance(root, click.Group) else None
    if serve is None:
        if any(arg.startswith("-") for arg in args):
            raise click.UsageError("serve options need the `serve` command, which this CLI lacks")
        return list(args), []
    serve.make_context("serve", list(args), resilient_parsing=False)  # raises a usage error naming the problem
    options = {name: param for param in serve.params if isinstance(param, click.Option)
               for name in (*param.opts, *param.secondary_opts)}
    specs: list[str] = []
    rewritten: list[str] = []
    tokens = iter(args)
    for token in tokens:
        name, has_value, inline = token.partition("=")
        param = options.get(name) if token.startswith("-") else None
        if param is None:
            specs.append(token)
        elif has_value:
            rewritten.append(f"{name}={_absolute_if_path(param, inline)}")
        elif param.is_flag or param.count:
            rewritten.append(token)
        else:
            rewritten.extend([token, _absolute_if_path(param, next(tokens))])
    return [_absolute(spec) for spec in specs], rewritten


def _absolute_if_path(param: click.Option, value: str) -> str:
    # --model takes a registry name or a path: only a file that exists here is a path.
    if isinstance(param.type, click.Path) or Path(value).is_file():
        return _absolute(value)
    return value


def _absolute(value: str) -> str:
    return str(Path(value).resolve())
