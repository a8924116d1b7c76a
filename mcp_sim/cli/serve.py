"""The core commands: serve the simulated tools, simulate one call, check spec files."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click

from mcp_sim import app
from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.cli.options import (
    build_simulator,
    engine_options,
    handle_errors,
    rehearsal_options,
    rehearsal_settings,
    world_options,
)
from mcp_sim.core.specs import Catalog, load_catalog
from mcp_sim.core.worlds.routing import SCOPES
from mcp_sim.core.worlds.world import DEFAULT_WORLD
from mcp_sim.serving.transport_kinds import TRANSPORTS, Endpoint, Launch, Serving
from mcp_sim.serving.transports import HttpSecurity, http_security_options
from mcp_sim.state.book import StateBook

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.routing import Route

    from mcp_sim.core.calls import AnswerSource, CallObserver
    from mcp_sim.core.prompt_budget import SpecFit
    from mcp_sim.core.simulator import Simulator
    from mcp_sim.rehearsal.setup import RehearsalSettings
    from mcp_sim.serving.server_features import Peers


def serving_options(command: Any) -> Any:
    """The options of every command that serves simulated tools until stopped (serve, shadow)."""
    options = [
        click.option("--transport", type=click.Choice(list(TRANSPORTS)), default="stdio", show_default=True,
                     help="; ".join(f"{kind.name}: {kind.summary}" for kind in TRANSPORTS.values())),
        click.option("--host", default=defaults.HOST, show_default=True),
        click.option("--port", type=int, default=defaults.PORT, show_default=True),
        click.option("--path", "http_path", default=defaults.HTTP_PATH, show_default=True),
        click.option("--max-queue", type=click.IntRange(1), default=defaults.MAX_QUEUE, show_default=True,
                     help="Calls that may wait for the model; more get a 'busy' error result."),
        click.option("--world-scope", type=click.Choice(SCOPES), default="session", show_default=True,
                     help="session: each 2025-11-25 HTTP session keeps a world of its own; server: every call "
                          "that names no world (?world=NAME) shares the default world."),
        click.option("--ui-port", type=click.IntRange(1, 65535), default=None, metavar="PORT",
                     help="With --transport stdio: serve the world page (calls, state, what changed) at "
                          "http://127.0.0.1:PORT/ui. Over HTTP the page is always at /ui, beside the MCP "
                          "endpoint."),
        click.option("--expose-world", is_flag=True,
                     help="Publish the caller's world (scenario and history) as the MCP resource sim://world."),
        click.option("--warm-start/--no-warm-start", default=True, show_default=True,
                     help="Serve at once and load the model (and read every spec's system prompt) in the "
                          "background; calls wait until it is ready. The model file is checked before serving "
                          "either way."),
        http_security_options, world_options, rehearsal_options, engine_options,
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.command()
@click.argument("specs", nargs=-1, required=True)
@click.option("--reload", "reload_specs", is_flag=True,
              help="Watch the spec files and serve an edited spec without a restart; clients hear list_changed. "
                   "A spec that no longer loads is reported and the old one keeps serving.")
@serving_options
@handle_errors
def serve(specs: tuple[str, ...], transport: str, host: str, port: int, http_path: str, max_queue: int,
          world_scope: str, expose_world: bool, reload_specs: bool, ui_port: int | None, warm_start: bool,
          http_security: HttpSecurity, scenario: str | None, state_dir: Path | None, max_worlds: int,
          store: str | None, **engine: Any) -> None:
    """Serve the tools of SPECS (files or directories) over stdio or streamable HTTP."""
    serve_catalog(load_catalog(list(specs)), specs=specs, ui_port=ui_port, transport=transport, host=host, port=port,
                  http_path=http_path, max_queue=max_queue, world_scope=world_scope, expose_world=expose_world,
                  reload_specs=reload_specs, warm_start=warm_start, http_security=http_security, scenario=scenario,
                  state_dir=state_dir, max_worlds=max_worlds, store=store, **engine)


def serve_catalog(catalog: Catalog, *, specs: tuple[str, ...], transport: str, host: str, port: int, http_path: str,
                  max_queue: int, world_scope: str, expose_world: bool, reload_specs: bool, warm_start: bool,
                  http_security: HttpSecurity, scenario: str | None, state_dir: Path | None, max_worlds: int,
                  store: str | None, first_sources: Callable[[Simulator], list[AnswerSource]] | None = None,
                  around: Callable[[Serving], Serving] | None = None, ui_port: int | None = None,
                  peers: Peers | None = None, **engine: Any) -> None:
    """Serve CATALOG until stopped (`serve`'s body). FIRST_SOURCES gives answer sources asked before all others,
    made from the built simulator (shadow's real server); AROUND wraps the serving coroutine (shadow holds its
    connection to the real server open around it); PEERS, what the server keeps of its clients (shadow's
    subscriptions reach the real server)."""
    from mcp_sim.serving.admin import admin_routes
    from mcp_sim.serving.reload import SpecReloader, serve_reloading
    from mcp_sim.serving.scheduler import FairScheduler
    from mcp_sim.serving.server import create_server
    from mcp_sim.serving.server_features import Peers
    from mcp_sim.serving.ui.call_log import CallLog
    from mcp_sim.serving.ui.routes import ui_routes
    from mcp_sim.serving.ui.site import Site
    from mcp_sim.serving.warmup import Warmup

    kind, endpoint = TRANSPORTS[transport], Endpoint(host, port, http_path, http_security, ui_port)
    kind.check(endpoint)  # refuse an unsafe bind before anything heavy loads
    worlds = app.build_worlds(catalog, scenario, state_dir, max_worlds, store)
    fits: list[SpecFit] = []
    rehearsal = rehearsal_settings(engine)
    call_log = CallLog()  # what the world page shows of each call beyond the store's history
    simulator = build_simulator(catalog, worlds, rehearsal, load=not warm_start, on_fits=fits.extend,
                                observers=[call_log], **engine)
    if first_sources is not None:
        simulator.sources[:0] = first_sources(simulator)
    warmup = None
    if warm_start and not simulator.replay_only:  # a replay never loads a model: nothing to warm
        warmup = Warmup(simulator)
        warmup.check()
    # The pool fills each of the --parallel instances up to its --slots calls, so this many decode at once
    # (tests/test_pool.py); the scheduler lets exactly that many through and queues the rest fairly.
    scheduler = FairScheduler(slots=engine["parallel"] * engine["slots"], max_waiting=max_queue)
    peers = peers or Peers()
    serving = functools.partial(create_server, world_scope=world_scope, scheduler=scheduler,
                                expose_world=expose_world, warmup=warmup, peers=peers, list_changed=reload_specs)
    server = serving(simulator)
    reloader = None
    if reload_specs:
        reloader = SpecReloader(specs, catalog, server,
                                lambda new: serving(reloaded_simulator(simulator, new, rehearsal, [call_log])), peers)
    page = kind.page(endpoint)
    announce = functools.partial(_announce, startup_line(kind.where(endpoint), fits, simulator, kind.world_hint)
                                 + (f"\nworld page: {page} (open it with: mcp-sim ui {page})" if page else ""))
    site = Site(worlds, catalog, call_log, rehearsal.ledger)

    def operator_routes(remote_allowed: bool) -> list[Route]:
        return [*admin_routes(worlds, remote_allowed), *ui_routes(site, remote_allowed)]

    # The warm-up starts once the transport is set up (see serve_stdio and serve_http).
    launch = Launch(server, operator_routes, warmup.start if warmup else None, announce)
    run = kind.serving(endpoint, launch)
    try:
        anyio.run(serve_reloading, reloader, around(run) if around is not None else run)
    finally:
        simulator.engine.close()
        worlds.close()


def reloaded_simulator(running: Simulator, catalog: Catalog, rehearsal: RehearsalSettings,
                       observers: Sequence[CallObserver] = ()) -> Simulator:
    """A simulator over CATALOG that shares RUNNING's model, options and worlds, with the fixtures, cassettes,
    cache and faults the options ask for read again; raises McpSimError when a spec cannot fit the context."""
    app.fit_catalog(catalog, running.engine, running.options)
    return app.assemble(catalog, running.engine, running.options, running.worlds, rehearsal, observers)


def startup_line(where: str, fits: list[SpecFit], simulator: Simulator, world: str) -> str:
    """One plain line that says what runs: where, which specs (with their prompt size against the context)
    and tools, which model, how to pick a world."""
    files = ", ".join(f"{fit.source} ({_size(fit)})" for fit in fits)
    tools = sum(fit.tools for fit in fits)
    if simulator.replay_only:
        model = "no model (--replay-only: fixtures, cassettes and the cache answer; nothing else)"
    else:
        model = f"model {simulator.engine.name}"
    return (f"mcp-sim {where}: {tools} tool(s) from {files}; {model}; {world} (default: {DEFAULT_WORLD})")


def _size(fit: SpecFit) -> str:
    approx = "" if fit.exact else "~"
    if fit.layout == "full":
        return f"prompt {approx}{fit.full_tokens:,} of {fit.room:,} tokens"
    return f"prompt {approx}{fit.full_tokens:,} tokens in full, indexed to {fit.tokens:,} of {fit.room:,}"


def _trained_ctx() -> int | None:
    """The context the default model was trained for (its manifest), which `check`'s advice never exceeds."""
    from mcp_sim.models.hub import resolve

    try:
        manifest = resolve(None, download=False).manifest
    except McpSimError:
        return None
    return manifest.context_length if manifest else None


def _announce(line: str) -> None:
    # Plain stderr, whatever the log level: the first thing a user looks for (stdout is the protocol on stdio).
    click.echo(line, err=True)


@click.command()
@click.argument("specs", nargs=-1, required=True)
@click.option("--tool", "tool_name", required=True, help="The tool to call.")
@click.option("--args", "arguments", default="{}", show_default=True,
              help="The arguments as a JSON object, or - to read them from stdin.")
@click.option("--world", default=DEFAULT_WORLD, show_default=True,
              help="The world to answer in; with --state-dir, successive calls continue it.")
@world_options
@rehearsal_options
@engine_options
@handle_errors
def call(specs: tuple[str, ...], tool_name: str, arguments: str, world: str, scenario: str | None,
         state_dir: Path | None, max_worlds: int, store: str | None, **engine: Any) -> None:
    """Simulate one call and print the result as a client receives it."""
    from mcp_sim.core.simulator import UnknownToolError
    from mcp_sim.serving.server import to_call_tool_result

    raw = sys.stdin.read() if arguments == "-" else arguments
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--args") from None
    catalog = load_catalog(list(specs))
    worlds = app.build_worlds(catalog, scenario, state_dir, max_worlds, store)
    simulator = build_simulator(catalog, worlds, rehearsal_settings(engine), **engine)
    try:
        result = simulator.simulate(tool_name, parsed, world)
    except UnknownToolError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    finally:
        simulator.engine.close()
        worlds.close()
    payload = to_call_tool_result(result).model_dump(by_alias=True, exclude_none=True, mode="json")
    payload.pop("resultType", None)
    click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    sys.exit(1 if result.is_error else 0)


@click.command()
@click.argument("specs", nargs=-1, required=True)
@click.option("--ctx", type=click.IntRange(512), default=defaults.CTX, show_default=True,
              help="The context size to measure each spec's prompt against (as serve --ctx).")
@click.option("--max-tokens", type=click.IntRange(16), default=defaults.MAX_TOKENS, show_default=True,
              help="The answer's budget, which the prompt must leave room for (as serve --max-tokens).")
def check(specs: tuple[str, ...], ctx: int, max_tokens: int) -> None:
    """Check spec files and summarize them, with each one's prompt size against --ctx; exit 1 on any problem."""
    from mcp_sim.base.grammar_schema import prepare_for_grammar
    from mcp_sim.core.prompt_budget import fit_prompts, reserved_tokens
    from mcp_sim.core.resources import surface_summary
    from mcp_sim.engines.counting import count_text
    from mcp_sim.engines.registry import engine_kind

    try:
        catalog = load_catalog(list(specs))
    except McpSimError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    # Grammars and prompts are checked against the default model's vocabulary alone: nothing heavy is loaded.
    grammar_engine = engine_kind(defaults.ENGINE).checking_engine(ctx)
    effects = StateBook(catalog.spec_sets).describe()
    try:
        fits = {fit.source: fit for fit in fit_prompts(catalog, lambda text: count_text(grammar_engine, text), ctx,
                                                       reserved_tokens(max_tokens), trained_ctx=_trained_ctx())}
    except McpSimError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    for spec_set in catalog.spec_sets:
        world = " (with world)" if spec_set.world_description or spec_set.world_data is not None else ""
        click.echo(f"{spec_set.source}: {len(spec_set.tools)} tool(s){world}; {fits[spec_set.source].describe()}")
        for tool in spec_set.tools:
            if tool.output_schema is None:
                output = "text output"
            else:
                reason = grammar_engine.schema_support(prepare_for_grammar(tool.output_schema))
                shape = "JSON text (x-sim.text_json)" if tool.text_json else "outputSchema"
                output = shape + (f", grammar falls back: {reason}" if reason else ", grammar ok")
            flags = [k for k, v in (tool.annotations or {}).items() if v is True]
            examples = f", {len(tool.examples)} example(s)" if tool.examples else ""
            click.echo(f"  {tool.name}: {output}{examples}" + (f" [{', '.join(flags)}]" if flags else ""))
            if tool.name in effects:
                click.echo(f"    state: {effects[tool.name]}")
            for rule in tool.rules:
                click.echo(f"    rule: {rule.describe()}")
        if spec_set.surface:
            click.echo(f"  {surface_summary(spec_set.surface)}")
    click.echo(f"OK: {len(catalog.tools)} tool(s) in {len(catalog.spec_sets)} file(s)")


def register(cli: click.Group) -> None:
    for command in (serve, call, check):
        cli.add_command(command)
