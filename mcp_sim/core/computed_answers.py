"""Answers computed without the model: a structured answer whose every field the tool's rules give
(state.field_rules), and a text tool's answer in the fixed words its examples share around its arguments
("Echo: {message}", state.templates). What the rules read is the world's history of calls."""

from __future__ import annotations

import json

from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.core.prompt import Turn
from mcp_sim.core.specs import validation_error
from mcp_sim.state.book import StateBook
from mcp_sim.state.field_rules import Past
from mcp_sim.state.layout import properties
from mcp_sim.state.naming import writes
from mcp_sim.state.pins import apply_pins
from mcp_sim.state.templates import WriteTemplate, confirmation, write_template


def ruled_answer(call: Call) -> SimulationResult | None:
    """The answer when the tool's rules give every field its outputSchema has (with the state's pins on
    top), and it fits: nothing is left for the model to write."""
    schema = call.tool.output_schema
    if not call.rule_pins or schema is None:
        return None
    pins = {**call.rule_pins, **(call.state.pins if call.state is not None else {})}
    answer = apply_pins({}, pins)
    if set(properties(schema)) - set(answer) or validation_error(answer, schema) is not None:
        return None
    text = json.dumps(answer, ensure_ascii=False)
    return SimulationResult(text, answer, observation=text)


def past_calls(turns: list[Turn]) -> list[Past]:
    """The world's earlier calls of one spec file, as the rules read them: the tool, its arguments and its
    structured answer (None for a failure or a text answer)."""
    past = []
    for turn in turns:
        try:
            action = json.loads(turn.action)
        except json.JSONDecodeError:
            continue
        try:
            answer = json.loads(turn.observation)
        except json.JSONDecodeError:
            answer = None
        failed = not isinstance(answer, dict) or set(answer) == {"error"}
        past.append(Past(str(action.get("name")), action.get("arguments") or {}, None if failed else answer))
    return past



class TextTemplates:
    """Per text tool without a state effect, the template its success examples share (None: they share
    none), or, for a write, the confirmation they all give alike. A tool with a state effect gets its
    templates from the state (state.book)."""

    def __init__(self, state: StateBook):
        self._state = state
        self._found: dict[str, WriteTemplate | None] = {}

    def answer(self, call: Call) -> SimulationResult | None:
        tool = call.tool
        if tool.output_schema is not None or self._state.effect(tool.name) is not None:
            return None
        if tool.name not in self._found:
            successes = [(e.arguments, e.result) for e in tool.examples if not e.is_error]
            template = write_template(successes) if successes else None
            if template is None and writes(tool.name, tool.annotations):
                template = confirmation(result for _, result in successes)
            self._found[tool.name] = template
        template = self._found[tool.name]
        filled = template.fill(call.arguments) if template is not None else None
        if not isinstance(filled, str):
            return None
        return SimulationResult(filled, observation=filled)
