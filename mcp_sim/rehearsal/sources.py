"""Answers that need no model: fixtures pinned in the spec, cassettes of real traces, the response cache;
and the observer that fills the cache with the model's answers.

Every answer here joins the world's history (its `observation`) just as a model answer does, so the model
stays consistent with it and a replayed world's history equals the recorded one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from mcp_sim.base.content import content_text, is_plain_text
from mcp_sim.base.result import SimulationMeta
from mcp_sim.core import demonstrations, prompt
from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.core.prompt import render_error, render_observation
from mcp_sim.core.specs import ToolSpec
from mcp_sim.rehearsal.cache import CacheError, ResponseCache, cache_key, json_digest
from mcp_sim.rehearsal.cassettes import Cassette, RecordedCall
from mcp_sim.xsim.canonical import canonical_json
from mcp_sim.xsim.fixtures import FixtureSet

logger = logging.getLogger(__name__)


def recorded_answer(tool: ToolSpec, text: str, structured: dict[str, Any] | None, is_error: bool,
                    meta: SimulationMeta | None = None, content: list[dict[str, Any]] | None = None,
                    result_meta: dict[str, Any] | None = None) -> SimulationResult:
    """An answer recorded in the world's history in the form the model's own answers take."""
    observation = render_error(text, tool.output_schema is not None) if is_error else \
        render_observation(structured, text)
    return SimulationResult(text, structured, is_error, simulation=meta or SimulationMeta(), observation=observation,
                            content=content, result_meta=result_meta)


class FixtureSource:
    """`x-sim.fixtures`: the most specific matching fixture answers, its templates filled for this call."""

    name = "fixture"

    def __init__(self, fixtures: FixtureSet):
        self.fixtures = fixtures

    def answer(self, call: Call) -> SimulationResult | None:
        found = self.fixtures.answer(call.tool.name, call.arguments, world=call.world.name,
                                     call_number=call.number, seed=call.seed, client=call.client)
        if found is None:
            return None
        details = {"fixture": found.fixture.where}
        if found.is_error and not found.fixture.is_error:  # filled, it broke the outputSchema: a spec bug
            return SimulationResult(found.text, is_error=True,
                                    simulation=SimulationMeta(stage="fixture", details=details))
        return recorded_answer(call.tool, found.text, found.structured, found.is_error,
                               SimulationMeta(details=details), found.content, found.fixture.result_meta)


class CassetteSource:
    """Real recorded calls (`mcp-sim record` traces): a call with the recorded tool and arguments gets the
    real result; identical calls take the recorded answers in order, per world.

    How far a world has played a call is read from the world's own history, not kept here, so a reset, a
    fork or a restarted server (--state-dir) continues exactly where its world is."""

    name = "cassette"

    def __init__(self, cassette: Cassette):
        self.cassette = cassette

    def answer(self, call: Call) -> SimulationResult | None:
        recorded = self.cassette.recorded(call.tool.name, call.arguments)
        played = _played(call, recorded)
        if played >= len(recorded):
            return None
        real = recorded[played]
        details: dict[str, Any] = {"cassette": real.origin}
        if real.protocol_error is not None:
            details["protocol_error"] = real.protocol_error
        # Replayed byte for byte: every block (images, resources, annotations) and the recorded _meta.
        content = None if not real.content or is_plain_text(real.content) else real.content
        text = real.text if content is None else content_text(content)
        recorded_meta = real.result.get("_meta")
        return SimulationResult(text, real.structured, real.is_error, simulation=SimulationMeta(details=details),
                                observation=real.turn().observation, content=content,
                                result_meta=recorded_meta if isinstance(recorded_meta, dict) else None,
                                interactions=list(real.interactions) or None)


def _played(call: Call, recorded: list[RecordedCall]) -> int:
    """How many of RECORDED this call's world has already been answered with."""
    if not recorded:
        return 0
    wanted = canonical_json({"name": call.tool.name, "arguments": call.arguments})
    observations = {real.turn().observation for real in recorded}
    return sum(1 for turn in call.world.turns.get(call.source, ())
               if turn.observation in observations and _canonical_action(turn.action) == wanted)


def _canonical_action(action: str) -> str | None:
    try:
        return canonical_json(json.loads(action))
    except json.JSONDecodeError:
        return None


