"""Learn that a text tool answers JSON (`x-sim.text_json`): when every successful recorded answer of a tool
without an outputSchema is one text block holding a JSON object, its shape is inferred from those answers
(genson writes the JSON Schema) and its layout (indentation, separators) is the one that prints each of them
back byte for byte. The tool is then answered under that schema, with state effects and rules, and printed
in that layout (mcp_sim.core.text_json)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from genson import SchemaBuilder

from mcp_sim.core.text_json import TextJson, json_object, layout_of
from mcp_sim.rehearsal.traces import TraceRecord


def infer_text_json(records: Sequence[TraceRecord]) -> TextJson | None:
    """The text_json of one tool from its records, or None unless every successful answer is a JSON object
    in a single text block (and there is at least one)."""
    texts = []
    for record in records:
        if record.is_error or record.protocol_error is not None:
            continue
        content = record.result.get("content") or []
        if len(content) != 1 or content[0].get("type") != "text" or record.result.get("structuredContent"):
            return None
        texts.append(str(content[0].get("text", "")))
    objects = [json_object(text) for text in texts]
    if not objects or any(value is None for value in objects):
        return None
    builder = SchemaBuilder()
    for value in objects:
        builder.add_object(value)
    schema: dict[str, Any] = builder.to_schema()
    schema.pop("$schema", None)  # genson names draft 4's metaschema; the spec's schemas follow MCP's
    indent, separators = layout_of(texts)
    return TextJson(schema, indent, separators)


def learn_text_json(tools: dict[Any, dict[str, Any]], records: Sequence[TraceRecord]) -> dict[str, str]:
    """x-sim.text_json for each tool of TOOLS (spec mappings, changed in place) the records show answering
    JSON text; what was learned, per tool, in words. A declared text_json is kept as written."""
    by_tool: dict[Any, list[TraceRecord]] = {}
    for record in records:
        by_tool.setdefault(record.tool, []).append(record)
    learned = {}
    for name, tool in tools.items():
        sim = tool.get("x-sim") or {}
        if "outputSchema" in tool or "text_json" in sim or name not in by_tool:
            continue
        found = infer_text_json(by_tool[name])
        if found is not None:
            tool.setdefault("x-sim", {})["text_json"] = found.to_spec()
            layout = "one line" if found.indent is None else f"indent {found.indent}"
            learned[str(name)] = f"JSON text ({layout}; fields {', '.join(found.schema.get('properties', {}))})"
    return learned
