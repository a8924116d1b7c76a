"""Templates in fixture results: `{{arguments.NAME}}`, `{{client.KIND...}}`, `{{now}}` and `{{uuid}}`, filled per call.

A small regex substitution rather than a template engine: three names need no expression language,
nothing has to be sandboxed, unknown names are found at load with a pointer, and a string that is one
whole template keeps the argument's JSON type ("{{arguments.limit}}" fills the number 10, not "10"),
so filled results still fit an outputSchema. Inside longer text a value is written as text (strings as
they are, anything else as JSON). An argument the call lacks fills null, or nothing inside text.
`{{uuid}}` is one id per call (the same wherever it appears in a result), derived from the seed, the
world and the call number, so a rehearsal run twice gets the same ids. `{{client.elicitation.action}}`,
`{{client.elicitation.content}}`, `{{client.sampling.text}}` and `{{client.roots}}` are what the client
answered to the requests the tool sent it during the call (mcp_sim.core.interactions); absent, they fill null.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid as uuid_module
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mcp_sim.xsim.canonical import canonical_json

TEMPLATE_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
ARGUMENT_RE = re.compile(r"arguments((?:\.[^.\s]+)+)")
CLIENT_RE = re.compile(r"client((?:\.[^.\s]+)+)")
KNOWN = ("{{arguments.NAME}} (dotted paths reach inside), {{client.elicitation.action}} and the like, {{now}} "
         "or {{uuid}}")

JsonPath = tuple[str | int, ...]


@dataclass(frozen=True)
class TemplateContext:
    arguments: dict[str, Any]
    now: str  # ISO 8601 with a UTC offset
    uuid: str
    # What the client answered to this call's server-initiated requests (elicitation, sampling, roots).
    client: dict[str, Any] = field(default_factory=dict)


def fill(value: Any, context: TemplateContext) -> Any:
    """VALUE with every template in its strings filled; a whole-template string takes the value's type."""
    if isinstance(value, str):
        whole = TEMPLATE_RE.fullmatch(value)
        return _lookup(whole.group(1), context) if whole else fill_text(value, context)
    if isinstance(value, list):
        return [fill(item, context) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, context) for key, item in value.items()}
    return value


def fill_text(text: str, context: TemplateContext) -> str:
    """TEXT with every template written in as text."""
    return TEMPLATE_RE.sub(lambda match: _as_text(_lookup(match.group(1), context)), text)


def template_problems(value: Any, argument_names: set[str] | None) -> list[tuple[str, str]]:
    """(JSON pointer, problem) for each unknown template; ARGUMENT_NAMES (when known) catches typos."""
    problems = []
    for path, text in _strings(value, ()):
        for match in TEMPLATE_RE.finditer(text):
            problem = _expression_problem(match.group(1), argument_names)
            if problem:
                problems.append((json_pointer(path), problem))
    return problems


def argument_paths(value: Any) -> list[JsonPath]:
    """Paths of the strings that hold an argument template: their content is only known per call."""
    return [path for path, text in _strings(value, ())
            if any(ARGUMENT_RE.fullmatch(m.group(1)) for m in TEMPLATE_RE.finditer(text))]


def seeded_uuid(seed: int | None, world: str, call_number: int) -> str:
    """A version-4 UUID fixed by (seed, world, call number); random when there is no seed."""
    if seed is None:
        return str(uuid_module.uuid4())
    digest = hashlib.sha256(canonical_json(["mcp-sim/fixture-uuid", seed, world, call_number]).encode()).digest()
    return str(uuid_module.UUID(bytes=digest[:16], version=4))


def _lookup(expression: str, context: TemplateContext) -> Any:
    if expression == "now":
        return context.now
    if expression == "uuid":
        return context.uuid
    match = ARGUMENT_RE.fullmatch(expression)
    value: Any = context.arguments
    if match is None:
        match = CLIENT_RE.fullmatch(expression)
        value = context.client
    if match is None:  # checked at load; left as written rather than failing a call
        return "{{" + expression + "}}"
    for segment in match.group(1)[1:].split("."):
        value = _step(value, segment)
    return value


def _step(value: Any, segment: str) -> Any:
    if isinstance(value, dict):
        return value.get(segment)
    if isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
        return value[int(segment)]
    return None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _expression_problem(expression: str, argument_names: set[str] | None) -> str | None:
    if expression in ("now", "uuid") or CLIENT_RE.fullmatch(expression):
        return None
    match = ARGUMENT_RE.fullmatch(expression)
    if match is None:
        return f"unknown template {{{{{expression}}}}}; use {KNOWN}"
    name = match.group(1)[1:].split(".")[0]
    if argument_names is not None and name not in argument_names:
        known = ", ".join(sorted(argument_names)) or "none"
        return f"template {{{{{expression}}}}} names no argument of the tool's inputSchema (arguments: {known})"
    return None


def _strings(value: Any, path: JsonPath) -> Iterator[tuple[JsonPath, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))


def json_pointer(path: Iterable[str | int]) -> str:
    """A JSON Pointer (RFC 6901) for a path of keys and indexes."""
    return "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in path)
