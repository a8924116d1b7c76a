"""Where an effect meets a tool's schemas: which argument names the record, where the record sits in the
output, which arguments filter a list. Worked out once per tool; what the spec declares always wins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_sim.base.grammar_schema import prepare_for_grammar
from mcp_sim.state.effect import StateEffect
from mcp_sim.state.naming import (
    CURSOR_NAMES,
    DESTINATION_NAMES,
    FOUND_NAMES,
    KEY_NAMES,
    LIMIT_NAMES,
    LIST_NAMES,
    PREFIX_NAMES,
    QUERY_NAMES,
    SOURCE_NAMES,
    STATEMENT_NAMES,
    TOTAL_NAMES,
    same_noun,
    singular,
)

# Large enough never to bound anything: the schema is only read here, never turned into a grammar.
_UNBOUNDED = 1 << 30


@dataclass(frozen=True)
class Layout:
    effect: StateEffect
    key: str
    argument: str | None  # the argument naming the record
    to: str | None  # move: the argument naming its new key
    record_at: str | None  # pointer of the record (of the array of records, for list); None: no structured output
    record_schema: dict[str, Any]  # the schema of one record as the output shows it ({} when unknown)
    found: str | None
    total: str | None
    fields: dict[str, str]  # argument -> record field, written by create/update
    filters: dict[str, str]
    query: str | None
    prefix: str | None
    limit: str | None
    cursor: str | None
    # The output schema with $refs inlined and allOf merged, read once here rather than on every call.
    output_shape: dict[str, Any] | None = None


def describe(layout: Layout) -> str:
    """One line for `mcp-sim check`: the effect as it will be applied, so an author can correct it."""
    effect = layout.effect
    if effect.op == "sql":
        ran = f"runs {effect.sql!r}" if effect.sql else f"runs the SQL in argument {layout.argument}"
        return f"sql on the database in {effect.collection}; {ran}" + ("; reads only" if effect.readonly else "")
    if effect.op == "vcs":
        return f"vcs: git {effect.command} on the repository in {effect.collection}"
    parts = [f"{effect.op} {effect.collection} by {layout.key}"]
    if layout.argument:
        parts.append(f"from argument {layout.argument}")
    elif effect.op == "create":
        parts.append(f"new keys by {effect.new_key}")
    if layout.to:
        parts.append(f"to argument {layout.to}")
    if layout.record_at is not None:
        parts.append(f"{'records' if effect.op == 'list' else 'record'} at {layout.record_at or '/'}")
    if effect.op == "list":
        searched = [f"{name}={field}" for name, field in layout.filters.items()]
        searched += [f"{what}: {name}" for what, name in (("query", layout.query), ("prefix", layout.prefix),
                                                         ("limit", layout.limit), ("cursor", layout.cursor)) if name]
        if searched:
            parts.append("filters " + ", ".join(searched))
    if effect.values:
        parts.append(f"writes {effect.values}")
    return "; ".join(parts) + (" (inferred from the name; declare x-sim.state to change it)" if effect.inferred else "")


def inline(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema with its local $refs inlined, type lists split and allOf members merged, for reading its
    shape (OpenAPI's Pet: allOf [NewPet, {id}] reads as one object with every member's properties)."""
    return None if schema is None else merge_all_of(prepare_for_grammar(schema, _UNBOUNDED, _UNBOUNDED))


def merge_all_of(node: Any) -> Any:
    """NODE with each allOf's object members merged into it: their properties and required lists joined
    (closing each member with additionalProperties: false would make the whole unsatisfiable)."""
    if isinstance(node, list):
        return [merge_all_of(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: merge_all_of(value) for key, value in node.items()}
    members = node.pop("allOf", None)
    if isinstance(members, list):
        for member in members:
            shape = object_branch(member) or (member if isinstance(member, dict) else {})
            node.setdefault("properties", {}).update(shape.get("properties", {}))
            if shape.get("additionalProperties") is False:
                node["additionalProperties"] = False
            node["required"] = [*node.get("required", []), *shape.get("required", [])]
            if "type" in shape:
                node.setdefault("type", shape["type"])
    return node


def object_branch(node: Any) -> dict[str, Any]:
    """The object form of a schema node: itself, or the first anyOf/oneOf branch with properties."""
    if not isinstance(node, dict):
        return {}
    if isinstance(node.get("properties"), dict):
        return node
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in node.get(key, []):
            found = object_branch(branch)
            if found:
                return found
    return {}


def array_items(node: Any) -> dict[str, Any] | None:
    """The item schema when NODE is (or may be) an array of objects."""
    if not isinstance(node, dict):
        return None
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        return object_branch(node["items"]) or None
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, []):
            items = array_items(branch)
            if items is not None:
                return items
    return None


def properties(node: Any) -> dict[str, Any]:
    return dict(object_branch(node).get("properties", {}))


