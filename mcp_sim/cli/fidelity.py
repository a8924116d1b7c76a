"""CLI commands that tie the simulator to real servers: mirror, record, learn, eval."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from mcp_sim.base import defaults
from mcp_sim.cli.errors import handle_errors
from mcp_sim.cli.options import build_simulator, engine_options, logger

# Lets `-- COMMAND --flag` reach the real server untouched.
PASSTHROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False}


def _server_options(command: Any) -> Any:
    command = click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE",
                           help="Extra environment variable for a stdio server (repeatable).")(command)
    command = click.option("--url", default=None, help="A streamable HTTP server, e.g. http://host:port/mcp.")(
        command)
    return click.argument("server_command", nargs=-1, type=click.UNPROCESSED)(command)


@click.command(context_settings=PASSTHROUGH)
@_server_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Spec file to write (.yaml, .yml or .json). Default: YAML on stdout.")
@click.option("--skip-invalid", is_flag=True,
              help="Leave out tools the spec loader rejects instead of failing.")
@handle_errors
def mirror(server_command: tuple[str, ...], url: str | None, env_pairs: tuple[str, ...], out: Path | None,
           skip_invalid: bool) -> None:
    """Write a spec of a live server's tools: `mirror --out S.yaml -- COMMAND ARGS` or `mirror --url URL`."""
    from mcp_sim.fidelity.mirror import (
        MirrorError,
        dump_spec,
        fetch_server,
        invalid_tools,
        spec_document,
        state_lines,
    )
    from mcp_sim.fidelity.upstream import parse_env, run_upstream, server_target

    target = server_target(server_command, url, parse_env(env_pairs))
    server = run_upstream(fetch_server, target)
    for note in server.surface.notes:
        click.echo(note, err=True)
    document = spec_document(server)
    invalid = invalid_tools(document)
    if invalid and not skip_invalid:
        listed = "\n".join(f"  - tool {name!r}{p}" for name, found in invalid.items() for p in found)
        raise MirrorError(f"the server lists {len(invalid)} tool(s) the spec loader rejects, so nothing was "
                          f"written (pass --skip-invalid to mirror the other tools):\n{listed}")
    if invalid:
        document["tools"] = [t for t in document["tools"] if t.get("name") not in invalid]
        click.echo(f"skipped {len(invalid)} tool(s) the spec loader rejects: {', '.join(invalid)}", err=True)
    inferred = state_lines(document)
    if inferred:
        click.echo("state effects inferred from the tools' names and schemas (x-sim.state; check them, "
                   "correct or delete):\n" + "\n".join(inferred), err=True)
    text = dump_spec(document, out)
    if out is None:
        click.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    extra = ", ".join(f"{len(document[key])} {key}" for key in ("resources", "resourceTemplates", "prompts")
                      if key in document)
    click.echo(f"wrote {out}: {len(document['tools'])} tool(s){', ' + extra if extra else ''} of "
               f"{document['server']['name']}", err=True)


@click.command(context_settings=PASSTHROUGH)
@_server_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="JSONL trace file; calls are appended, one line each.")
@click.option("--redact", "redact_patterns", multiple=True, metavar="REGEX",
              help="Field names whose values are replaced by [REDACTED] (repeatable; replaces the default "
                   "secret-looking names).")
@click.option("--replace", "replacements", multiple=True, metavar="OLD=NEW",
              help="Replace text in recorded arguments and results, e.g. a temp dir by /sandbox "
                   "(repeatable).")
@click.option("--session", default=None, help="Session name for the stdio agent (default: random).")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="How the agent reaches this proxy.")
@click.option("--host", default=defaults.HOST, show_default=True)
@click.option("--port", type=int, default=defaults.RECORD_PORT, show_default=True)
@handle_errors
def record(server_command: tuple[str, ...], url: str | None, env_pairs: tuple[str, ...], out: Path,
           redact_patterns: tuple[str, ...], replacements: tuple[str, ...], session: str | None,
           transport: str, host: str, port: int) -> None:
    """Proxy a real server and record each tool call: `record --out t.jsonl -- COMMAND ARGS`."""
    from mcp_sim.fidelity.record import run_proxy
    from mcp_sim.fidelity.upstream import UpstreamError, parse_env, run_upstream, server_target
    from mcp_sim.rehearsal.traces import DEFAULT_REDACT_PATTERNS, Redactor

    pairs = []
    for item in replacements:
        old, sep, new = item.partition("=")
        if not sep or not old:
            raise UpstreamError(f"--replace {item!r}: expected OLD=NEW")
        pairs.append((old, new))
    target = server_target(server_command, url, parse_env(env_pairs))
    redactor = Redactor(redact_patterns or DEFAULT_REDACT_PATTERNS)
    logger.warning("mcp-sim record: proxying %s over %s, appending calls to %s", url or server_command[0],
                   transport, out)
    run_upstream(lambda: run_proxy(target, out, redactor=redactor, replacements=pairs, session=session,
                                   transport=transport, host=host, port=port), target=target)


