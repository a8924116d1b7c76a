"""Rewrite an output schema into the form a decoding grammar can enforce without letting a model loop.

The advertised schema stays exactly as written; only the copy used to build the grammar changes:
- local `$ref`s are inlined (the converter cannot take a root `$ref`, and inlining avoids surprises);
- a type list such as ["object", "null"] becomes `anyOf` branches (the converter drops `properties`
  under a type list and emits a generic object);
- every unbounded string gets a maxLength and every unbounded array a maxItems, since small models at
  low temperature fill them until max_tokens runs out;
- objects with declared properties get additionalProperties: false, so the grammar cannot wander
  into invented keys forever.
"""

from __future__ import annotations

import copy
from typing import Any

from mcp_sim import defaults

MAX_REF_DEPTH = 8
# Formats the converter has its own bounded grammar for.
GRAMMAR_FORMATS = {"date", "time", "date-time", "uuid"}
# Formats it ignores, as patterns it can enforce: plain, valid instances of each (small models otherwise
# write placeholders such as "<EMAIL>", which the validator then rejects on every retry).
FORMAT_PATTERNS = {
    # "[.]", not "\.": the converter copies the escape into a literal llama.cpp's grammar parser rejects.
    "email": r"^[a-z][a-z0-9._-]{0,23}@[a-z][a-z0-9-]{0,15}[.][a-z]{2,6}$",
    "hostname": r"^[a-z][a-z0-9-]{0,15}([.][a-z][a-z0-9-]{0,15}){0,3}$",
    "ipv4": r"^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])([.](25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$",
    "uri": r"^https://[a-z][a-z0-9-]{0,15}([.][a-z][a-z0-9-]{0,15}){1,3}(/[A-Za-z0-9._-]{1,20}){0,4}$",
}


def prepare_for_grammar(schema: dict[str, Any], max_string: int = defaults.MAX_STRING,
                        max_items: int = defaults.MAX_ITEMS) -> dict[str, Any]:
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    return _prepare(copy.deepcopy(schema), defs, max_string, max_items, depth=0, root=True)


def _prepare(node: Any, defs: dict[str, Any], max_string: int, max_items: int, depth: int,
             root: bool = False) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        node = _inline_ref(node, defs, depth)
        depth += 1
    if not root:
        node.pop("$defs", None)
        node.pop("definitions", None)
    else:
        node = {k: v for k, v in node.items() if k not in ("$defs", "definitions", "$schema", "$id")}
    types = node.get("type")
    if isinstance(types, list):
        return _split_type_list(node, types, defs, max_string, max_items, depth)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            node[key] = [_prepare(branch, defs, max_string, max_items, depth) for branch in node[key]]
    if isinstance(node.get("properties"), dict):
        node["properties"] = {name: _prepare(sub, defs, max_string, max_items, depth)
                              for name, sub in node["properties"].items()}
        node.setdefault("additionalProperties", False)
    if isinstance(node.get("items"), dict):
        node["items"] = _prepare(node["items"], defs, max_string, max_items, depth)
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _prepare(node["additionalProperties"], defs, max_string, max_items, depth)
    _bound(node, max_string, max_items)
    return node


def _inline_ref(node: dict[str, Any], defs: dict[str, Any], depth: int) -> dict[str, Any]:
    ref = node["$ref"]
    name = ref.rsplit("/", 1)[-1]
    if depth >= MAX_REF_DEPTH or not ref.startswith(("#/$defs/", "#/definitions/")) or name not in defs:
        # A recursive or external reference: give the model a small free-form object rather than loop.
        return {"type": "object"}
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    return {**copy.deepcopy(defs[name]), **siblings}


def _split_type_list(node: dict[str, Any], types: list[Any], defs: dict[str, Any], max_string: int,
                     max_items: int, depth: int) -> dict[str, Any]:
    branches = []
    for type_name in types:
        branch = {k: v for k, v in node.items() if k not in ("type", "description", "title", "default")}
        branch["type"] = type_name
        if type_name == "null":
            branch = {"type": "null"}
        branches.append(_prepare(branch, defs, max_string, max_items, depth))
    result: dict[str, Any] = {"anyOf": branches}
    if "description" in node:
        result["description"] = node["description"]
    return result


def _bound(node: dict[str, Any], max_string: int, max_items: int) -> None:
    kind = node.get("type")
    if kind == "string" and not {"enum", "const", "pattern"} & node.keys():
        string_format = node.get("format")
        if string_format in FORMAT_PATTERNS:
            node["pattern"] = FORMAT_PATTERNS[node.pop("format")]
            node.pop("maxLength", None)
            node.pop("minLength", None)
        elif string_format not in GRAMMAR_FORMATS:
            node["maxLength"] = min(node.get("maxLength", max_string), max_string)
            node.pop("format", None)  # formats the grammar cannot express are checked after decoding
    if kind == "array":
        node["maxItems"] = min(node.get("maxItems", max_items), max(max_items, node.get("minItems", 0)))
    if kind == "object" and "properties" not in node and "additionalProperties" not in node:
        # A free-form object: allow a few string values rather than unbounded nesting.
        node["additionalProperties"] = {"type": "string", "maxLength": max_string}
        node["maxProperties"] = max_items
