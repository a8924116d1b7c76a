"""Which tools of one spec file touch many records per call (state.batch), read from their names and schemas.

A create whose argument is an array of objects named like its noun (`create_entities(entities: [...])`)
makes a collection of those records, keyed by their `id` or `name` when they have one. Its siblings then
read as edits of it: an array of keys (`delete_entities(entityNames)`), an array of its records
(`delete_relations(relations)`), an array of edits that name a record (`add_observations([{entityName,
contents}])`), and reads whose output is arrays of these collections (`read_graph -> {entities,
relations}`). Nothing is inferred for a tool whose spec declares `x-sim.state`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_sim.state.batch import Batch
from mcp_sim.state.infer import finished_flags
from mcp_sim.state.layout import array_items, inline, properties
from mcp_sim.state.naming import KEY_NAMES, QUERY_NAMES, plural, same_noun, singular, verb_and_noun, words

_KEY_LISTS = ("names", "ids", "keys")


@dataclass(frozen=True)
class _Collection:
    name: str
    key: str | None
    fields: dict[str, Any]  # one record's properties


def infer_batches(tools: list[tuple[str, dict[str, Any], dict[str, Any] | None]]) -> dict[str, Batch]:
    """The batch effect of each (name, inputSchema, outputSchema) of one file that has one."""
    guesses = {name: verb_and_noun(name) for name, _, _ in tools}
    made = {}  # tool -> (argument, the collection its items would make)
    for name, input_schema, _ in tools:
        guess = guesses[name]
        if guess is not None and guess[0] == "create":
            found = _array_of_objects(input_schema, guess[1])
            if found is not None:
                made[name] = (found[0], _Collection(found[0], _key_field(found[1]), found[1]))
    keyed = [c for _, c in made.values() if c.key is not None]
    records = {c.name: c for name, (_, c) in made.items() if _reference(c.fields, keyed) is None}
    batches: dict[str, Batch] = {}
    for name, input_schema, output_schema in tools:
        guess = guesses[name]
        if guess is None:
            continue
        op, noun = guess
        if name in made and made[name][1].name in records:
            argument, collection = made[name]
            batches[name] = Batch("create", collection.name, collection.key, argument)
            continue
        known = list(records.values())
        batch = _edit(input_schema, noun, known, op) if op in ("create", "delete") else None
        if batch is None and op == "delete":
            batch = _delete(input_schema, known)
        if batch is None and op in ("read", "list"):
            batch = _read(input_schema, output_schema, known)
        if batch is None and op not in ("read", "list", "delete"):
            batch = _minted(name, input_schema, output_schema, tools)
        if batch is not None:
            batches[name] = batch
    for name, input_schema, output_schema in tools:  # `request_planning` names no operation
        if name not in batches and guesses[name] is None:
            minted = _minted(name, input_schema, output_schema, tools)
            if minted is not None:
                batches[name] = minted
    return batches


def _minted(name: str, schema: dict[str, Any], output_schema: dict[str, Any] | None,
            tools: list[tuple[str, dict[str, Any], dict[str, Any] | None]]) -> Batch | None:
    """A call that answers its array of records back, each with a key it did not pass (`tasks: [{title}]` ->
    `tasks: [{id, title}]`): it created them under new keys. A root `<noun>Id` the arguments lack names the
    parent record it made of its other arguments (a request of tasks); a root `total<Items>` counts them."""
    shape, output = inline(schema) or {}, inline(output_schema)
    roots = properties(output)
    for argument in shape.get("required", []):
        given = properties(array_items(properties(shape).get(argument)))
        shown = properties(array_items(roots.get(argument)))
        key = _key_field({field: node for field, node in shown.items() if field not in given})
        if not given or key is None or not set(given) <= set(shown):
            continue
        parent = next(((plural(" ".join(words(field)[:-1])), field) for field, node in roots.items()
                       if len(words(field)) > 1 and words(field)[-1] == "id" and field not in properties(shape)
                       and not same_noun(" ".join(words(field)[:-1]), argument)
                       and isinstance(node, dict) and node.get("type") == "string"), None)
        count = next((field for field, node in roots.items() if isinstance(node, dict)
                      and node.get("type") == "integer" and {"total", "count"} & set(words(field))
                      and any(same_noun(word, argument) for word in words(field))), None)
        defaults = {flag: False for tool, _, out in tools if tool != name
                    and same_noun((verb_and_noun(tool) or ("", ""))[1], argument) for flag in finished_flags(out)}
        return Batch("create", argument, key, argument, minted=True, parent=parent, count=count,
                     defaults=tuple(sorted(defaults.items())))
    return None


def _array_of_objects(schema: dict[str, Any], noun: str) -> tuple[str, dict[str, Any]] | None:
    """The required argument named like NOUN that is an array of objects, and one item's properties."""
    shape = inline(schema) or {}
    for name in shape.get("required", []):
        items = array_items(properties(shape).get(name))
        if same_noun(name, noun) and items is not None and properties(items):
            return name, properties(items)
    return None