def _write_checked(document: dict[str, Any], path: Path) -> None:
    """Write a spec only once it loads: a scratch copy next to it is checked, then moved into place."""
    from mcp_sim.core.specs import load_catalog
    from mcp_sim.fidelity.mirror import dump_spec

    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.stem}.mcp-sim-tmp{path.suffix}")
    scratch.write_text(dump_spec(document, path), encoding="utf-8")
    try:
        load_catalog([scratch])
    except Exception:
        scratch.unlink()
        raise
    scratch.replace(path)


def _read_document(path: Path) -> dict[str, Any]:
    import yaml

    from mcp_sim.base.errors import SpecError, yaml_failure

    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: a UTF-8 BOM is dropped
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError([f"{path}: not valid YAML: {yaml_failure(exc)}"]) from None
    except (OSError, ValueError) as exc:
        raise SpecError([f"{path}: cannot read the spec: {exc}"]) from None
    if not isinstance(document, dict) or not isinstance(document.get("tools"), list):
        raise SpecError([f"{path}: learn needs a spec with a top-level 'tools' list (as `mcp-sim mirror` "
                         "writes it)"])
    return document


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--spec", "spec_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The spec to teach (usually written by `mcp-sim mirror`).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the taught spec. Default: update --spec in place.")
@click.option("--max-per-tool", type=click.IntRange(1), default=None,
              help="Most examples per tool (existing ones count). Default: every distinct one within --tool-chars.")
@click.option("--tool-chars", type=click.IntRange(100), default=defaults.LEARN_TOOL_CHARS, show_default=True,
              help="Most characters of examples per tool. The system prompt shows each tool's first "
                   f"{defaults.SHOWN_EXAMPLES}; a call brings the {defaults.NEAREST_EXAMPLES} of the rest "
                   "nearest to it.")
@click.option("--max-chars", type=click.IntRange(100), default=1500, show_default=True,
              help="Longer examples are skipped.")
@click.option("--replace", is_flag=True, help="Drop the tools' existing examples first.")
@handle_errors
def learn(traces: tuple[str, ...], spec_path: Path, out: Path | None, max_per_tool: int | None,
          tool_chars: int, max_chars: int, replace: bool) -> None:
    """Add real recorded results from TRACES to a spec as x-sim.examples, and the fields they show computed
    (counts, copies of arguments, growing lists) as x-sim.rules."""
    from mcp_sim.fidelity import learn as learning
    from mcp_sim.rehearsal.traces import read_traces

    document = _read_document(spec_path)
    report = learning.learn(document, read_traces(list(traces)), max_per_tool, max_chars, replace, tool_chars)
    for reason in report.skipped:
        click.echo(f"skipped {reason}", err=True)
    _write_checked(document, out or spec_path)
    added = ", ".join(f"{tool} +{count}" for tool, count in report.added.items()) or "none"
    click.echo(f"wrote {out or spec_path}: examples added: {added}", err=True)
    for tool, shape in report.text_json.items():
        click.echo(f"{tool} answers {shape}: answered under that schema, printed as the server prints it", err=True)
    for tool, rules in report.rules.items():
        click.echo(f"rules learned for {tool}: {'; '.join(rules)}", err=True)
    for tool, sql in report.catalog.items():
        click.echo(f"{tool} reads the database's catalog: {sql}", err=True)
    for tool, command in report.repository.items():
        click.echo(f"{tool} runs git {command} on the world's repository", err=True)


@click.command("eval")
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--spec", "spec_paths", multiple=True, required=True,
              help="Spec file(s) or directories the simulator serves (repeatable).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write fidelity.json, fidelity.md and fidelity.png here.")
@click.option("--mode", type=click.Choice(["both", "closed", "forced"]), default="both", show_default=True,
              help="Closed loop (the simulator sees its own answers), teacher-forced (it sees the real "
                   "ones), or both.")
