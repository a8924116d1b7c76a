"""The simulator: validate a call, prompt the world model, check its answer against the tool's schema."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mcp_sim import defaults
from mcp_sim.engines.base import ChatMessage, Engine, Generation, GenerationRequest
from mcp_sim.errors import McpSimError
from mcp_sim.grammar_schema import prepare_for_grammar
from mcp_sim.prompt import (
    Turn,
    build_messages,
    error_schema,
    extract_observation,
    parse_error,
    render_action,
    render_error,
    system_prompt,
)
from mcp_sim.specs import Catalog, SpecSet, ToolSpec, validation_error
from mcp_sim.worlds import DEFAULT_WORLD, World, Worlds
from mcp_sim.worlds.world import WorldError

logger = logging.getLogger(__name__)

META_KEY = "mcp-sim/simulation"


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


@dataclass
class SimulationResult:
    """What a client receives, free of MCP types: the MCP layer maps it onto CallToolResult."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Attempt:
    structured: dict[str, Any] | None
    text: str
    problem: str | None
    generation: Generation
    # The model answered with a simulated tool failure; `text` is its message.
    tool_error: bool = False


class Simulator:
    """Answers tool calls for a catalog of specs with an engine, each call in one world."""

    def __init__(self, catalog: Catalog, engine: Engine, options: SimOptions | None = None,
                 worlds: Worlds | None = None):
        self.catalog = catalog
        self.engine = engine
        self.options = options or SimOptions()
        self.worlds = worlds or Worlds(catalog.scenarios, catalog.default_scenario)
        self._tools = catalog.tools
        self._system_prompts: dict[tuple[str, str], str] = {}
        self._grammar_schemas: dict[str, tuple[dict[str, Any], str]] = {}

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
                reason = self.engine.schema_support(self._grammar_schema(tool)[0])
                if reason:
                    fallbacks[tool.name] = reason
        return fallbacks

    def simulate(self, name: str, arguments: dict[str, Any] | None, world: str = DEFAULT_WORLD,
                 on_progress: Callable[[int, int], None] | None = None,
                 cancel: threading.Event | None = None, scenario: str | None = None) -> SimulationResult:
        """Answer one call. A tool failure (bad arguments, an answer that never fit) is an is_error result;
        an unknown tool raises UnknownToolError, and an engine that cannot answer raises EngineError. The
        world is created from `scenario` (default: the server's) on its first call; a bad world or scenario
        name is an is_error result too."""
        tool = self.tool(name)
        arguments = {} if arguments is None else arguments
        started = time.perf_counter()
        base_meta: dict[str, Any] = {"simulated": True, "model": self.engine.name, "world": world}
        problem = self._argument_problem(tool, arguments)
        if problem:
            return SimulationResult(problem, is_error=True, meta={META_KEY: {**base_meta, "stage": "arguments"}})
        try:
            state = self.worlds.get(world, scenario)
        except WorldError as exc:
            return SimulationResult(str(exc), is_error=True, meta={META_KEY: {**base_meta, "stage": "world"}})
        with state.lock:
            return self._simulate_in_world(tool, arguments, state, base_meta, started, on_progress, cancel)

    def _argument_problem(self, tool: ToolSpec, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return f"Input validation error: arguments must be an object, got {type(arguments).__name__}"
        size = len(json.dumps(arguments, ensure_ascii=False).encode())
        if size > self.options.max_argument_bytes:
            return (f"Input validation error: the arguments are {size} bytes; this simulator accepts at most "
                    f"{self.options.max_argument_bytes} (raise it with --max-argument-bytes)")
        message = validation_error(arguments, tool.input_schema)
        return f"Input validation error for tool '{tool.name}': {message}" if message else None

    def _simulate_in_world(self, tool: ToolSpec, arguments: dict[str, Any], world: World,
                             base_meta: dict[str, Any], started: float,
                             on_progress: Callable[[int, int], None] | None,
                             cancel: threading.Event | None) -> SimulationResult:
        spec_set = tool.spec_set
        assert spec_set is not None
        action = render_action(tool.name, arguments)
        messages, dropped = self._fit_to_context(spec_set, world, action)
        world.calls += 1
        budget = self.options.max_tokens * self.options.attempts
        spent = 0
        attempt: _Attempt | None = None
        for number in range(self.options.attempts):
            progress = None if on_progress is None else (lambda n, s=spent: on_progress(s + n, budget))
            attempt = self._attempt(tool, messages, number, progress, cancel, world, spec_set.source)
            spent += attempt.generation.completion_tokens
            if attempt.generation.finish_reason == "cancelled":
                break
            if attempt.problem is None:
                break
            logger.info("attempt %d for %s did not fit: %s", number + 1, tool.name, attempt.problem)
        assert attempt is not None
        meta = {**base_meta, "scenario": world.scenario, "turn": world.calls,
                "history_turns": (len(messages) - 2) // 2, "dropped_turns": dropped,
                "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                "prompt_tokens": attempt.generation.prompt_tokens, "completion_tokens": spent,
                "attempts": number + 1}
        if attempt.generation.evaluated_tokens is not None:
            meta["evaluated_tokens"] = attempt.generation.evaluated_tokens
        if attempt.generation.reasoning_tokens:
            meta["reasoning_tokens"] = attempt.generation.reasoning_tokens
        if self.options.expose_prompt:
            meta["prompt"] = [{"role": m.role, "content": m.content} for m in messages]
        if attempt.problem is not None:
            return SimulationResult(self._failure_text(tool, attempt), is_error=True,
                                    meta={META_KEY: {**meta, "stage": "output"}})
        if attempt.tool_error:
            self.worlds.record(world, spec_set.source,
                               Turn(action, render_error(attempt.text, tool.output_schema is not None)))
            return SimulationResult(attempt.text, is_error=True, meta={META_KEY: {**meta, "simulated_error": True}})
        self.worlds.record(world, spec_set.source, Turn(action, attempt.text))
        return SimulationResult(attempt.text, attempt.structured, meta={META_KEY: meta})

    def _failure_text(self, tool: ToolSpec, attempt: _Attempt) -> str:
        if attempt.generation.finish_reason == "cancelled":
            return f"The simulation of '{tool.name}' was cancelled."
        if tool.output_schema is None:
            return (f"The simulation of '{tool.name}' gave no usable answer after {self.options.attempts} "
                    f"attempt(s): {attempt.problem}. Nothing was executed; try again, or use a larger model.")
        return (f"The simulation of '{tool.name}' did not fit the tool's outputSchema after "
                f"{self.options.attempts} attempt(s): {attempt.problem}. Nothing was executed; "
                "try again, raise --max-tokens, or use a larger model.")

    def _attempt(self, tool: ToolSpec, messages: list[ChatMessage], number: int,
                 on_token: Callable[[int], None] | None, cancel: threading.Event | None,
                 world: World, source: str) -> _Attempt:
        opts = self.options
        schema, key = self._grammar_schema(tool) if tool.output_schema is not None else (None, None)
        request = GenerationRequest(
            messages=messages, max_tokens=opts.max_tokens, json_schema=schema, schema_key=key,
            # Each retry samples differently: a new seed and a little more temperature.
            temperature=opts.temperature + 0.25 * number, top_p=opts.top_p, top_k=opts.top_k,
            repeat_penalty=opts.repeat_penalty, seed=None if opts.seed is None else opts.seed + number,
            on_token=on_token, cache_key=f"{world.name}|{source}", think=opts.think, think_budget=opts.think_budget,
            # A fork's prompts extend its origin's: the origin's saved model state is a prefix of them.
            related_cache_keys=[f"{world.forked_from}|{source}"] if world.forked_from else [])
        if cancel is not None:
            request = replace(request, cancel=cancel)
        generation = self.engine.generate(request)
        text = extract_observation(generation.text)
        if generation.finish_reason == "cancelled":
            return _Attempt(None, text, "cancelled", generation)
        if tool.output_schema is None:
            problem = None if text else "the model returned an empty answer"
            message = parse_error(text, structured=False) if opts.simulate_errors else None
            if message is not None:
                return _Attempt(None, message, None, generation, tool_error=True)
            return _Attempt(None, text, problem, generation)
        return self._check_structured(tool.output_schema, text, generation)

    def _check_structured(self, schema: dict[str, Any], text: str, generation: Generation) -> _Attempt:
        if generation.finish_reason == "length":
            return _Attempt(None, text, f"the answer was cut off at {generation.completion_tokens} tokens",
                            generation)
        try:
            value = json.loads(text, strict=False)  # the grammar lets raw newlines into strings
        except json.JSONDecodeError as exc:
            return _Attempt(None, text, f"the answer is not JSON ({exc.msg})", generation)
        if not isinstance(value, dict):
            return _Attempt(None, text, "the answer is not a JSON object", generation)
        problem = validation_error(value, schema)
        if problem is not None and self.options.simulate_errors:
            message = parse_error(value, structured=True)
            if message is not None:
                return _Attempt(None, message, None, generation, tool_error=True)
        canonical = json.dumps(value, ensure_ascii=False)
        return _Attempt(value if problem is None else None, canonical, problem, generation)

    def _grammar_schema(self, tool: ToolSpec) -> tuple[dict[str, Any], str]:
        cached = self._grammar_schemas.get(tool.name)
        if cached is None:
            assert tool.output_schema is not None
            schema = prepare_for_grammar(tool.output_schema, self.options.max_string, self.options.max_items)
            if self.options.simulate_errors:
                schema = {"anyOf": [schema, error_schema(self.options.max_string * 2)]}
            digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]
            cached = self._grammar_schemas[tool.name] = (schema, f"{tool.name}:{digest}")
        return cached

    def _system_prompt(self, spec_set: SpecSet, scenario: str) -> str:
        prompt = self._system_prompts.get((spec_set.source, scenario))
        if prompt is None:
            prompt = system_prompt(spec_set, self.options.prompt_style, errors=self.options.simulate_errors,
                                   scenario=scenario)
            self._system_prompts[(spec_set.source, scenario)] = prompt
        return prompt

    def _fit_to_context(self, spec_set: SpecSet, world: World, action: str) -> tuple[list[ChatMessage], int]:
        """The prompt for this call and how many of the oldest turns had to be left out of it so that it fits
        the context (never the system prompt)."""
        system = self._system_prompt(spec_set, world.scenario)
        history = world.history(spec_set.source)
        limit = self.engine.context_size - self.options.max_tokens - self._think_budget()
        style = self.options.prompt_style
        messages = build_messages(system, history, action, style)
        dropped = 0
        while history and self.engine.count_tokens(messages) > limit:
            history.pop(0)
            dropped += 1
            messages = build_messages(system, history, action, style)
        if dropped:
            self.worlds.leave_out_oldest(world, spec_set.source, dropped)
            logger.warning("world %s: left the %d oldest turn(s) of %s out of the prompt to fit the %d-token "
                           "context", world.name, dropped, spec_set.source, self.engine.context_size)
        return messages, dropped

    def _think_budget(self) -> int:
        return self.options.think_budget if self.options.think else 0
