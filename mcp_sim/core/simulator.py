"""The simulator: validate a call, find its world, answer it (a fault, a fixture, a cassette, the cache or
the model, in that order), record it in the world and tell the observers."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.base.result import SimulationMeta, failure
from mcp_sim.core.calls import META_KEY, AnswerSource, Call, CallObserver, FaultHook, SimulationResult
from mcp_sim.core.computed_answers import TextTemplates, past_calls, ruled_answer
from mcp_sim.core.deadline import deadline, timed_out
from mcp_sim.core.model_answer import ModelAnswerer
from mcp_sim.core.model_logs import write_logs
from mcp_sim.core.prompt import Turn, render_action, render_error, system_prompt
from mcp_sim.core.resource_reads import read_tool
from mcp_sim.core.specs import Catalog, SpecSet, ToolSpec, validation_error
from mcp_sim.core.text_json import as_printed
from mcp_sim.core.worlds import DEFAULT_WORLD, World, Worlds
from mcp_sim.core.worlds.world import WorldError
from mcp_sim.engines.base import Engine
from mcp_sim.state.book import StateBook
from mcp_sim.state.field_rules import rule_pins
from mcp_sim.state.live import LiveData
from mcp_sim.state.plan import StatePlan

__all__ = ["META_KEY", "SimOptions", "SimulationMeta", "SimulationResult", "Simulator", "UnknownToolError"]

logger = logging.getLogger(__name__)


class UnknownToolError(McpSimError):
    """The client called a tool that no spec defines (a protocol error, not a tool failure)."""


@dataclass(frozen=True)
class SimOptions:
    max_tokens: int = defaults.MAX_TOKENS
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    top_k: int = defaults.TOP_K
    repeat_penalty: float = defaults.REPEAT_PENALTY
    seed: int | None = defaults.SEED
    attempts: int = defaults.ATTEMPTS
    max_string: int = defaults.MAX_STRING
    max_items: int = defaults.MAX_ITEMS
    max_argument_bytes: int = defaults.MAX_ARGUMENT_BYTES
    # Put the rendered prompt into each result's _meta (for debugging and tests).
    expose_prompt: bool = False
    # "generic", or "agentworld" for Qwen-AgentWorld's native prompt format.
    prompt_style: str = "generic"
    # Reason first (up to think_budget tokens), then answer under the output-schema grammar.
    think: bool = False
    think_budget: int = defaults.THINK_BUDGET
    # Let the model answer a call with a tool failure (an isError result), as a real tool does when the
    # call cannot succeed in its world. Off by default: very small models pick the failure at random.
    simulate_errors: bool = False
    # Seconds one call may take once its world's turn comes (0: no limit); past it, decoding stops between
    # tokens and the call is an isError naming the limit.
    call_timeout: float = defaults.CALL_TIMEOUT_S
    # The most tokens of a world's history in a prompt (0: as many as the context holds); past it the oldest
    # turns go as they go when the context is full (ModelAnswerer.fit_to_context).
    history_tokens: int = defaults.HISTORY_TOKENS


class Simulator:
    """Answers tool calls for a catalog of specs, each call in one world.

    `sources` answer before the model, first match wins; with `replay_only`, a call none of them answers is
    an is_error miss and the model is never asked. `faults` may answer first or change an answer;
    `observers` see every final answer."""

    def __init__(self, catalog: Catalog, engine: Engine, options: SimOptions | None = None,
                 worlds: Worlds | None = None, *, sources: Sequence[AnswerSource] = (),
                 observers: Sequence[CallObserver] = (), faults: FaultHook | None = None,
                 replay_only: bool = False, model: ModelAnswerer | None = None):
        self.catalog = catalog
        self.engine = engine
        self.options = options or SimOptions()
        self.worlds = worlds or Worlds(catalog.scenarios, catalog.default_scenario)
        self.sources = list(sources)
        self.observers = list(observers)
        self.faults = faults
        self.replay_only = replay_only
        # The model's answerer; built first by whoever gives the fault hook one (mcp_sim.app).
        self.model = model or ModelAnswerer(engine, self.options, self.worlds)
        # Each tool's effect on its world's live data (x-sim.state, or inferred from its name).
        self.state = StateBook(catalog.spec_sets)
        self._tools = catalog.tools
        self._text_templates = TextTemplates(self.state)
        self._system_prompts: dict[tuple[str, str, bool], str] = {}

    def tool(self, name: str) -> ToolSpec:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise UnknownToolError(f"Unknown tool {name!r}. This simulator serves: {known}") from None

    def grammar_fallbacks(self) -> dict[str, str]:
        """Tools whose outputSchema the engine cannot enforce while decoding, and why."""
        fallbacks = {}
        for tool in self._tools.values():
            if tool.output_schema is not None:
                reason = self.engine.schema_support(self.model.grammar_schema(tool)[0])
                if reason:
                    fallbacks[tool.name] = reason
        return fallbacks

    def simulate(self, name: str, arguments: dict[str, Any] | None, world: str = DEFAULT_WORLD,
                 on_progress: Callable[[int, int], None] | None = None,
                 cancel: threading.Event | None = None, scenario: str | None = None,
                 client: dict[str, Any] | None = None) -> SimulationResult:
        """Answer one call. A tool failure (bad arguments, an answer that never fit) is an is_error result;
        an unknown tool raises UnknownToolError, and an engine that cannot answer raises EngineError. The
        world is created from `scenario` (default: the server's) on its first call; a bad world or scenario
        name is an is_error result too. `client` is what the client answered to the tool's own requests."""
        return self.answer_call(self.tool(name), arguments, world, on_progress, cancel, scenario, client)

    def read_resource(self, uri: str, world: str = DEFAULT_WORLD,
                      on_progress: Callable[[int, int], None] | None = None,
                      cancel: threading.Event | None = None, scenario: str | None = None) -> SimulationResult:
        """Answer a resources/read that the spec leaves to the model: a call in the world (see resource_reads).
        A URI no spec declares raises UnknownResourceError."""
        return self.answer_call(read_tool(self.catalog, uri), {"uri": uri}, world, on_progress, cancel, scenario)

    def answer_call(self, tool: ToolSpec, arguments: dict[str, Any] | None, world: str,
                    on_progress: Callable[[int, int], None] | None = None, cancel: threading.Event | None = None,
                    scenario: str | None = None, client: dict[str, Any] | None = None) -> SimulationResult:
        """Answer one call of TOOL (a spec's tool, or the synthetic tool of a resource read). Every outcome, an
        answer, a tool failure or a protocol error, is settled here once (see `_settle`)."""
        arguments = {} if arguments is None else arguments
        started = time.perf_counter()
        problem = self._argument_problem(tool, arguments)
        if problem:
            return self.refused(problem, "arguments", world, started)
        with ExitStack() as held:
            try:  # the world's lock in the store, held to the end of the call; the world as last stored
                state = held.enter_context(self.worlds.calling(world, scenario))
            except WorldError as exc:
                return self.refused(str(exc), "world", world, started)
            call = self._call(tool, arguments, state, on_progress, cancel, client)
            with deadline(self.options.call_timeout, call.cancel) as limit:
                result, source = self._answer(call)
                logs = tool.interactions.logs
                if logs is not None and source == "model" and not result.is_error and not call.cancel.is_set():
                    result.interactions = [*(result.interactions or []),
                                           *write_logs(self.model, call, result.text, logs)]
            if limit.expired.is_set() and result.observation is None:  # stopped by the limit, not answered
                result = timed_out(tool.name, limit, result.simulation)
            return self._settle(call, result, source, started)

    def refused(self, message: str, stage: str, world: str, started: float | None = None) -> SimulationResult:
        """A call that never reached its world's turn (bad arguments, a bad world, a full queue, a client that
        refused the tool's requests): an isError with the same _meta as every settled answer. No observer
        sees it: nothing was answered in a world."""
        result = failure(message, stage)
        result.simulation = replace(result.simulation, model=self.engine.name, world=world)
        if started is not None:
            result.simulation.latency_ms = round((time.perf_counter() - started) * 1000, 1)
        return result

    def _argument_problem(self, tool: ToolSpec, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return f"Input validation error: arguments must be an object, got {type(arguments).__name__}"
        size = len(json.dumps(arguments, ensure_ascii=False).encode())
        if size > self.options.max_argument_bytes:
            return (f"Input validation error: the arguments are {size} bytes; this simulator accepts at most "
                    f"{self.options.max_argument_bytes} (raise it with --max-argument-bytes)")
        message = validation_error(arguments, tool.input_schema)
        return f"Input validation error for tool '{tool.name}': {message}" if message else None

    def _call(self, tool: ToolSpec, arguments: dict[str, Any], world: World,
              on_progress: Callable[[int, int], None] | None, cancel: threading.Event | None,
              client: dict[str, Any] | None = None) -> Call:
        spec_set = tool.spec_set
        assert spec_set is not None
        turns_before = len(world.turns.get(spec_set.source, []))
        system = self.system_prompt(spec_set, world.scenario, first_call=turns_before == 0)
        call = Call(tool, arguments, world, spec_set.source, world.calls + 1,
                    render_action(tool.name, arguments, client), system, world.history(spec_set.source),
                    self.options.seed, cancel or threading.Event(), on_progress, turns_before, client)
        if self.state.effect(tool.name) is not None:
            call.live = self.live_data(world, spec_set)
            call.state = self.state.plan(tool.name, arguments, call.live, world.name)
            call.state_digest = call.live.digest()
        if tool.rules:
            past = past_calls(world.turns.get(spec_set.source, []))
            call.rule_pins = rule_pins(tool.rules, tool.name, arguments, past, tool.output_schema)
        return call

    def known_keys(self, world: str, argument: str) -> list[str]:
        """The record keys an argument named ARGUMENT may take in WORLD (its live data, or the seed data of a
        world not started yet), for completions."""
        found = self.worlds.find(world) if world else None
        sets = {spec_set.source: spec_set for spec_set in self.catalog.spec_sets}

        def live(source: str) -> LiveData:
            if found is not None and source in found.live:
                return found.live[source]
            return LiveData(sets[source].world_state(found.scenario if found else self.worlds.default_scenario)[1])

        return self.state.known_keys(argument, live)

    def live_data(self, world: World, spec_set: SpecSet) -> LiveData:
        """The world's live data of SPEC_SET, seeded from its scenario's data on first use."""
        live = world.live.get(spec_set.source)
        if live is None:
            live = world.live[spec_set.source] = LiveData(spec_set.world_state(world.scenario)[1])
        return live

    def _answer(self, call: Call) -> tuple[SimulationResult, str]:
        """The answer and where it came from: a fault, a source, or the model. An engine that cannot answer
        fails this call alone, as an isError the observers see like any other outcome."""
        try:
            if self.faults is not None:
                scripted = self.faults.before(call)
                if scripted is not None:
                    return scripted, "fault"
            result, source = self._first_answer(call)
            if self.faults is not None:
                result = self.faults.after(call, result)
            return result, source
        except McpSimError as exc:
            logger.error("simulation of %s failed: %s", call.tool.name, exc)
            return failure(f"Simulation failed: {exc}", "engine"), "engine"
        except Exception as exc:  # a bug or a crashed engine: this call fails, the server and the others go on
            logger.exception("simulation of %s failed unexpectedly", call.tool.name)
            return failure(f"Simulation failed: internal error ({type(exc).__name__}: {exc}); nothing was "
                           "executed. The server log has the traceback.", "engine"), "engine"

    def _first_answer(self, call: Call) -> tuple[SimulationResult, str]:
        for source in self.sources:
            answer = source.answer(call)
            if answer is not None:
                return answer, source.name
        if call.state is not None and call.state.complete:
            return _state_answer(call.tool, call.state), "state"
        whole = ruled_answer(call)
        if whole is not None:
            return whole, "rules"
        filled = self._text_templates.answer(call)
        if filled is not None:
            return filled, "template"
        if self.replay_only:
            return self._miss(call), "miss"
        return self.model.answer(call), "model"

    def _miss(self, call: Call) -> SimulationResult:
        sources = ", ".join(source.name for source in self.sources) or "no source"
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        return failure(
            f"Replay miss: tool '{call.tool.name}' with arguments {arguments} in world '{call.world.name}' is "
            f"not in the cache, and no fixture or cassette answers it (looked in: {sources}). --replay-only "
            "and --strict never ask the model: record this call (run once with --cache and without "
            "--replay-only) or add a fixture for it.", "replay")

    def _settle(self, call: Call, result: SimulationResult, source: str, started: float) -> SimulationResult:
        """The one step every outcome of a call in a world goes through (an answer, a tool failure, a failure of
        the simulation, a protocol error): record it in its world, complete its _meta, tell every observer."""
        if result.observation is not None:
            call.world.calls += 1
            change = self._commit_state(call, result, source)
            if change is not None:
                result.simulation.state = change
            self.worlds.record(call.world, call.source, Turn(call.action, result.observation))
        result.simulation = replace(result.simulation, model=self.engine.name, world=call.world.name,
                                    scenario=call.world.scenario, source=source, turn=call.number,
                                    latency_ms=round((time.perf_counter() - started) * 1000, 1))
        for observer in self.observers:
            observer.observed(call, result, source)
        return as_printed(result, call.tool.text_json)

    def _commit_state(self, call: Call, result: SimulationResult, source: str) -> dict[str, Any] | None:
        """Write what the answer says into the world's live data (recorded with the turn, in one transaction).
        A failure a fault made up says nothing about the world: a timeout does not make a record absent."""
        if call.state is None or call.live is None:
            return None
        if result.is_error and (source == "fault" or result.simulation.faults):
            return None
        change = self.state.commit(call.state, call.live, result.structured, result.text, result.is_error)
        return None if change is None else change.to_json()

    def system_prompt(self, spec_set: SpecSet, scenario: str, first_call: bool = False) -> str:
        """The system prompt of SPEC_SET's calls in a world of SCENARIO; of a world's FIRST_CALL of the file,
        which differs for an indexed spec only (prompt.INDEX_FIRST_CALL)."""
        first_call = first_call and spec_set.prompt_layout == "index"
        prompt = self._system_prompts.get((spec_set.source, scenario, first_call))
        if prompt is None:
            prompt = system_prompt(spec_set, self.options.prompt_style, errors=self.options.simulate_errors,
                                   scenario=scenario, first_call=first_call)
            self._system_prompts[(spec_set.source, scenario, first_call)] = prompt
        return prompt


def _state_answer(tool: ToolSpec, step: StatePlan) -> SimulationResult:
    """The answer the live state gives whole: a record, a list, or the tool's not-found failure."""
    if step.is_error:
        text = str(step.answer)
        return SimulationResult(text, is_error=True, observation=render_error(text, tool.output_schema is not None))
    if isinstance(step.answer, dict):
        text = json.dumps(step.answer, ensure_ascii=False)
        return SimulationResult(text, step.answer, observation=text)
    return SimulationResult(str(step.answer), observation=str(step.answer))