def resolve(effect: StateEffect, input_schema: dict[str, Any], output_schema: dict[str, Any] | None,
            records: list[dict[str, Any]]) -> Layout:
    """The effect made concrete for one tool. RECORDS are the collection's seed records (may be empty)."""
    output = inline(output_schema)
    arguments = properties(input_schema)
    record_at, record_schema = _record_place(effect, output)
    record_fields = set(properties(record_schema)) | {name for record in records[:20] for name in record}
    key, argument = _key(effect, arguments, record_fields)
    to = effect.to
    if effect.op == "move":
        argument = effect.argument or _first(arguments, SOURCE_NAMES, exclude=set())
        to = to or _first(arguments, DESTINATION_NAMES, exclude=set())
    elif effect.op == "sql":
        argument = effect.argument or _first(arguments, STATEMENT_NAMES, exclude=set())
    fields = effect.fields if effect.fields is not None else {
        name: name for name in arguments if name != argument and name in record_fields}
    roots = properties(output)
    special = {*QUERY_NAMES, *LIMIT_NAMES, *CURSOR_NAMES, *PREFIX_NAMES}
    filters = effect.filters if effect.filters is not None else {
        name: name for name in arguments if name in record_fields and name not in special}
    return Layout(
        effect=effect, key=key, argument=argument, to=to, record_at=record_at, record_schema=record_schema,
        found=effect.found if effect.found is not None else _root_named(roots, FOUND_NAMES, "boolean"),
        total=effect.total if effect.total is not None else _root_named(roots, TOTAL_NAMES, "integer"),
        fields=fields, filters=filters,
        query=effect.query or _first(arguments, QUERY_NAMES, exclude=record_fields),
        prefix=effect.prefix or _first(arguments, PREFIX_NAMES, exclude=record_fields),
        limit=effect.limit or _first(arguments, LIMIT_NAMES, exclude=record_fields),
        cursor=effect.cursor or _first(arguments, CURSOR_NAMES, exclude=record_fields), output_shape=output)


def _record_place(effect: StateEffect, output: dict[str, Any] | None) -> tuple[str | None, dict[str, Any]]:
    if output is None:
        return None, {}
    roots = properties(output)
    if effect.at is not None:
        node = schema_at(output, effect.at)
        return effect.at, (array_items(node) or {}) if effect.op == "list" else object_branch(node)
    if effect.op == "list":
        named = [name for name in roots if same_noun(name, effect.collection) or name in LIST_NAMES]
        arrays = [name for name in roots if array_items(roots[name]) is not None]
        for name in [*named, *arrays]:
            items = array_items(roots[name])
            if items is not None:
                return f"/{escape(name)}", items
        return None, {}
    one = singular(effect.collection)
    for name, node in roots.items():
        if same_noun(name, one) and object_branch(node):
            return f"/{escape(name)}", object_branch(node)
    objects = [name for name, node in roots.items() if object_branch(node) and name not in FOUND_NAMES]
    if effect.key not in roots and len(objects) == 1:
        return f"/{escape(objects[0])}", object_branch(roots[objects[0]])
    return "", object_branch(output)


def _key(effect: StateEffect, arguments: dict[str, Any], record_fields: set[str]) -> tuple[str, str | None]:
    """The record's key field and the argument that names it."""
    if effect.argument is not None:
        return effect.key, effect.argument
    one = singular(effect.collection)
    candidates = [effect.key, f"{one}_{effect.key}", f"{one}{effect.key.capitalize()}", f"{one}_id", f"{one}Id"]
    for name in candidates:
        if name in arguments:
            return effect.key, name
    if effect.key not in record_fields:
        # No `id`: a record named by an identifier the call passes, such as a file's path or a key's name
        # (never by its content).
        for name in [*KEY_NAMES, *arguments]:
            schema = arguments.get(name)
            if isinstance(schema, dict) and schema.get("type") in ("string", "integer") and (
                    name in KEY_NAMES or (name.lower().endswith("id") and name in record_fields)):
                return name, name
    return effect.key, None


def _root_named(roots: dict[str, Any], names: tuple[str, ...], kind: str) -> str | None:
    for name in names:
        node = roots.get(name)
        kinds = ("integer", "number") if kind == "integer" else (kind,)
        if isinstance(node, dict) and node.get("type") in kinds:
            return f"/{escape(name)}"
    return None


def _first(arguments: dict[str, Any], names: tuple[str, ...], exclude: set[str]) -> str | None:
    return next((name for name in names if name in arguments and name not in exclude), None)


def escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def split_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def schema_at(schema: dict[str, Any], pointer: str) -> Any:
    """The schema of the value at POINTER of an instance (through properties and array items)."""
    node: Any = schema
    for part in split_pointer(pointer):
        items = node.get("items") if isinstance(node, dict) else None
        if part.isdigit() and isinstance(items, dict):
            node = items
        else:
            node = properties(node).get(part, {})
    return node
