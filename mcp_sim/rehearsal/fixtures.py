"""Fixtures: answers pinned in the spec, `x-sim.fixtures: [{match, result, isError?}]`, checked at load.

`match` is either the exact arguments (equal as canonical JSON), or `{schema: {...}}`, a JSON Schema the
arguments must satisfy (a match whose only key is `schema` is always a schema match). The most specific
fixture answers: an exact match before any schema match; among schema matches, the one that constrains
more arguments (counted as the names in its top-level `properties`, other than `{}`/`true` ones, and in
`required`); equal counts go in file order. Results may hold templates (see templates.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Protocol

import jsonschema
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from mcp_sim.rehearsal.canonical import canonical_json
from mcp_sim.rehearsal.templates import (
    TemplateContext,
    argument_paths,
    fill,
    fill_text,
    json_pointer,
    seeded_uuid,
    template_problems,
)

FIXTURE_FIELDS = {"match", "result", "isError"}
# The stand-ins for a dry fill at load; argument templates are left to the call's own check.
DRY_NOW = "2000-01-01T00:00:00+00:00"
DRY_UUID = seeded_uuid(0, "", 0)


class ToolLike(Protocol):
    """What parsing fixtures needs of a tool; specs.ToolSpec is one."""

    @property
    def name(self) -> str: ...
    @property
    def input_schema(self) -> Any: ...
    @property
    def output_schema(self) -> Any: ...


@dataclass(frozen=True)
class ToolShape:
    """A ToolLike for a tool still being parsed."""

    name: str
    input_schema: Any
    output_schema: Any


@dataclass(frozen=True)
class Fixture:
    tool: str
    where: str  # "FILE#/tools/N (tool 'x')/x-sim/fixtures/M": for messages and _meta
    index: int  # file order, the last tie-breaker
    result: Any
    is_error: bool = False
    arguments: dict[str, Any] | None = None  # an exact match
    schema: dict[str, Any] | None = None  # a schema match
    specificity: int = 0
    # Set when the result holds argument templates and the tool has an outputSchema: checked per call.
    output_check: jsonschema.protocols.Validator | None = field(default=None, compare=False, repr=False)
    matcher: jsonschema.protocols.Validator | None = field(default=None, compare=False, repr=False)

    def matches(self, arguments: dict[str, Any]) -> bool:
        if self.arguments is not None:
            return canonical_json(arguments) == canonical_json(self.arguments)
        return self.matcher is not None and self.matcher.is_valid(arguments)

    @property
    def rank(self) -> tuple[int, int, int]:
        """Sorts the most specific first."""
        return (0 if self.arguments is not None else 1, -self.specificity, self.index)


@dataclass(frozen=True)
class FixtureAnswer:
    """A filled fixture result, ready to send."""

    text: str
    structured: dict[str, Any] | None
    is_error: bool
    fixture: Fixture


def parse_fixtures(raw: Any, tool: ToolLike, where: str) -> tuple[list[Fixture], list[str]]:
    """The fixtures of one tool and every problem found, as "WHERE/N/field: message" lines."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"{where}: must be a list of {{match, result, isError?}}"]
    fixtures: list[Fixture] = []
    problems: list[str] = []
    for index, item in enumerate(raw):
        fixture = _parse_one(item, tool, f"{where}/{index}", index, problems)
        if fixture is not None:
            _check_duplicate(fixture, fixtures, problems)
            fixtures.append(fixture)
    return fixtures, problems


def _parse_one(item: Any, tool: ToolLike, where: str, index: int, problems: list[str]) -> Fixture | None:
    before = len(problems)
    if not isinstance(item, dict) or "match" not in item or "result" not in item:
        problems.append(f"{where}: each fixture needs 'match' (arguments or {{schema: ...}}) and 'result'")
        return None
    for key in sorted(set(item) - FIXTURE_FIELDS):
        problems.append(f"{where}/{key}: unknown field (allowed: {', '.join(sorted(FIXTURE_FIELDS))})")
    is_error = item.get("isError", False)
    if not isinstance(is_error, bool):
        problems.append(f"{where}/isError: must be true or false, got {is_error!r}")
    fixture = _parse_match(item["match"], tool, where, index, problems)
    if fixture is None or len(problems) > before:
        return None
    fixture = _with_result(fixture, item["result"], bool(is_error), tool, where, problems)
    return fixture if len(problems) == before else None


def _parse_match(match: Any, tool: ToolLike, where: str, index: int, problems: list[str]) -> Fixture | None:
    if not isinstance(match, dict):
        problems.append(f"{where}/match: must be the exact arguments (a mapping) or {{schema: {{...}}}}")
        return None
    if set(match) == {"schema"} and isinstance(match["schema"], dict):
        schema = match["schema"]
        found = _schema_problems(schema)
        problems.extend(f"{where}/match/schema{pointer}: invalid JSON Schema: {m}" for pointer, m in found)
        return None if found else Fixture(tool.name, where, index, None, schema=schema,
                                          specificity=specificity(schema), matcher=_validator(schema))
    if isinstance(tool.input_schema, dict):
        problem = _instance_problem(match, _validator(tool.input_schema))
        if problem:
            problems.append(f"{where}/match: the arguments do not fit the tool's inputSchema: {problem}")
    return Fixture(tool.name, where, index, None, arguments=match)


