"""The model's answer to a call: the prompt fitted to the context, decoding under the output schema's
grammar, checking the answer and retrying until it fits."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.grammar_schema import prepare_for_grammar
from mcp_sim.base.result import SimulationMeta
from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.core.echoes import borrowed_from, echo_of, in_shape_of, nearest_example
from mcp_sim.core.prompt import (
    Turn,
    build_messages,
    error_schema,
    extract_observation,
    nearest_demonstrations,
    parse_error,
    prompt_action,
    render_error,
)
from mcp_sim.core.specs import ToolSpec, validation_error
from mcp_sim.core.worlds import Worlds
from mcp_sim.engines.base import ChatMessage, Engine, Generation, GenerationRequest
from mcp_sim.state.pins import Pins, apply_pins, pin_schema

logger = logging.getLogger(__name__)


@dataclass
class _Attempt:
    structured: dict[str, Any] | None
    text: str
    problem: str | None
    generation: Generation
    # The model answered with a simulated tool failure; `text` is its message.
    tool_error: bool = False
    # A text answer that echoes the prompt (core.echoes); `problem` says what it echoed.
    echo: bool = False


class ModelAnswerer:
    """Answers calls with an engine, under `options` (a SimOptions)."""

    # The share of the history's room freed whenever the oldest turns must go (0: just enough to fit).
    drop_fraction: float = defaults.CONTEXT_DROP_FRACTION

    def __init__(self, engine: Engine, options: Any, worlds: Worlds):
        self.engine = engine
        self.options = options
        self.worlds = worlds
        self._grammar_schemas: dict[str, tuple[dict[str, Any], str]] = {}

    def answer(self, call: Call) -> SimulationResult:
        """The model's answer; its meta says what it cost. Errors of the simulation itself (an answer that
        never fit, a cancelled call) leave nothing in the world's history."""
        started = time.perf_counter()
        messages, dropped = self.fit_to_context(call)
        budget = self.options.max_tokens * self.options.attempts
        spent = 0
        attempt: _Attempt | None = None
        for number in range(self.options.attempts):
            report = call.on_progress
            progress = None if report is None else (lambda n, s=spent, r=report: r(s + n, budget))
            attempt = self._attempt(call, messages, number, progress)
            spent += attempt.generation.completion_tokens
            if attempt.generation.finish_reason == "cancelled" or attempt.problem is None:
                break
            logger.info("attempt %d for %s did not fit: %s", number + 1, call.tool.name, attempt.problem)
        assert attempt is not None
        meta: dict[str, Any] = {
            "history_turns": (len(messages) - 2) // 2, "dropped_turns": dropped,
            "model_ms": round((time.perf_counter() - started) * 1000, 1),
            "prompt_tokens": attempt.generation.prompt_tokens, "completion_tokens": spent, "attempts": number + 1}
        if attempt.generation.evaluated_tokens is not None:
            meta["evaluated_tokens"] = attempt.generation.evaluated_tokens
        if attempt.generation.cached_tokens is not None:
            meta["cached_tokens"] = attempt.generation.cached_tokens  # the serving engine's prefix cache
        if attempt.generation.reasoning_tokens:
            meta["reasoning_tokens"] = attempt.generation.reasoning_tokens
        if attempt.generation.forced_tokens:
            meta["forced_tokens"] = attempt.generation.forced_tokens  # fed in a batch, not sampled
        if self.options.expose_prompt:
            meta["prompt"] = [{"role": m.role, "content": m.content} for m in messages]
        if attempt.echo:
            return self._instead_of_echo(call, attempt, meta)
        return self._result(call.tool, attempt, meta)

    def _instead_of_echo(self, call: Call, attempt: _Attempt, details: dict[str, Any]) -> SimulationResult:
        """Every attempt echoed the prompt: the nearest example's answer (the tool's own shape and words),
        or, for a tool without examples, the last answer as it was. _meta says which."""
        details["echoed_prompt"] = attempt.problem
        example = nearest_example(call.tool.examples, call.arguments, call.world.scenario)
        if example is None:
            return SimulationResult(attempt.text, simulation=SimulationMeta(details=details),
                                    observation=attempt.text)
        details["answered_from"] = "nearest example"
        text = in_shape_of(example, call.arguments)
        return SimulationResult(text, is_error=example.is_error, simulation=SimulationMeta(details=details),
                                observation=render_error(text, False) if example.is_error else text)

    def failure(self, call: Call, instruction: str, read: Callable[[str], str | None]) -> SimulationResult | None:
        """A failure the model writes for CALL: decoded as {"error": ...} with INSTRUCTION after the call (in
        this prompt only, never in the world's history) and READ into the tool's error text; None when no
        attempt gave one. The result is an isError that the world's history keeps."""
        started = time.perf_counter()
        messages, dropped = self.fit_to_context(call)
        messages[-1] = ChatMessage(messages[-1].role, f"{messages[-1].content}\n\n{instruction}")
        # Short enough to finish within max_tokens (about three characters a token).
        length = max(16, min(self.options.max_string * 2, 3 * self.options.max_tokens))
        spent, message = 0, None
        for number in range(self.options.attempts):
            generation = self.engine.generate(self._failure_request(call, messages, length, number))
            spent += generation.completion_tokens
            message = None if generation.finish_reason == "cancelled" else read(extract_observation(generation.text))
            if message is not None or generation.finish_reason == "cancelled":
                break
        if message is None:
            return None
        meta = SimulationMeta(simulated_error=True, details={
            "dropped_turns": dropped, "prompt_tokens": generation.prompt_tokens, "completion_tokens": spent,
            "attempts": number + 1, "model_ms": round((time.perf_counter() - started) * 1000, 1)})
        return SimulationResult(message, is_error=True, simulation=meta,
                                observation=render_error(message, call.tool.output_schema is not None))

    def _failure_request(self, call: Call, messages: list[ChatMessage], length: int,
                         number: int) -> GenerationRequest:
        opts = self.options
        return GenerationRequest(
            messages=messages, max_tokens=opts.max_tokens, json_schema=error_schema(length),
            schema_key=f"mcp-sim/error:{length}",
            temperature=opts.temperature + 0.25 * number, top_p=opts.top_p, top_k=opts.top_k,
            repeat_penalty=opts.repeat_penalty, seed=None if call.seed is None else call.seed + number,
            cache_key=f"{call.world.name}|{call.source}", think=opts.think, think_budget=opts.think_budget,
            cancel=call.cancel)

    def _result(self, tool: ToolSpec, attempt: _Attempt, details: dict[str, Any]) -> SimulationResult:
        if attempt.problem is not None:
            return SimulationResult(self._failure_text(tool, attempt), is_error=True,
                                    simulation=SimulationMeta(stage="output", details=details))
        if attempt.tool_error:
            return SimulationResult(attempt.text, is_error=True,
                                    simulation=SimulationMeta(simulated_error=True, details=details),
                                    observation=render_error(attempt.text, tool.output_schema is not None))
        return SimulationResult(attempt.text, attempt.structured, simulation=SimulationMeta(details=details),
                                observation=attempt.text)

    def _failure_text(self, tool: ToolSpec, attempt: _Attempt) -> str:
        if attempt.generation.finish_reason == "cancelled":
            return f"The simulation of '{tool.name}' was cancelled."
        if tool.output_schema is None:
            return (f"The simulation of '{tool.name}' gave no usable answer after {self.options.attempts} "
                    f"attempt(s): {attempt.problem}. Nothing was executed; try again, or use a larger model.")
        return (f"The simulation of '{tool.name}' did not fit the tool's outputSchema after "
                f"{self.options.attempts} attempt(s): {attempt.problem}. Nothing was executed; "
                "try again, raise --max-tokens, or use a larger model.")

    def _attempt(self, call: Call, messages: list[ChatMessage], number: int,
                 on_token: Callable[[int], None] | None) -> _Attempt:
        tool, world, source = call.tool, call.world, call.source
        opts = self.options
        schema, key = self.grammar_schema(tool) if tool.output_schema is not None else (None, None)
        # The live state and the tool's rules fix these values (the state wins where both speak): the
        # grammar admits only them, the model writes the rest.
        pins = {**call.rule_pins, **(call.state.pins if call.state is not None else {})}
        if schema is not None and pins:
            schema = pin_schema(schema, pins)
            key = f"{key}:pinned:{hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]}"
        request = GenerationRequest(
            messages=messages, max_tokens=opts.max_tokens, json_schema=schema, schema_key=key,
            # Each retry samples differently: a new seed and a little more temperature.
            temperature=opts.temperature + 0.25 * number, top_p=opts.top_p, top_k=opts.top_k,
            repeat_penalty=opts.repeat_penalty, seed=None if call.seed is None else call.seed + number,
            on_token=on_token, cache_key=f"{world.name}|{source}", think=opts.think, think_budget=opts.think_budget,
            # A fork's prompts extend its origin's: the origin's saved model state is a prefix of them.
            related_cache_keys=[f"{world.forked_from}|{source}"] if world.forked_from else [])
        request = replace(request, cancel=call.cancel)
        generation = self.engine.generate(request)
        text = extract_observation(generation.text)
        if generation.finish_reason == "cancelled":
            return _Attempt(None, text, "cancelled", generation)
        if tool.output_schema is None:
            problem = None if text else "the model returned an empty answer"
            message = parse_error(text, structured=False) if opts.simulate_errors else None
            if message is not None:
                return _Attempt(None, message, None, generation, tool_error=True)
            echo = (echo_of(text, tool) or borrowed_from(text, call.arguments, tool.examples, _other_answers(call))
                    if problem is None else None)
            return _Attempt(None, text, echo or problem, generation, echo=echo is not None)
        return self._check_structured(tool.output_schema, text, generation, pins)

    def _check_structured(self, schema: dict[str, Any], text: str, generation: Generation,
                          pins: Pins | None = None) -> _Attempt:
        if generation.finish_reason == "length":
            return _Attempt(None, text, f"the answer was cut off at {generation.completion_tokens} tokens",
                            generation)
        try:
            value = json.loads(text, strict=False)  # the grammar lets raw newlines into strings
        except json.JSONDecodeError as exc:
            return _Attempt(None, text, f"the answer is not JSON ({exc.msg})", generation)
        if not isinstance(value, dict):
            return _Attempt(None, text, "the answer is not a JSON object", generation)
        if pins and parse_error(value, structured=True) is None:
            # Also where the engine enforced no grammar (or only part of it): the state's values win.
            value = apply_pins(value, pins)
        problem = validation_error(value, schema)
        if problem is not None and self.options.simulate_errors:
            message = parse_error(value, structured=True)
            if message is not None:
                return _Attempt(None, message, None, generation, tool_error=True)
        canonical = json.dumps(value, ensure_ascii=False)
        return _Attempt(value if problem is None else None, canonical, problem, generation)

    def grammar_schema(self, tool: ToolSpec) -> tuple[dict[str, Any], str]:
        cached = self._grammar_schemas.get(tool.name)
        if cached is None:
            assert tool.output_schema is not None
            schema = prepare_for_grammar(tool.output_schema, self.options.max_string, self.options.max_items)
            if self.options.simulate_errors:
                schema = {"anyOf": [schema, error_schema(self.options.max_string * 2)]}
            digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]
            cached = self._grammar_schemas[tool.name] = (schema, f"{tool.name}:{digest}")
        return cached

    def fit_to_context(self, call: Call) -> tuple[list[ChatMessage], int]:
        """The prompt for this call and how many of the oldest turns had to be left out of it so that it fits
        the context, and holds at most `history_tokens` of history where that is set (never the system prompt).

        Once turns must go, enough go to free `drop_fraction` of the room the history may fill: the calls
        that follow then extend this prompt rather than each shifting the history by one turn, which would
        make the engine re-read (or shift) the whole history on every call."""
        system, history, world = call.system, list(call.history), call.world
        action = prompt_action(call.tool, call.action)  # with its tool's definition when the spec is indexed
        fits = self.engine.context_size - self.options.max_tokens - self._think_budget()
        style = self.options.prompt_style
        # The records this call touches, for a text tool: its answer has no grammar to pin them. A tool with an
        # outputSchema gets them pinned instead, and no note: a note lives in this prompt only, so the next
        # call's prompt would share less of this one's (its observation re-read on every call).
        note = call.state.note if call.state is not None and call.tool.output_schema is None else None
        # The real answers nearest to this call that the system prompt leaves out (core.demonstrations).
        examples = nearest_demonstrations(call.tool, call.arguments, world.scenario)
        note = "\n\n".join(filter(None, [examples, note])) or None

        def compose(turns: list[Turn]) -> list[ChatMessage]:
            return _with_note(build_messages(system, turns, action, style), note)

        messages = compose(history)
        size = self.engine.count_tokens(messages)
        window = self.options.history_tokens
        bare = self.engine.count_tokens(compose([])) if history and window else None
        limit = fits if bare is None else min(fits, bare + window)
        if not history or size <= limit:
            return messages, 0
        room = limit - (bare if bare is not None else self.engine.count_tokens(compose([])))
        target = limit - int(max(room, 0) * self.drop_fraction)
        dropped = 0
        while history and size > target:
            history.pop(0)
            dropped += 1
            messages = compose(history)
            size = self.engine.count_tokens(messages)
        self.worlds.leave_out_oldest(world, call.source, dropped)
        if limit < fits:
            logger.info("world %s: left the %d oldest turn(s) of %s out of the prompt, which holds %d tokens of "
                        "history (--history-tokens)", world.name, dropped, call.source, window)
        else:
            logger.warning("world %s: left the %d oldest turn(s) of %s out of the prompt to fit the %d-token "
                           "context", world.name, dropped, call.source, self.engine.context_size)
        return messages, dropped

    def _think_budget(self) -> int:
        return self.options.think_budget if self.options.think else 0


def _with_note(messages: list[ChatMessage], note: str | None) -> list[ChatMessage]:
    """The records this call touches, after the call in this prompt only (the history keeps the bare call,
    so the prompts of later calls still extend this one's)."""
    if not note:
        return messages
    last = messages[-1]
    return [*messages[:-1], ChatMessage(last.role, f"{last.content}\n\n{note}")]


def _other_answers(call: Call) -> list[tuple[str, str, dict[str, Any]]]:
    """(tool, answer, arguments) of the other tools of CALL's file: their examples, and their answers in
    this session."""
    tool = call.tool
    siblings = tool.spec_set.tools if tool.spec_set is not None else []
    found = [(other.name, str(example.result), example.arguments) for other in siblings if other.name != tool.name
             for example in other.examples if not example.is_error]
    for turn in call.history:
        try:
            action = json.loads(turn.action)
            name, arguments = action["name"], action.get("arguments") or {}
        except (ValueError, KeyError, TypeError):
            continue
        if name != tool.name and isinstance(arguments, dict):
            found.append((str(name), turn.observation, arguments))
    return found
