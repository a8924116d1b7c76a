"""Field rules: the fields of a tool's answer that follow from its arguments and the world's history.

A real tool computes part of its answer: it copies an argument, counts the calls made so far, adds a step
to its previous answer, collects the values an argument took. A world model copies numbers; it does not
count (sequential thinking's `thoughtHistoryLength` stays at 2). A rule says how one such field is made;
`learn` keeps the rules that reproduce every example of their tool in the traces (`learn_rules`), a spec
can declare or correct them (`x-sim.rules`), and each call gets the values they give pinned in the
grammar (`rule_pins`): the model writes the rest.

    x-sim:
      rules:
        thoughtNumber: {copy: thoughtNumber}   # the argument's value in this call
        status: {const: ok}                    # always the same value
        thoughtHistoryLength: {count: tool}    # this tool's answered calls in the world, this one included
        turn: {count: world}                   # every answered call of the spec file in the world
        version: {step: 1, start: 1}           # the tool's previous answer's value plus step; start first
        branches: {grows: branchId}            # the distinct values the argument took so far, in order

A field is a top-level name of the answer or a JSON pointer (`/meta/count`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_sim.state.layout import escape, properties
from mcp_sim.state.naming import singular, words
from mcp_sim.state.pins import Pins, fitting, get_pointer

KINDS = ("copy", "const", "count", "step", "grows")
COUNT_SCOPES = ("tool", "world")
# How many examples a rule needs before learn trusts it: a constant needs more, as two equal values are
# often chance ("status": "open" twice).
MIN_EXAMPLES = 2
MIN_CONSTANT_EXAMPLES = 3

_CODE = re.compile(r"[a-z]+(_[a-z]+)*")
_ABSENT = object()  # a rule with nothing to say about this call (its argument was not given)


@dataclass(frozen=True)
class Past:
    """One earlier call in the world: its tool, arguments and structured answer (None: it failed)."""

    tool: str
    arguments: dict[str, Any]
    answer: dict[str, Any] | None


@dataclass(frozen=True)
class FieldRule:
    pointer: str  # where the value goes in the answer
    kind: str  # one of KINDS
    argument: str | None = None  # copy, grows: the argument read
    value: Any = None  # const: the value; step: the first answer's value
    step: int | float = 0
    scope: str = "tool"  # count: whose calls are counted

    def to_spec(self) -> dict[str, Any]:
        """The rule as x-sim.rules writes it (under its field)."""
        if self.kind in ("copy", "grows"):
            return {self.kind: self.argument}
        if self.kind == "const":
            return {"const": self.value}
        if self.kind == "count":
            return {"count": self.scope}
        return {"step": self.step, "start": self.value}

    def describe(self) -> str:
        """One line for check: what the field is made of."""
        field = self.pointer.lstrip("/")
        return {
            "copy": f"{field} = argument {self.argument}",
            "const": f"{field} = {json.dumps(self.value, ensure_ascii=False)}",
            "count": f"{field} = calls of {'this tool' if self.scope == 'tool' else 'the world'} so far",
            "step": f"{field} = the previous answer's {field} + {self.step} (first {self.value})",
            "grows": f"{field} = the {self.argument} values given so far",
        }[self.kind]


def parse_rules(raw: Any, where: str, problems: list[str]) -> list[FieldRule]:
    """x-sim.rules (field -> rule) as FieldRules; what is wrong goes to PROBLEMS, saying what to write."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping of answer field to rule, e.g. "
                        "{thoughtHistoryLength: {count: tool}}")
        return []
    rules = []
    for field, spec in raw.items():
        place = f"{where}/{field}"
        pointer = field if str(field).startswith("/") else f"/{field}"
        kind = next(iter(spec)) if isinstance(spec, dict) and spec and next(iter(spec)) in KINDS else None
        if kind is None or (kind != "step" and len(spec) != 1) or (kind == "step" and set(spec) - {"step", "start"}):
            problems.append(f"{place}: must be one of {{copy: ARGUMENT}}, {{const: VALUE}}, {{count: tool|world}}, "
                            "{step: N, start: N}, {grows: ARGUMENT}")
            continue
        value = spec[kind]
        if kind in ("copy", "grows") and not isinstance(value, str):
            problems.append(f"{place}/{kind}: must name an argument")
        elif kind == "count" and value not in COUNT_SCOPES:
            problems.append(f"{place}/count: must be tool or world, got {value!r}")
        elif kind == "step" and not (_is_number(value) and _is_number(spec.get("start", 0))):
            problems.append(f"{place}: step and start must be numbers")
        elif kind in ("copy", "grows"):
            rules.append(FieldRule(pointer, kind, argument=value))
        elif kind == "const":
            rules.append(FieldRule(pointer, kind, value=value))
        elif kind == "count":
            rules.append(FieldRule(pointer, kind, scope=value))
        else:
            rules.append(FieldRule(pointer, kind, step=value, value=spec.get("start", 0)))
    return rules