def _key_field(fields: dict[str, Any]) -> str | None:
    return next((name for name in ("id", *KEY_NAMES)
                 if isinstance(fields.get(name), dict) and fields[name].get("type") in ("string", "integer")), None)


def _reference(fields: dict[str, Any], keyed: list[_Collection]) -> _Collection | None:
    """The keyed collection one of FIELDS names a record of (entityName -> entities by name)."""
    for name in fields:
        for collection in keyed:
            if words(name) == [*words(singular(collection.name)), *words(collection.key or "")]:
                return collection
    return None


def _edit(schema: dict[str, Any], noun: str, records: list[_Collection], op: str) -> Batch | None:
    """An array of edits, each naming a record and listing values for one of its list fields."""
    shape = inline(schema) or {}
    keyed = [c for c in records if c.key is not None]
    for argument in shape.get("required", []):
        items = properties(array_items(properties(shape).get(argument)))
        collection = _reference(items, keyed)
        if collection is None:
            continue
        ref = next(name for name in items if _reference({name: None}, [collection]))
        lists = [name for name, node in items.items() if name != ref and node.get("type") == "array"]
        targets = [name for name, node in collection.fields.items() if node.get("type") == "array"]
        for values in lists:
            target = values if values in targets else next((t for t in targets if same_noun(t, noun)), None)
            if target is not None:
                kind = "append" if op == "create" else "discard"
                return Batch(kind, collection.name, collection.key, argument, ref=ref, values=values, target=target)
    return None


def _delete(schema: dict[str, Any], records: list[_Collection]) -> Batch | None:
    """An array of a collection's keys (entityNames) or of its records (relations)."""
    shape = inline(schema) or {}
    keyless = tuple(c.name for c in records if c.key is None)
    for argument in shape.get("required", []):
        node = properties(shape).get(argument)
        items = array_items(node)
        parts = words(argument)
        for collection in records:
            if _array_of_text(node) and collection.key is not None and parts[-1:] and \
                    parts[-1] in _KEY_LISTS and same_noun(" ".join(parts[:-1]) or collection.name, collection.name):
                return Batch("delete", collection.name, collection.key, argument, related=keyless)
            if items is not None and same_noun(argument, collection.name) and properties(items) and \
                    set(properties(items)) <= set(collection.fields):
                related = keyless if collection.key is not None else ()
                return Batch("delete", collection.name, collection.key, argument, related=related)
    return None


def _array_of_text(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "array" and isinstance(node.get("items"), dict) \
        and node["items"].get("type") in ("string", "integer")


def _read(schema: dict[str, Any], output_schema: dict[str, Any] | None, records: list[_Collection]) -> Batch | None:
    """A read whose output is arrays of the collections (entities and relations), each named like one."""
    output = inline(output_schema)
    if output is None:
        return None
    shows = []
    for name, node in properties(output).items():
        collection = next((c for c in records if same_noun(name, c.name)), None)
        if collection is not None and array_items(node) is not None:
            shows.append((name, collection.name, collection.key))
    covered = {name for name, _, _ in shows}
    if not any(key is not None for _, _, key in shows) or not set(output.get("required", [])) <= covered:
        return None
    shows.sort(key=lambda shown: shown[2] is None)  # the keyed collection first: it is what a call selects
    arguments = properties(inline(schema))
    select = next((name for name, node in arguments.items()
                   if words(name)[-1:] and words(name)[-1] in _KEY_LISTS and _array_of_text(node)), None)
    query = next((name for name in QUERY_NAMES if arguments.get(name, {}).get("type") == "string"), None)
    return Batch("read", shows[0][1], shows[0][2], None, shows=tuple(shows), select=select, query=query)
