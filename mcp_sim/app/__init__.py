"""The application: typed settings in, a finished simulator out.

The CLI, the pytest plugin and the benchmarks build their simulators here. Everything a simulator is given
(its engine, options, worlds, answer sources, observers and fault hook) is decided before it is constructed;
nothing changes it afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mcp_sim.core.calls import AnswerSource, CallObserver
from mcp_sim.core.engine_setup import prepare
from mcp_sim.core.model_answer import ModelAnswerer
from mcp_sim.core.prompt_budget import SpecFit, fit_prompts, reserved_tokens
from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import Catalog
from mcp_sim.core.worlds import Worlds
from mcp_sim.core.worlds.stores import open_store
from mcp_sim.core.worlds.world import WorldError
from mcp_sim.engines.base import Engine
from mcp_sim.engines.counting import count_text
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.rehearsal.replay_setup import never_asks_model, prepare_replay
from mcp_sim.rehearsal.settings import RehearsalSettings
from mcp_sim.rehearsal.setup import rehearsal_parts

logger = logging.getLogger("mcp_sim")


@dataclass
class AppSettings:
    """What a simulator is built from (the options of `serve`, `call` and the `mcp_sim` fixture)."""

    engine: EngineSettings = field(default_factory=EngineSettings)
    rehearsal: RehearsalSettings = field(default_factory=RehearsalSettings)
    load: bool = True  # load the model now; a warm start loads it later, in the background
    observers: Sequence[CallObserver] = ()  # more observers of every settled call (the fixture's journal)
    sources: Sequence[AnswerSource] = ()  # answer sources asked before the rehearsal's (eval's real results)


def build_worlds(catalog: Catalog, scenario: str | None, state_dir: Path | None, max_worlds: int,
                 store: str | None = None) -> Worlds:
    """The worlds of a server over CATALOG; an unknown --scenario or an unusable --state-dir or --store fails
    here."""
    default = scenario or catalog.default_scenario
    if default not in catalog.scenarios():
        raise WorldError(f"--scenario {default!r} is not defined by any spec; they define: "
                         f"{', '.join(sorted(catalog.scenarios()))}")
    return Worlds(catalog.scenarios, default, max_worlds, open_store(store, state_dir))


def build_simulator(catalog: Catalog, settings: AppSettings, worlds: Worlds | None = None,
                    on_fits: Callable[[list[SpecFit]], None] | None = None) -> Simulator:
    """A simulator over CATALOG with the engine SETTINGS describe, its model loaded (unless `settings.load` is
    false), and the sources, observers and faults the rehearsal settings ask for. Every spec's prompt is fitted
    to the context first (a spec that cannot fit fails here); `on_fits` hears how each one fits."""
    # --replay-only and --strict never load the model, which need not even be on this machine.
    replaying = never_asks_model(settings.rehearsal)
    prepared = prepare_replay(settings.engine) if replaying else prepare(settings.engine)
    fits = fit_catalog(catalog, prepared.engine, prepared.options)
    if on_fits is not None:
        on_fits(fits)
    simulator = assemble(catalog, prepared.engine, prepared.options, worlds, settings.rehearsal, settings.observers,
                         settings.sources)
    if not replaying:
        for tool, reason in simulator.grammar_fallbacks().items():
            logger.warning("tool %s: its outputSchema cannot be enforced while decoding (%s); answers are "
                           "still validated after decoding and retried", tool, reason)
    if settings.load and not replaying:
        prepared.engine.load()
    return simulator


def assemble(catalog: Catalog, engine: Engine, options: SimOptions | None = None, worlds: Worlds | None = None,
             rehearsal: RehearsalSettings | None = None, observers: Sequence[CallObserver] = (),
             sources: Sequence[AnswerSource] = ()) -> Simulator:
    """A simulator over CATALOG and a ready ENGINE (any Engine: a test's, a benchmark's), with what REHEARSAL
    asks for: sources and the cache, the ledger, faults; SOURCES are asked first."""
    options = options or SimOptions()
    worlds = worlds or Worlds(catalog.scenarios, catalog.default_scenario)
    model = ModelAnswerer(engine, options, worlds)
    parts = rehearsal_parts(catalog, engine, options, model, rehearsal or RehearsalSettings())
    return Simulator(catalog, engine, options, worlds, sources=[*sources, *parts.sources],
                     observers=[*parts.observers, *observers], faults=parts.faults, replay_only=parts.replay_only,
                     model=model)


def fit_catalog(catalog: Catalog, engine: Engine, options: SimOptions) -> list[SpecFit]:
    """Lay every spec's prompt out to fit ENGINE's context (mcp_sim.core.prompt_budget); raise if one cannot."""
    reserved = reserved_tokens(options.max_tokens, options.think_budget if options.think else 0)
    fits = fit_prompts(catalog, lambda text: count_text(engine, text), engine.context_size, reserved,
                       options.prompt_style, options.simulate_errors)
    for fit in fits:
        logger.info("%s: %s", fit.source, fit.describe())
    return fits
