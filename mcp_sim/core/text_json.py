"""Text answers that are JSON (`x-sim.text_json`): a tool that declares no outputSchema but answers a JSON object
in one text block, as many servers do (`JSON.stringify(result, null, 2)`).

Such a tool is answered as if `schema` were its outputSchema (under the grammar, with state effects, rules and
pins), and its answer goes back as text only, printed in the layout of its real answers, so a client sees
what the real server sends: no structuredContent, the same indentation and separators. What tools/list
advertises stays exactly what the spec declares.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mcp_sim.base.result import SimulationResult
from mcp_sim.base.schemas import check_schema

TEXT_JSON_FIELDS = {"schema", "indent", "separators"}
# The layouts a server's JSON text is tried against, most common first: JavaScript's and Python's pretty and
# compact printers.
LAYOUTS: list[tuple[int | None, tuple[str, str]]] = [
    (2, (",", ": ")), (4, (",", ": ")), (1, (",", ": ")), (None, (",", ":")), (None, (", ", ": "))]


@dataclass(frozen=True)
class TextJson:
    schema: dict[str, Any]  # the answer's shape, as an outputSchema would give it
    indent: int | None = 2  # None: on one line
    separators: tuple[str, str] = (",", ": ")

    def render(self, value: Any) -> str:
        """VALUE as the real server prints it."""
        return json.dumps(value, indent=self.indent, separators=self.separators, ensure_ascii=False)

    def to_spec(self) -> dict[str, Any]:
        return {"schema": self.schema, "indent": self.indent, "separators": list(self.separators)}


def json_object(text: str) -> dict[str, Any] | None:
    """The JSON object TEXT holds, if it holds one and nothing else."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def layout_of(texts: Sequence[str]) -> tuple[int | None, tuple[str, str]]:
    """The layout that prints every one of TEXTS exactly as written; else the likeliest (pretty if any breaks
    a line)."""
    pairs = [(json_object(text), text) for text in texts]
    for indent, separators in LAYOUTS:
        if all(value is not None and text == json.dumps(value, indent=indent, separators=separators,
                                                        ensure_ascii=False) for value, text in pairs):
            return indent, separators
    return LAYOUTS[0] if any("\n" in text for text in texts) else LAYOUTS[3]


def parse_text_json(raw: Any, where: str, has_output_schema: bool, problems: list[str]) -> TextJson | None:
    """x-sim.text_json of one tool, its problems appended to PROBLEMS."""
    if raw is None:
        return None
    if has_output_schema:
        problems.append(f"{where}: the tool declares an outputSchema; text_json is for tools that answer JSON "
                        "as text without one")
        return None
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping with schema (and indent, separators)")
        return None
    unknown = sorted(set(raw) - TEXT_JSON_FIELDS)
    if unknown:
        problems.append(f"{where}: unknown field(s) {', '.join(unknown)} "
                        f"(allowed: {', '.join(sorted(TEXT_JSON_FIELDS))})")
    schema = raw.get("schema")
    if not isinstance(schema, dict) or not check_schema(schema, f"{where}/schema", problems, require_object=True):
        if not isinstance(schema, dict):
            problems.append(f"{where}/schema: must be a JSON Schema of an object")
        return None
    indent = raw.get("indent", 2)
    if indent is not None and (not isinstance(indent, int) or isinstance(indent, bool) or not 0 <= indent <= 8):
        problems.append(f"{where}/indent: must be a number of spaces (0-8) or null (one line), got {indent!r}")
        return None
    separators = raw.get("separators", [",", ": "] if indent is not None else [",", ":"])
    if not (isinstance(separators, list) and len(separators) == 2 and all(isinstance(s, str) for s in separators)):
        problems.append(f"{where}/separators: must be two strings (item, key), e.g. [\",\", \": \"]")
        return None
    return TextJson(schema, indent, (separators[0], separators[1]))


def as_printed(result: SimulationResult, text_json: TextJson | None) -> SimulationResult:
    """RESULT as a text_json tool's client gets it: the structured answer printed in the tool's layout, as text
    only. Everything before (state, the world's history, observers such as the cache) saw it structured."""
    if text_json is None or result.structured is None or result.is_error:
        return result
    return replace(result, text=text_json.render(result.structured), structured=None, content=None)