def rules_to_spec(rules: Iterable[FieldRule]) -> dict[str, Any]:
    return {rule.pointer.lstrip("/") if rule.pointer.count("/") == 1 else rule.pointer: rule.to_spec()
            for rule in rules}


def rule_pins(rules: Sequence[FieldRule], tool: str, arguments: dict[str, Any], past: Sequence[Past],
              output_schema: dict[str, Any] | None = None) -> Pins:
    """The values RULES give this call of TOOL after the world's PAST calls, by JSON pointer; with
    OUTPUT_SCHEMA, only those it admits where they go."""
    pins: Pins = {}
    for rule in rules:
        value = compute(rule, tool, arguments, past)
        if value is not _ABSENT:
            pins[rule.pointer] = value
    return fitting(pins, output_schema) if output_schema is not None else pins


def compute(rule: FieldRule, tool: str, arguments: dict[str, Any], past: Sequence[Past]) -> Any:
    """RULE's value for this call, or _ABSENT when it has none (an argument that was not given)."""
    answered = [call for call in past if call.answer is not None and (rule.scope == "world" or call.tool == tool)]
    if rule.kind == "copy":
        return arguments.get(rule.argument or "", _ABSENT)
    if rule.kind == "const":
        return rule.value
    if rule.kind == "count":
        return len(answered) + 1
    if rule.kind == "step":
        earlier = [get_pointer(call.answer, rule.pointer) for call in answered]
        numbers = [value for value in earlier if _is_number(value)]
        return numbers[-1] + rule.step if numbers else rule.value
    collected: list[Any] = []  # grows
    for given in [*(call.arguments for call in answered), arguments]:
        value = given.get(rule.argument) if rule.argument else None
        if value is not None and value not in collected:
            collected.append(value)
    return collected


def learn_rules(tool: str, input_schema: dict[str, Any], output_schema: dict[str, Any],
                sessions: Sequence[Sequence[Past]]) -> list[FieldRule]:
    """The rules for TOOL's top-level answer fields that reproduce every one of its answers in SESSIONS
    (each the calls of one world, in order), the most specific first: a count or a step before a copy
    before a constant. A field no rule explains is left to the model."""
    examples = [call for session in sessions for call in session if call.tool == tool and call.answer is not None]
    if not examples:
        return []
    arguments = list(properties(input_schema))
    found = []
    for field, shape in properties(output_schema).items():
        pointer = f"/{escape(field)}"
        values = [get_pointer(call.answer, pointer) for call in examples]
        if any(value is None for value in values):
            continue  # a field some answers lack: no rule says when
        if len(examples) < MIN_EXAMPLES:  # one answer shows only what names the operation (a status code)
            if _names_operation(tool, values[0], examples):
                found.append(FieldRule(pointer, "const", value=values[0]))
            continue
        step = _first_step(tool, pointer, sessions)
        for rule in _candidates(pointer, field, shape, values, step, arguments, input_schema, examples):
            if all(_same(compute(rule, call.tool, call.arguments, before), get_pointer(call.answer, pointer))
                   for before, call in _replayed(tool, sessions)):
                found.append(rule)
                break
    return found


