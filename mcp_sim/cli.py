"""The `mcp-sim` command line: serve, call and check."""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import click

from mcp_sim.errors import McpSimError
from mcp_sim.specs import Catalog, load_catalog
from mcp_sim.transports import HttpSecurity, http_security_options

logger = logging.getLogger("mcp_sim")


def engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that choose and tune the model; shared by every command that simulates."""
    manifest_default = "(default: the model's manifest, else {})"
    options = [
        click.option("--model", "model", default=None,
                     help="A registry name (qwen-agentworld-35b-a3b:Q4_K_M), OWNER/REPO:QUANT, "
                     "hf://OWNER/REPO/FILE.gguf, a .gguf in models/, or a path; with --engine openai, "
                     "the name the server serves. Default: the bundled SmolLM2-135M-Instruct Q4_1."),
        click.option("--engine", type=click.Choice(["llama", "openai"]), default="llama", show_default=True,
                     help="llama: run the GGUF in-process; openai: an OpenAI-compatible server at "
                     "--base-url."),
        click.option("--base-url", default=None,
                     help="The OpenAI-compatible API root, e.g. http://gpu-box:8000/v1 (--engine openai)."),
        click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
                     help="Environment variable holding the server's API key, if it needs one."),
        click.option("--max-inflight", type=click.IntRange(1), default=4, show_default=True,
                     help="Most concurrent requests to the server (--engine openai)."),
        click.option("--timeout", type=click.FloatRange(1), default=300.0, show_default=True,
                     help="Seconds to wait for one answer from the server (--engine openai)."),
        click.option("--ctx", type=click.IntRange(512), default=None,
                     help="Context size in tokens " + manifest_default.format(8192) + "."),
        click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads (default: all cores "
                     "up to 4)."),
        click.option("--gpu-layers", type=int, default=None,
                     help="Layers to offload to the GPU (default: all when the build supports it, else 0)."),
        click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed."),
        click.option("--temperature", type=click.FloatRange(0), default=None,
                     help=manifest_default.format(0.2)),
        click.option("--top-p", type=click.FloatRange(0, 1), default=None,
                     help=manifest_default.format(0.95)),
        click.option("--top-k", type=click.IntRange(0), default=None, help=manifest_default.format(40)),
        click.option("--max-tokens", type=click.IntRange(16), default=None,
                     help="Most tokens one answer may take, reasoning not counted "
                     + manifest_default.format(512)),
        click.option("--think/--no-think", default=None,
                     help="Let the model reason before it answers (default: on when the manifest says "
                     "it thinks)."),
        click.option("--think-budget", type=click.IntRange(0), default=None,
                     help="Most reasoning tokens before the answer is forced "
                     + manifest_default.format(1024)),
        click.option("--prompt-style", type=click.Choice(["auto", "agentworld", "generic"]), default="auto",
                     show_default=True,
                     help="agentworld: Qwen-AgentWorld's native format (auto: from the manifest)."),
        click.option("--attempts", type=click.IntRange(1, 10), default=3, show_default=True,
                     help="Tries before a schema-breaking answer becomes an is_error result."),
        click.option("--max-argument-bytes", type=click.IntRange(1), default=64 * 1024, show_default=True,
                     help="Larger arguments are refused with an is_error result."),
        click.option("--expose-prompt", is_flag=True, help="Put each call's prompt into its _meta (debugging)."),
        click.option("--simulate-errors", is_flag=True,
                     help="Let the model answer a call that cannot succeed with a tool failure (isError)."),
        click.option("--parallel", type=click.IntRange(1, 64), default=1, show_default=True,
                     help="Model instances answering calls side by side (each holds its own weights and KV)."),
        click.option("--state-cache-mb", type=click.IntRange(0), default=1024, show_default=True,
                     help="Memory per instance for saved model states, so calls resume sessions instead of "
                          "re-reading them."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def build_simulator(catalog: Catalog, **engine: Any) -> Any:
    from mcp_sim.launch import EngineSettings, prepare
    from mcp_sim.simulator import Simulator

    prepared = prepare(EngineSettings(**engine))
    simulator = Simulator(catalog, prepared.engine, prepared.options)
    for tool, reason in simulator.grammar_fallbacks().items():
        logger.warning("tool %s: its outputSchema cannot be enforced while decoding (%s); answers are still "
                       "validated after decoding and retried", tool, reason)
    prepared.engine.load()
    return simulator


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn mcp-sim errors into a clean message and exit code 1 (--debug shows the traceback)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except McpSimError as exc:
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                raise
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)

    return wrapper


@click.group()
@click.version_option(package_name="mcp-sim")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug and tracebacks).")
def cli(verbose: int) -> None:
    """Simulated MCP tools, answered by a local GGUF world model."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    # stderr only: on stdio, stdout is the protocol.
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@cli.command()
@click.argument("specs", nargs=-1, required=True)
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--path", "http_path", default="/mcp", show_default=True)
@click.option("--max-queue", type=click.IntRange(1), default=64, show_default=True,
              help="Calls that may wait for the model; more get a 'busy' error result.")
