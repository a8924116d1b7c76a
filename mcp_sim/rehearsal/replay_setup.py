"""Repeatable runs: fixtures, cassettes and the response cache answer before the model, in that order;
--replay-only and --strict leave the model out, so that it is never loaded."""

from __future__ import annotations

import logging
from pathlib import Path

from mcp_sim.core.engine_setup import Prepared, sim_options
from mcp_sim.core.simulator import SimOptions
from mcp_sim.core.specs import Catalog
from mcp_sim.engines.base import Engine
from mcp_sim.engines.registry import engine_kind
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.rehearsal.cache import ResponseCache, json_digest
from mcp_sim.rehearsal.cassettes import Cassette
from mcp_sim.rehearsal.parts import RehearsalParts
from mcp_sim.rehearsal.replay_engine import ReplayOnlyEngine
from mcp_sim.rehearsal.settings import RehearsalSettings
from mcp_sim.rehearsal.sources import (
    CacheKeys,
    CacheRecorder,
    CacheSource,
    CassetteSource,
    FixtureSource,
    options_digest,
)
from mcp_sim.xsim.fixtures import FixtureSet

logger = logging.getLogger(__name__)

# What the cache records answers of the bundled model under (no --model given).
DEFAULT_MODEL_NAME = "default"
# The engine name of a run that never asks the model (what _meta["mcp-sim/simulation"].model says).
REPLAY_ENGINE_NAME = "none (replay only)"


def never_asks_model(settings: RehearsalSettings) -> bool:
    return settings.replay_only or settings.strict


def replay_parts(catalog: Catalog, engine: Engine, options: SimOptions, settings: RehearsalSettings,
                 parts: RehearsalParts) -> None:
    """Add to PARTS the fixture, cassette and cache sources (and the cache's recorder) that SETTINGS ask for."""
    fixtures = FixtureSet(fixture for tool in catalog.tools.values() for fixture in tool.fixtures)
    if len(fixtures):
        parts.sources.append(FixtureSource(fixtures))
    if settings.replay:
        parts.sources.append(CassetteSource(Cassette.load(settings.replay)))
    if settings.cache is not None:
        _cache_parts(engine, options, settings, settings.cache, parts)
    parts.replay_only = parts.replay_only or never_asks_model(settings)


def _cache_parts(engine: Engine, options: SimOptions, settings: RehearsalSettings, path: Path,
                 parts: RehearsalParts) -> None:
    replaying = never_asks_model(settings)
    # A replay only reads: a mistyped path is an error, not a new empty cache that misses every call.
    cache = ResponseCache(path, create=not replaying)
    model_name = settings.model or DEFAULT_MODEL_NAME
    keys = CacheKeys(_model_hash(engine, cache, model_name), options_digest(options, engine.context_size))
    parts.sources.append(CacheSource(cache, keys))
    if not replaying:
        parts.observers.append(CacheRecorder(cache, keys, model_name))


def _model_hash(engine: Engine, cache: ResponseCache, model_name: str) -> str | None:
    """Which model answers: the content hash of its file, else a description of it, else what the cache
    recorded for its name."""
    identity = engine.identity()
    if identity.model_file is not None:
        return cache.model_fingerprint(identity.model_file)
    if identity.described:
        return json_digest(identity.described)
    return _recorded_hash(cache, model_name)


def _recorded_hash(cache: ResponseCache, model_name: str) -> str | None:
    recorded = cache.model_for_name(model_name)
    if recorded is None:
        names = ", ".join(m["model_name"] for m in cache.stats()["models"]) or "none"
        logger.warning("the response cache %s holds no answers recorded under --model %s (it holds: %s), and "
                       "that model is not on this machine: every call the cache would answer misses",
                       cache.path, model_name, names)
    return recorded


def prepare_replay(settings: EngineSettings) -> Prepared:
    """The engine stand-in and options of a run that never asks the model: nothing is loaded or
    downloaded, and an absent model file is no error (the cache knows which file answered)."""
    # The model file if it is on this machine, and its manifest (which decides options, so a cache key).
    choice = engine_kind(settings.engine).offline_choice(settings)
    options, ctx = sim_options(settings, choice.manifest)
    model_name = settings.model or DEFAULT_MODEL_NAME
    # Named for what answers: no model is loaded, so _meta and the logs must not name one.
    engine = ReplayOnlyEngine(REPLAY_ENGINE_NAME, ctx, model_name, choice.path)
    return Prepared(engine, options, choice.manifest)