@dataclass(frozen=True)
class CacheKeys:
    """What a cache key needs besides the call: the model, the prompt version and the options."""

    model_hash: str | None  # None: no answer of this model is known, so nothing hits
    options_digest: str
    prompt_version: str = field(default_factory=lambda: prompt.PROMPT_VERSION)

    def key(self, call: Call) -> str | None:
        if self.model_hash is None:
            return None
        # The whole history, also turns left out of prompts: a replay that never asks the model never
        # leaves any out, and must still find the keys a recording run computed.
        history = call.world.turns.get(call.source, [])[:call.turns_before]
        return cache_key(model_hash=self.model_hash, prompt_version=self.prompt_version,
                         spec_digest=_spec_digest(call), history=history, tool=call.tool.name,
                         # What the client answered during the call changes the answer as arguments do.
                         arguments={**call.arguments, "mcp-sim/client": call.client} if call.client
                         else call.arguments, seed=call.seed, options_digest=self.options_digest,
                         state=call.state_digest)


def _spec_digest(call: Call) -> str:
    """What the call's prompt shows of its spec: the system prompt, and the tool's examples it leaves out when
    there are any, since the call may bring some of them (core.demonstrations). Without such examples the
    digest is the system prompt's alone, as before, so older caches keep their keys."""
    unshown = demonstrations.unshown(call.tool, call.world.scenario)
    if not unshown:
        return json_digest(call.system)
    return json_digest([call.system, [[example.arguments, example.result, example.is_error] for example in unshown]])


# Options that never change a stored answer: leaving them out keeps the keys of caches recorded before them.
NOT_IN_KEY = frozenset({"expose_prompt", "call_timeout"})
# Options added after caches were recorded, with the value that answers as before they existed: at that value
# they stay out of the key, so those caches keep their keys.
KEYED_ONLY_WHEN_SET = {"history_tokens": 0}


def options_digest(options: Any, context_size: int) -> str:
    """The simulation options that change an answer (all but NOT_IN_KEY), and the context size."""
    fields = {name: value for name, value in dataclasses.asdict(options).items() if name not in NOT_IN_KEY
              and not (name in KEYED_ONLY_WHEN_SET and value == KEYED_ONLY_WHEN_SET[name])}
    return json_digest({**fields, "context_size": context_size})


class CacheSource:
    """A call seen before under the same key answers with the stored result."""

    name = "cache"

    def __init__(self, cache: ResponseCache, keys: CacheKeys):
        self.cache = cache
        self.keys = keys

    def answer(self, call: Call) -> SimulationResult | None:
        key = self.keys.key(call)
        hit = None if key is None else self.cache.get(key)
        if hit is None:
            return None
        return result_from_bytes(call.tool, hit.result, {"cached_at": hit.created_at})


class CacheRecorder:
    """Stores the model's answers (never a failed or cancelled simulation, never a faulted answer)."""

    def __init__(self, cache: ResponseCache, keys: CacheKeys, model_name: str):
        self.cache = cache
        self.keys = keys
        self.model_name = model_name

    def observed(self, call: Call, result: SimulationResult, source: str) -> None:
        # An answer a fault changed is not the model's: never cached.
        if source != "model" or result.observation is None or result.simulation.faults:
            return
        key = self.keys.key(call)
        if key is None or self.keys.model_hash is None:
            return
        try:
            self.cache.put(key, result_bytes(result), model_hash=self.keys.model_hash, model_name=self.model_name,
                           tool=call.tool.name, arguments=call.arguments, world=call.world.name)
        except CacheError as exc:  # the answer stands; only its replay is lost, and the log says so
            logger.error("answer of %s not cached: %s", call.tool.name, exc)


def result_bytes(result: SimulationResult) -> bytes:
    """The result as the client sees it, without the per-call _meta (latency, turn, world)."""
    document: dict[str, Any] = {"content": [] if result.no_content else [{"type": "text", "text": result.text}]}
    if result.structured is not None:
        document["structuredContent"] = result.structured
    document["isError"] = result.is_error
    return json.dumps(document, ensure_ascii=False).encode()


def result_from_bytes(tool: ToolSpec, data: bytes, details: dict[str, Any]) -> SimulationResult:
    """A stored result, answered again; only simulated tool failures are stored as errors."""
    document = json.loads(data)
    text = "\n".join(block.get("text", "") for block in document.get("content", []) if block.get("type") == "text")
    is_error = bool(document.get("isError"))
    result = recorded_answer(tool, text, document.get("structuredContent"), is_error,
                             SimulationMeta(simulated_error=is_error, details=details))
    result.no_content = not document.get("content")
    return result
