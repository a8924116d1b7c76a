"""Rewrite an output schema into the form a decoding grammar can enforce without letting a model loop.

The advertised schema stays exactly as written; only the copy used to build the grammar changes:
- local `$ref`s are inlined (the converter cannot take a root `$ref`, and inlining avoids surprises);
- a type list such as ["object", "null"] becomes `anyOf` branches (the converter drops `properties`
  under a type list and emits a generic object);
- every unbounded string gets a maxLength and every unbounded array a maxItems, since small models at
  low temperature fill them until max_tokens runs out;
- `allOf` is merged into one schema (properties and required lists joined; a `oneOf`/`anyOf` member or
  sibling is distributed over the merged branches), so no member is ever closed on its own: closing each
  member of allOf [NewItem, {id}] with additionalProperties: false would make the schema unsatisfiable,
  and llama.cpp's converter ignores `required` inside allOf members and properties beside oneOf;
- objects with declared properties get additionalProperties: false, so the grammar cannot wander
  into invented keys forever.
"""

from __future__ import annotations

import copy
from typing import Any

from mcp_sim.base import defaults

MAX_REF_DEPTH = 8
# The most branches distributing allOf/oneOf may produce; past it the alternatives are left out of the grammar
# (the answer is still validated against the schema as written).
MAX_BRANCHES = 16
COMPOSITIONS = ("anyOf", "oneOf")
# Keys that give an untyped schema a shape the converter understands.
SHAPE_KEYS = {"anyOf", "oneOf", "allOf", "enum", "const", "properties", "additionalProperties", "items",
              "prefixItems", "pattern", "$ref"}
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
    prepared: dict[str, Any] = _prepare(copy.deepcopy(schema), defs, max_string, max_items, depth=0, root=True)
    return prepared


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
    if "allOf" in node or (_composition(node) and _object_keys(node)):
        return _prepare(_flatten(node, defs, depth), defs, max_string, max_items, depth + 1)
    types = node.get("type")
    if isinstance(types, list):
        return _split_type_list(node, types, defs, max_string, max_items, depth)
    for key in COMPOSITIONS:
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


def _composition(node: dict[str, Any]) -> str | None:
    return next((key for key in COMPOSITIONS if isinstance(node.get(key), list)), None)


def _object_keys(node: dict[str, Any]) -> bool:
    """Whether NODE constrains an object beside its anyOf/oneOf (the converter would drop those constraints)."""
    return bool({"properties", "required"} & node.keys())


def _flatten(node: dict[str, Any], defs: dict[str, Any], depth: int) -> dict[str, Any]:
    """NODE without allOf, and without properties beside an anyOf/oneOf: one merged schema, or a oneOf of
    merged branches when a member (or NODE) offers alternatives."""
    base = {k: v for k, v in node.items() if k != "allOf" and k not in COMPOSITIONS}
    variants: list[dict[str, Any]] = [base]
    members = [node, *node.get("allOf", [])]
    for member in members:
        if member is not node:
            member = _resolve(member, defs, depth)
            if "allOf" in member:
                member = _flatten(member, defs, depth + 1)
            variants = [_merge(variant, _without_compositions(member)) for variant in variants]
        key = _composition(member)
        if key is None:
            continue
        branches = [_resolve(branch, defs, depth) for branch in member[key]]
        if len(variants) * len(branches) > MAX_BRANCHES:
            continue  # too many combinations for one grammar: the alternatives are checked after decoding
        variants = [_merge(variant, branch) for variant in variants for branch in branches]
    # anyOf: the grammar offers each merged branch; exclusivity (oneOf) is checked after decoding.
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _resolve(node: Any, defs: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {}
    return _inline_ref(node, defs, depth) if "$ref" in node else node


def _without_compositions(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k not in COMPOSITIONS}


def _merge(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Both schemas at once, as far as a grammar needs: properties and required joined, the rest kept."""
    merged = {**second, **first}
    # The first schema's properties keep their place: the grammar writes keys in declared order.
    properties = {**first.get("properties", {}),
                  **{k: v for k, v in second.get("properties", {}).items() if k not in first.get("properties", {})}}
    if properties:
        merged["properties"] = properties
    required = list(dict.fromkeys([*first.get("required", []), *second.get("required", [])]))
    if required:
        merged["required"] = required
    if "properties" in merged or "required" in merged:
        merged.setdefault("type", "object")
    for key in ("description", "title"):  # the outer schema's words, not a member's
        if key in first:
            merged[key] = first[key]
    return merged


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
    if "type" not in node and not SHAPE_KEYS & node.keys():
        # Any value at all (often just a description): the converter rejects it; a bounded string is one.
        node["type"] = "string"
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