def _with_result(fixture: Fixture, result: Any, is_error: bool, tool: ToolLike, where: str,
                 problems: list[str]) -> Fixture:
    unknown = template_problems(result, _argument_names(tool.input_schema))
    problems.extend(f"{where}/result{pointer}: {message}" for pointer, message in unknown)
    if unknown:  # a dry fill would only repeat them as schema errors
        return fixture
    structured = isinstance(tool.output_schema, dict) and not is_error
    if not structured:
        if not isinstance(result, str):
            kind = "an error fixture's result must be its error text" if is_error else \
                "this tool has no outputSchema, so its result must be text"
            problems.append(f"{where}/result: {kind}")
        return replace(fixture, result=result, is_error=is_error)
    if not isinstance(result, dict):
        problems.append(f"{where}/result: must be an object that fits the tool's outputSchema")
        return fixture
    return _checked_result(fixture, result, tool.output_schema, where, problems)


def _checked_result(fixture: Fixture, result: dict[str, Any], output_schema: dict[str, Any], where: str,
                    problems: list[str]) -> Fixture:
    """Dry-fill the result and check it; parts filled from arguments wait for each call's own check."""
    validator = _validator(output_schema)
    deferred = argument_paths(result) if fixture.arguments is None else []
    filled = fill(result, TemplateContext(fixture.arguments or {}, DRY_NOW, DRY_UUID))
    for pointer, message in _errors(filled, validator, skip=deferred):
        problems.append(f"{where}/result{pointer}: does not fit the tool's outputSchema: {message}")
    return replace(fixture, result=result, output_check=validator if deferred else None)


def specificity(schema: dict[str, Any]) -> int:
    """How many arguments a match schema constrains: named in `properties` (not as {}/true) or `required`."""
    properties = schema.get("properties")
    named = {name for name, sub in properties.items() if sub not in ({}, True)} \
        if isinstance(properties, dict) else set()
    required = schema.get("required")
    if isinstance(required, list):
        named |= {name for name in required if isinstance(name, str)}
    return len(named)


class FixtureSet:
    """Every tool's fixtures, most specific first; answers a call with the first that matches."""

    def __init__(self, fixtures: Iterable[Fixture], clock: Callable[[], datetime] | None = None):
        self._by_tool: dict[str, list[Fixture]] = {}
        for fixture in fixtures:
            self._by_tool.setdefault(fixture.tool, []).append(fixture)
        for listed in self._by_tool.values():
            listed.sort(key=lambda f: f.rank)
        self._clock = clock or (lambda: datetime.now(timezone.utc))

    def __len__(self) -> int:
        return sum(len(listed) for listed in self._by_tool.values())

    def find(self, tool: str, arguments: dict[str, Any]) -> Fixture | None:
        """The fixture that answers this call, if any."""
        return next((f for f in self._by_tool.get(tool, ()) if f.matches(arguments)), None)

    def answer(self, tool: str, arguments: dict[str, Any], *, world: str, call_number: int,
               seed: int | None) -> FixtureAnswer | None:
        """The filled result of the most specific matching fixture, or None when none matches."""
        fixture = self.find(tool, arguments)
        if fixture is None:
            return None
        context = TemplateContext(arguments, self._clock().isoformat(timespec="seconds"),
                                  seeded_uuid(seed, world, call_number))
        if isinstance(fixture.result, str):  # a text tool's result or an error message
            return FixtureAnswer(fill_text(fixture.result, context), None, fixture.is_error, fixture)
        return _structured_answer(fixture, context)


def _structured_answer(fixture: Fixture, context: TemplateContext) -> FixtureAnswer:
    structured = fill(fixture.result, context)
    if fixture.output_check is not None:
        problem = _instance_problem(structured, fixture.output_check)
        if problem:
            text = (f"The fixture {fixture.where}, filled with these arguments, does not fit the tool's "
                    f"outputSchema: {problem}. Fix the fixture's result or narrow its match.")
            return FixtureAnswer(text, None, True, fixture)
    return FixtureAnswer(json.dumps(structured, ensure_ascii=False), structured, False, fixture)


def _check_duplicate(fixture: Fixture, earlier: list[Fixture], problems: list[str]) -> None:
    if fixture.arguments is None:
        return
    for other in earlier:
        if other.arguments is not None and other.matches(fixture.arguments):
            problems.append(f"{fixture.where}/match: the same arguments as fixture {other.index}, "
                            "which answers first: remove one")


def _argument_names(input_schema: Any) -> set[str] | None:
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    return set(properties) if isinstance(properties, dict) and properties else None


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _schema_problems(schema: dict[str, Any]) -> list[tuple[str, str]]:
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    return [(json_pointer(error.absolute_path), error.message)
            for error in sorted(cls(cls.META_SCHEMA).iter_errors(schema), key=str)]


def _instance_problem(instance: Any, validator: jsonschema.protocols.Validator) -> str | None:
    found = _errors(instance, validator, skip=[])
    return "; ".join(f"at {pointer or '/'}: {message}" for pointer, message in found[:3]) or None


def _errors(instance: Any, validator: jsonschema.protocols.Validator,
            skip: list[tuple[str | int, ...]]) -> list[tuple[str, str]]:
    """(pointer, message) per validation error, leaving out those inside a SKIP path."""
    try:
        errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    except (jsonschema.exceptions.SchemaError, Unresolvable) as exc:  # the spec loader reports the schema
        return [("", f"the schema cannot be used: {exc}")]
    return [(json_pointer(e.absolute_path), e.message) for e in errors
            if not any(tuple(e.absolute_path)[:len(path)] == path for path in skip)]