@http_security_options
@engine_options
@handle_errors
def serve(specs: tuple[str, ...], transport: str, host: str, port: int, http_path: str, max_queue: int,
          http_security: HttpSecurity, **engine: Any) -> None:
    """Serve the tools of SPECS (files or directories) over stdio or streamable HTTP."""
    from mcp_sim.scheduler import FairScheduler
    from mcp_sim.server import create_server
    from mcp_sim.transports import serve_http, serve_stdio

    if transport == "http":
        http_security.check(host)  # refuse an unsafe bind before the model loads
    simulator = build_simulator(load_catalog(list(specs)), **engine)
    scheduler = FairScheduler(slots=engine["parallel"], max_waiting=max_queue)
    logger.warning("mcp-sim: serving %d simulated tool(s) with %s over %s", len(simulator.catalog.tools),
                   simulator.engine.name, transport)
    if transport == "stdio":
        anyio.run(serve_stdio, create_server(simulator, default_session="stdio", scheduler=scheduler))
    else:
        anyio.run(functools.partial(serve_http, create_server(simulator, scheduler=scheduler), host, port, http_path,
                                    **http_security.serve_kwargs()))


@cli.command()
@click.argument("specs", nargs=-1, required=True)
@click.option("--tool", "tool_name", required=True, help="The tool to call.")
@click.option("--args", "arguments", default="{}", show_default=True,
              help="The arguments as a JSON object, or - to read them from stdin.")
@engine_options
@handle_errors
def call(specs: tuple[str, ...], tool_name: str, arguments: str, **engine: Any) -> None:
    """Simulate one call and print the result as a client receives it."""
    from mcp_sim.server import to_call_tool_result
    from mcp_sim.simulator import UnknownToolError

    raw = sys.stdin.read() if arguments == "-" else arguments
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--args") from None
    simulator = build_simulator(load_catalog(list(specs)), **engine)
    try:
        result = simulator.simulate(tool_name, parsed, session_id="cli")
    except UnknownToolError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    payload = to_call_tool_result(result).model_dump(by_alias=True, exclude_none=True, mode="json")
    payload.pop("resultType", None)
    click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    sys.exit(1 if result.is_error else 0)


@cli.command()
@click.argument("specs", nargs=-1, required=True)
def check(specs: tuple[str, ...]) -> None:
    """Check spec files and summarize them; exit 1 on any problem."""
    from mcp_sim.engines.llama import LlamaEngine
    from mcp_sim.grammar_schema import prepare_for_grammar

    try:
        catalog = load_catalog(list(specs))
    except McpSimError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    # Grammars are checked against the default model's vocabulary alone: nothing heavy is loaded.
    grammar_engine = LlamaEngine(_default_model_or_none())
    for spec_set in catalog.spec_sets:
        world = " (with world)" if spec_set.world_description or spec_set.world_data is not None else ""
        click.echo(f"{spec_set.source}: {len(spec_set.tools)} tool(s){world}")
        for tool in spec_set.tools:
            if tool.output_schema is None:
                output = "text output"
            else:
                reason = grammar_engine.schema_support(prepare_for_grammar(tool.output_schema))
                output = "outputSchema" + (f", grammar falls back: {reason}" if reason else ", grammar ok")
            flags = [k for k, v in (tool.annotations or {}).items() if v is True]
            examples = f", {len(tool.examples)} example(s)" if tool.examples else ""
            click.echo(f"  {tool.name}: {output}{examples}" + (f" [{', '.join(flags)}]" if flags else ""))
    click.echo(f"OK: {len(catalog.tools)} tool(s) in {len(catalog.spec_sets)} file(s)")


def _default_model_or_none() -> Path:
    from mcp_sim.model_file import default_model_path

    try:
        return default_model_path()
    except McpSimError:
        return Path("no-model.gguf")  # grammars are then converted but not parsed


def main() -> None:
    cli(prog_name="mcp-sim")


# Commands that live in their own modules (imported last: they import this one).
from mcp_sim import commands_fidelity  # noqa: E402
from mcp_sim.commands_models import commands  # noqa: E402

for _command in [*commands(engine_options, handle_errors), *commands_fidelity.COMMANDS]:
    cli.add_command(_command)
