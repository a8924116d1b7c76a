"""`mcp-sim shadow`: a dry run against a real server. Its read-only tools answer from it; every other tool
is simulated in a world that keeps the agent's writes, and never reaches it (mcp_sim.rehearsal.shadow)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from mcp_sim.base.errors import McpSimError
from mcp_sim.cli.errors import handle_errors
from mcp_sim.cli.fidelity import PASSTHROUGH
from mcp_sim.cli.serve import serve_catalog, serving_options
from mcp_sim.core.specs import Catalog, load_catalog


@click.command(context_settings=PASSTHROUGH)
@click.argument("server_command", nargs=-1, type=click.UNPROCESSED)
@click.option("--url", default=None, help="A streamable HTTP server, e.g. http://host:port/mcp.")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE",
              help="Extra environment variable for a stdio server (repeatable).")
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="The real server's spec (as `mirror` writes it; `x-sim.read_only` decides a tool's route). "
                   "Default: mirror the server now.")
@click.option("--read-only", "read_only", multiple=True, metavar="TOOL",
              help="Send this tool's calls to the real server although the server does not mark it "
                   "readOnlyHint (repeatable). Only for tools that change nothing.")
@click.option("--plan", "show_plan", is_flag=True, help="Print which tool goes where, and why; serve nothing.")
@click.option("--record", "record_to", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append every real answer to this trace, so `shadow --spec S --replay TRACE` replays the "
                   "rehearsal offline.")
@serving_options
@handle_errors
def shadow(server_command: tuple[str, ...], url: str | None, env_pairs: tuple[str, ...], spec_path: Path | None,
           read_only: tuple[str, ...], show_plan: bool, record_to: Path | None, **serving: Any) -> None:
    """Dry-run against a real server: `shadow -- COMMAND ARGS` (or `--url URL`). Reads marked read-only come
    from it; writes are simulated and never reach it. With --replay TRACE and no server: offline."""
    from mcp_sim.fidelity.mirror import fetch_server
    from mcp_sim.fidelity.record_interactions import CallTaps
    from mcp_sim.fidelity.upstream import connect, parse_env, run_upstream, server_target
    from mcp_sim.rehearsal.shadow import ShadowSource, plan_lines, route
    from mcp_sim.serving.server_features import Peers

    traces, serving["replay"] = [str(path) for path in serving["replay"]], ()  # a trace stands in for the server
    offline = not server_command and not url and bool(traces)
    if offline and spec_path is None:
        raise McpSimError("an offline shadow rehearsal (--replay TRACE, no server) needs the server's spec: "
                          "--spec FILE, as `mcp-sim mirror` wrote it")
    if traces and not offline:
        raise McpSimError("--replay replays a recorded shadow rehearsal without the real server: give it "
                          "with --spec and no server command")
    target = None if offline else server_target(server_command, url, parse_env(env_pairs))
    if spec_path is None:  # mirrored as the shadow connects: some servers list tools by what the client offers
        catalog = _mirrored(run_upstream(fetch_server, target, CallTaps().callbacks()))
    else:
        catalog = load_catalog([spec_path])
    unknown = sorted(set(read_only) - set(catalog.tools))
    if unknown:
        raise McpSimError(f"--read-only names no tool of the server: {', '.join(unknown)} "
                          f"(its tools: {', '.join(sorted(catalog.tools))})")
    routes = {name: route(tool, read_only) for name, tool in catalog.tools.items()}
    if show_plan:
        click.echo("\n".join(plan_lines(routes.values())))
        return
    server_name = url or (" ".join(server_command) if server_command else f"the recording {', '.join(traces)}")
    real, close = _real_side(traces, record_to, server_name)
    peers = Peers()
    if not offline:
        peers.subscriptions.upstream = real  # an agent's subscription is made on the real server too

    def around(run: Any) -> Any:
        assert target is not None  # only a rehearsal with a real server is served around a connection

        async def connected() -> None:
            # Leaving it stops a stdio server.
            async with connect(target, **real.callbacks(peers.subscriptions)) as client:
                real.client = client
                await run()
        return connected

    try:
        serve_catalog(catalog, specs=(), reload_specs=False, **serving, peers=peers,
                      first_sources=lambda simulator: [ShadowSource(routes, simulator.state, real, server_name)],
                      around=None if offline else around)
    finally:
        close()


def _mirrored(server: Any) -> Catalog:
    """The server's spec as `mirror` writes it, loaded from a scratch file that lives as long as the process."""
    from mcp_sim.fidelity.mirror import dump_spec, spec_document

    folder = Path(tempfile.mkdtemp(prefix="mcp-sim-shadow-"))
    path = folder / "mirrored.yaml"
    path.write_text(dump_spec(spec_document(server), path), encoding="utf-8")
    return load_catalog([path])


def _real_side(traces: list[str], record_to: Path | None, server_name: str) -> tuple[Any, Any]:
    """The real answers: a recording (offline), or the live server, each of its answers appended to RECORD_TO."""
    from mcp_sim.fidelity.recorder import Recorder
    from mcp_sim.fidelity.shadow import RealServer, RecordedReads
    from mcp_sim.rehearsal.traces import Redactor, TraceWriter

    if traces:
        return RecordedReads(traces), lambda: None
    if record_to is None:
        return RealServer(), lambda: None
    writer = TraceWriter(record_to)
    return RealServer(Recorder(writer, server_name, Redactor())), writer.close


def register(cli: click.Group) -> None:
    cli.add_command(shadow)
