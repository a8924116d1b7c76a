"""What the commands share: the engine options, the error handler (from mcp_sim.cli.errors), and building a
simulator from them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mcp_sim.base import defaults
from mcp_sim.cli.errors import handle_errors as handle_errors  # re-exported: serve.py imports it here
from mcp_sim.core.specs import Catalog
from mcp_sim.engines.registry import ENGINES, engine_names

if TYPE_CHECKING:
    from mcp_sim.core.calls import AnswerSource, CallObserver
    from mcp_sim.core.prompt_budget import SpecFit
    from mcp_sim.core.simulator import Simulator
    from mcp_sim.core.worlds import Worlds
    from mcp_sim.rehearsal.settings import RehearsalSettings

logger = logging.getLogger("mcp_sim")

Command = Callable[..., Any]
_FROM_MANIFEST = "(default: the model's manifest, else {})"


def engine_options(command: Command) -> Command:
    """The options that choose and tune the model; shared by every command that simulates."""
    options = [
        click.option("--model", "model", default=None,
                     help="A registry name (qwen-agentworld-35b-a3b:Q4_K_M), OWNER/REPO:QUANT, "
                     "hf://OWNER/REPO/FILE.gguf, a .gguf in models/, or a path; with --engine openai, "
                     "the name the server serves. Default: the bundled SmolLM2-135M-Instruct Q4_1."),
        click.option("--engine", type=click.Choice(engine_names()), default=defaults.ENGINE, show_default=True,
                     help="; ".join(f"{kind.name}: {kind.summary}" for kind in ENGINES.values()) + "."),
        click.option("--base-url", default=None,
                     help="The OpenAI-compatible API root, e.g. http://gpu-box:8000/v1 (--engine openai)."),
        click.option("--api-key-env", default=defaults.OPENAI_API_KEY_ENV, show_default=True,
                     help="Environment variable holding the server's API key, if it needs one."),
        click.option("--max-inflight", type=click.IntRange(1), default=defaults.OPENAI_MAX_INFLIGHT,
                     show_default=True, help="Most concurrent requests to the server (--engine openai)."),
        click.option("--timeout", type=click.FloatRange(1), default=defaults.OPENAI_TIMEOUT_S, show_default=True,
                     help="Seconds to wait for one answer from the server (--engine openai)."),
        click.option("--ctx", type=click.IntRange(512), default=None,
                     help="Context size in tokens " + _FROM_MANIFEST.format(defaults.CTX) + "."),
        click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads, for prompt and generation "
                     "alike (default: every core on up to 4 cores, else half the cores, at least 4)."),
        click.option("--gpu-layers", type=int, default=None,
                     help="Layers to offload to the GPU (default: all when the build supports it, else 0)."),
        click.option("--seed", type=int, default=defaults.SEED, show_default=True, help="Sampling seed."),
        click.option("--temperature", type=click.FloatRange(0), default=None,
                     help=_FROM_MANIFEST.format(defaults.TEMPERATURE)),
        click.option("--top-p", type=click.FloatRange(0, 1), default=None,
                     help=_FROM_MANIFEST.format(defaults.TOP_P)),
        click.option("--top-k", type=click.IntRange(0), default=None, help=_FROM_MANIFEST.format(defaults.TOP_K)),
        click.option("--max-tokens", type=click.IntRange(16), default=None,
                     help="Most tokens one answer may take, reasoning not counted "
                     + _FROM_MANIFEST.format(defaults.MAX_TOKENS)),
        click.option("--think/--no-think", default=None,
                     help="Let the model reason before it answers (default: on when the manifest says "
                     "it thinks)."),
        click.option("--think-budget", type=click.IntRange(0), default=None,
                     help="Most reasoning tokens before the answer is forced "
                     + _FROM_MANIFEST.format(defaults.THINK_BUDGET)),
        click.option("--prompt-style", type=click.Choice(["auto", "agentworld", "generic"]), default="auto",
                     show_default=True,
                     help="agentworld: Qwen-AgentWorld's native format (auto: from the manifest)."),
        click.option("--attempts", type=click.IntRange(1, 10), default=defaults.ATTEMPTS, show_default=True,
                     help="Tries before a schema-breaking answer becomes an is_error result."),
        click.option("--max-argument-bytes", type=click.IntRange(1), default=defaults.MAX_ARGUMENT_BYTES,
                     show_default=True, help="Larger arguments are refused with an is_error result."),
        click.option("--call-timeout", type=click.FloatRange(0), default=defaults.CALL_TIMEOUT_S,
                     show_default=True, metavar="SECONDS",
                     help="Most seconds one call may take once its world's turn comes; past it decoding stops "
                          "and the call is an isError naming the limit (0: no limit)."),
        click.option("--history-tokens", type=click.IntRange(0), default=defaults.HISTORY_TOKENS, show_default=True,
                     metavar="TOKENS",
                     help="Most tokens of a world's history in a prompt (0: as many as the context holds). Past "
                          "it the oldest turns leave the prompt (live state keeps their records), so a long "
                          "session's calls cost what its early ones do."),
        click.option("--expose-prompt", is_flag=True, help="Put each call's prompt into its _meta (debugging)."),
        click.option("--simulate-errors", is_flag=True,
                     help="Let the model answer a call that cannot succeed with a tool failure (isError)."),
        click.option("--slots", type=click.IntRange(1, 256), default=defaults.SLOTS, show_default=True,
                     help="Calls one model decodes together (continuous batching): one context of N sequences, "
                          "each with room for --ctx tokens, so the KV cache is N x --ctx."),
        click.option("--parallel", type=click.IntRange(1, 64), default=defaults.PARALLEL, show_default=True,
                     help="Model instances answering calls side by side (each holds its own weights and KV)."),
        click.option("--context-shift/--no-context-shift", default=defaults.CONTEXT_SHIFT, show_default=True,
                     help="When a world outgrows the context, drop its oldest turns by shifting the model state "
                          "(attention models) instead of re-reading the history."),
        click.option("--flash-attn/--no-flash-attn", default=defaults.FLASH_ATTN, show_default=True,
                     help="llama.cpp's flash attention (helps on GPUs; no gain measured on CPUs)."),
        click.option("--lazy-grammar/--no-lazy-grammar", default=defaults.LAZY_GRAMMAR, show_default=True,
                     help="Check the output grammar against each sampled token, filtering the whole vocabulary "
                          "only when it is rejected (same answers at temperature 0, cheaper per token)."),
        click.option("--jump-forward/--no-jump-forward", default=defaults.JUMP_FORWARD, show_default=True,
                     help="Feed what the answer's grammar forces (key names, punctuation, pinned values) in one "
                          "batch instead of a token at a time; JSON answers take json.dumps's layout."),
        click.option("--engine-process", type=click.Choice(defaults.ENGINE_PROCESS_CHOICES),
                     default=defaults.ENGINE_PROCESS, show_default=True,
                     help="Run the model in a process of its own (worker), so that a native crash ends its calls "
                          "with an error and a new process starts, or in the server's (inline); auto: a worker "
                          "for engines that run the model locally."),
        click.option("--cpu-repack", type=click.Choice(defaults.CPU_REPACK_CHOICES), default=defaults.CPU_REPACK,
                     show_default=True,
                     help="Let llama.cpp repack the weights for its CPU kernels (auto: yes, except on a CPU with "
                          "AMX, where that crashes the first decode: llama.cpp #20824)."),
        click.option("--state-cache-mb", type=click.IntRange(0), default=defaults.STATE_CACHE_MB,
                     show_default=True,
                     help="Memory per instance for saved model states, so calls resume sessions instead of "
                          "re-reading them."),
        click.option("--prompt-cache-mb", type=click.IntRange(0), default=defaults.PROMPT_CACHE_MB,
                     show_default=True,
                     help="Disk for the model states of system prompts, so a restarted server resumes them "
                          "instead of reading them again (0: none)."),
        click.option("--prompt-cache-dir", type=click.Path(file_okay=False), default=None,
                     help=f"Where those states are kept (default: ${defaults.PROMPT_CACHE_ENV}, else "
                          "~/.cache/mcp-sim/prompt-states)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def world_options(command: Command) -> Command:
    """The options that decide where worlds start from and where they are kept."""
    options = [
        click.option("--scenario", default=None,
                     help="The scenario new worlds start from (default: the specs' default_scenario, else "
                          "'default'). A client may pick another per world: ?world=NAME&scenario=S."),
        click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Keep worlds in DIR/worlds.sqlite3, so a restarted server continues every world "
                          "(default: in memory, for the server's lifetime). Same as --store sqlite://DIR."),
        click.option("--store", "store", default=None, metavar="URL",
                     help="Where worlds are kept: memory:, sqlite:///DIR, or postgresql://USER@HOST:PORT/DB, "
                          "which several instances share (docs/SCALING.md)."),
        click.option("--max-worlds", type=click.IntRange(1), default=defaults.MAX_WORLDS, show_default=True,
                     help="Most worlds kept; past it the least recently used world is dropped."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def rehearsal_options(command: Command) -> Command:
    """Repeatable runs and bad days: where answers come from besides the model, faults, the ledger."""
    path = click.Path(dir_okay=False, path_type=Path)
    options = [
        click.option("--cache", type=path, default=None,
                     help="A response cache (SQLite): a call seen before under the same model, prompt, world "
                          "history and seed is answered from it, byte for byte; new answers are stored."),
        click.option("--replay-only", is_flag=True,
                     help="Never load or ask the model: a call that no fixture, cassette or cache entry "
                          "answers is an isError miss naming it."),
        click.option("--replay", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
                     help="Traces written by `mcp-sim record`: a recorded call answers with its real result "
                          "(repeatable)."),
        click.option("--strict", is_flag=True, help="Only fixtures, cassettes and the cache answer (as "
                     "--replay-only)."),
        click.option("--faults", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                     help="A fault rule file: errors, latency, timeouts, malformed or injected answers."),
        click.option("--ledger", type=path, default=None,
                     help="Append every call of a tool that may change the world to this JSON Lines file."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def rehearsal_settings(options: dict[str, Any]) -> RehearsalSettings:
    """Take the rehearsal options out of a command's keyword arguments."""
    from mcp_sim.rehearsal.settings import RehearsalSettings

    return RehearsalSettings(cache=options.pop("cache"), replay_only=options.pop("replay_only"),
                             replay=list(options.pop("replay")), strict=options.pop("strict"),
                             faults=options.pop("faults"), ledger=options.pop("ledger"),
                             model=options.get("model"))


def build_simulator(catalog: Catalog, worlds: Worlds | None = None, rehearsal: RehearsalSettings | None = None,
                    load: bool = True, on_fits: Callable[[list[SpecFit]], None] | None = None,
                    sources: Sequence[AnswerSource] = (), observers: Sequence[CallObserver] = (),
                    **engine: Any) -> Simulator:
    """mcp_sim.app.build_simulator from a command's engine options (keyword arguments, as click gives them)."""
    from mcp_sim import app
    from mcp_sim.core.engine_setup import EngineSettings
    from mcp_sim.rehearsal.settings import RehearsalSettings

    settings = app.AppSettings(EngineSettings(**engine), rehearsal or RehearsalSettings(), load=load,
                               observers=observers, sources=sources)
    return app.build_simulator(catalog, settings, worlds, on_fits)