@click.option("--session", "only_sessions", multiple=True, help="Replay only these sessions (repeatable).")
@click.option("--max-steps", type=click.IntRange(1), default=None,
              help="Replay only the first N steps of each session.")
@click.option("--rel-tol", type=click.FloatRange(0), default=defaults.REL_TOL, show_default=True,
              help="Relative tolerance for numbers.")
@click.option("--judge", "use_judge", is_flag=True, help="Also rate each step with an LLM judge (five "
              "AgentWorldBench dimensions).")
@click.option("--judge-model", default=None,
              help="The judge's model, named as --model names one and run by the same --engine (default: the "
                   "simulator's model).")
@engine_options
@handle_errors
def eval_command(traces: tuple[str, ...], spec_paths: tuple[str, ...], report_dir: Path | None, mode: str,
                 only_sessions: tuple[str, ...], max_steps: int | None, rel_tol: float, use_judge: bool,
                 judge_model: str | None, **engine: Any) -> None:
    """Replay recorded TRACES against the simulator and score its fidelity per tool."""
    from mcp_sim.core.specs import load_catalog
    from mcp_sim.fidelity.evaluate import MODES, RealResults, SimulatorResponder, evaluate
    from mcp_sim.fidelity.report import markdown, summarize, write_report
    from mcp_sim.rehearsal.traces import TraceError, read_traces

    records = _select(read_traces(list(traces)), only_sessions, max_steps)
    if not records:
        raise TraceError("no recorded calls to replay (check --session and the trace files)")
    simulator = build_simulator(load_catalog(list(spec_paths)), sources=[RealResults()], **engine)
    judge = _judge(simulator.engine, judge_model, engine) if use_judge else None
    modes = MODES if mode == "both" else (mode,)
    with _progress(len(records) * len(modes)) as advance:
        results = evaluate(records, SimulatorResponder(simulator), simulator.catalog.tools, modes, judge,
                           on_step=advance, rel_tol=rel_tol)
    meta = {"model": simulator.engine.name, "traces": list(traces), "specs": list(spec_paths),
            "modes": list(modes), "judge": (judge_model or simulator.engine.name) if judge else None,
            "max_tokens": simulator.options.max_tokens, "seed": simulator.options.seed,
            "temperature": simulator.options.temperature}
    summary = summarize(results, meta)
    click.echo(markdown(summary))
    if report_dir is not None:
        for path in write_report(summary, report_dir):
            click.echo(f"wrote {path}", err=True)


def _select(records: list[Any], only_sessions: tuple[str, ...], max_steps: int | None) -> list[Any]:
    from mcp_sim.rehearsal.traces import sessions

    chosen = []
    for name, steps in sessions(records).items():
        if not only_sessions or name in only_sessions:
            chosen.extend(steps[:max_steps] if max_steps else steps)
    return chosen


def _judge(engine: Any, judge_model: str | None, options: dict[str, Any]) -> Any:
    """The simulator's own engine, or JUDGE_MODEL run by the same engine kind and options."""
    from mcp_sim.core.engine_setup import EngineSettings, build_engine
    from mcp_sim.fidelity.judge import LlmJudge

    if judge_model is None:
        return LlmJudge(engine)
    judge = build_engine(EngineSettings(**{**options, "model": judge_model}), engine.context_size)
    judge.load()
    return LlmJudge(judge)


class _progress:
    """Progress on stderr (stdout carries the report); yields the per-step callback.

    A rich bar on a terminal; otherwise one plain line per step, flushed, so a run logged to a file or
    watched through a pipe shows how far it got (a bar there prints nothing until it ends).
    """

    def __init__(self, total: int, stream: Any = None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._stream = stream if stream is not None else sys.stderr
        self._total = total
        self._done = 0
        self._plain = not self._stream.isatty()
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(file=self._stream))
        self._task = self._progress.add_task("replaying", total=total)

    def __enter__(self) -> Any:
        if not self._plain:
            self._progress.start()

        def advance(result: Any) -> None:
            self._done += 1
            label = f"{result.mode} {result.tool} step {result.step}: {100 * result.scores.fidelity:.0f}"
            if self._plain:
                print(f"[{self._done}/{self._total}] {result.session} {label} ({result.seconds:.1f} s)",
                      file=self._stream, flush=True)
            else:
                self._progress.update(self._task, advance=1, description=label)

        return advance

    def __exit__(self, *exc: object) -> None:
        if not self._plain:
            self._progress.stop()


def register(cli: click.Group) -> None:
    for command in (mirror, record, learn, eval_command):
        cli.add_command(command)