def _candidates(pointer: str, field: str, shape: Any, values: list[Any], step: Any, arguments: list[str],
                input_schema: dict[str, Any], examples: list[Past]) -> list[FieldRule]:
    varied = len({json.dumps(value, sort_keys=True) for value in values}) > 1
    numeric = all(_is_number(value) for value in values)
    given = [name for name in arguments if all(name in call.arguments for call in examples)]
    # The argument of the same name first; another only when the values vary (two equal flags agree by
    # chance), and after a count (thoughtHistoryLength follows thoughtNumber only while none is revised).
    candidates = [FieldRule(pointer, "copy", argument=name) for name in given if name == field]
    if numeric and varied:
        candidates += [FieldRule(pointer, "count", scope="tool"), FieldRule(pointer, "count", scope="world")]
    if isinstance(shape, dict) and shape.get("type") == "array":
        candidates += [FieldRule(pointer, "grows", argument=name)
                       for name in _related_arguments(field, shape, arguments, input_schema)]
    if varied:
        candidates += [FieldRule(pointer, "copy", argument=name) for name in given if name != field]
    if numeric and varied and _is_number(step) and step:
        candidates.append(FieldRule(pointer, "step", step=step, value=values[0]))
    if not varied and (len(values) >= MIN_CONSTANT_EXAMPLES or _names_operation(examples[0].tool, values[0], examples)):
        candidates.append(FieldRule(pointer, "const", value=values[0]))
    return candidates


def _names_operation(tool: str, value: Any, examples: list[Past]) -> bool:
    """VALUE is a code naming TOOL's own operation (`planned` of request_planning, `task_marked_done` of
    mark_task_done): a status the tool answers every time it succeeds, so one example shows it. A code is
    snake_case words, one sharing its first four letters with a word of the name, not an argument's value."""
    if not isinstance(value, str) or not _CODE.fullmatch(value):
        return False
    if any(value in call.arguments.values() for call in examples):
        return False
    stems = {word[:4] for word in words(tool) if len(word) >= 4}
    return any(part[:4] in stems for part in value.split("_") if len(part) >= 4)


def _related_arguments(field: str, shape: dict[str, Any], arguments: list[str],
                       input_schema: dict[str, Any]) -> list[str]:
    """The arguments whose values a list field FIELD may collect: their name holds the field's singular
    (branches <- branchId), those whose type is the items' type first."""
    stem = singular(field).lower()
    named = [name for name in arguments if stem and stem in name.lower()]
    items = shape.get("items")
    item_type = items.get("type") if isinstance(items, dict) else None
    kinds = properties(input_schema)
    return sorted(named, key=lambda name: kinds.get(name, {}).get("type") != item_type)


def _replayed(tool: str, sessions: Sequence[Sequence[Past]]) -> Iterable[tuple[list[Past], Past]]:
    """Each answered call of TOOL with the calls of its session before it."""
    for session in sessions:
        for index, call in enumerate(session):
            if call.tool == tool and call.answer is not None:
                yield list(session[:index]), call


def _first_step(tool: str, pointer: str, sessions: Sequence[Sequence[Past]]) -> Any:
    """How much the field grew between the first two answers of TOOL in one session (None: no session
    has two)."""
    for session in sessions:
        answers = [get_pointer(call.answer, pointer) for call in session if call.tool == tool and call.answer]
        if len(answers) >= 2 and _is_number(answers[0]) and _is_number(answers[1]):
            return answers[1] - answers[0]
    return None


def _same(computed: Any, real: Any) -> bool:
    return computed is not _ABSENT and json.dumps(computed, sort_keys=True) == json.dumps(real, sort_keys=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
