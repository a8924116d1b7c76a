"""Tools that touch many records in one call, as a knowledge graph's do: `create_entities([...])` stores each
item as a record, `delete_entities(entityNames)` removes each named one, `add_observations([{entityName,
contents}])` appends to a list field of the records it names, and `read_graph` / `open_nodes(names)` /
`search_nodes(query)` answer with several collections at once (`{entities, relations}`).

Worked out from the tools' schemas when the spec declares no `x-sim.state` for them (batch_infer); the plan
here reads the state and, where the state says it all, answers whole; `commit` writes what the call did.
A collection whose items have no key field (a relation: from, to, type) holds each record once, compared
whole; deleting a keyed record takes the keyless records that refer to it along (a relation of a deleted
entity goes with it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from mcp_sim.base.schemas import validation_error
from mcp_sim.state.effect import StateEffect
from mcp_sim.state.layout import Layout, array_items, properties
from mcp_sim.state.live import LiveData, same_key
from mcp_sim.state.naming import singular
from mcp_sim.state.pins import apply_pins
from mcp_sim.state.plan import SUCCESS_FLAGS, StateChange, StatePlan, ordered

KINDS = ("create", "delete", "append", "discard", "read")
_OPS = {"create": "create", "delete": "delete", "append": "update", "discard": "update", "read": "list"}


@dataclass(frozen=True)
class Batch:
    """One tool's effect on many records."""

    kind: str  # one of KINDS
    collection: str  # the records' collection (read: the first of `shows`)
    key: str | None  # the records' key field; None: a record is its fields
    argument: str | None  # the array argument: the records (create), their keys or records (delete), the edits
    ref: str | None = None  # append/discard: the edit's field naming its record (entityName)
    values: str | None = None  # append/discard: the edit's list of values (contents)
    target: str | None = None  # append/discard: the record's list field they go into or out of
    # read: output array -> its collection, and each collection's key field (None: keyless)
    shows: tuple[tuple[str, str, str | None], ...] = ()
    select: str | None = None  # read: the argument listing the keys shown
    query: str | None = None  # read: the argument searched for in every field
    related: tuple[str, ...] = ()  # delete: keyless collections whose records go with a deleted record
    # create: the items carry no key; each gets a new one (task-1, task-2) that the answer shows.
    minted: bool = False
    # create: the record the call makes of its other arguments, the items' parent (a request of tasks):
    # its collection and the field naming it, in the answer's root and in each item (requestId).
    parent: tuple[str, str] | None = None
    count: str | None = None  # create: the answer's root field counting the items (totalTasks)
    # create: what a new record holds before any call changes it (done: false), from its siblings' outputs.
    defaults: tuple[tuple[str, Any], ...] = ()

    def effect(self) -> StateEffect:
        return StateEffect(self.collection, _OPS[self.kind], key=self.key or "", argument=self.argument,
                           inferred=True)

    def layout(self) -> Layout:
        return Layout(self.effect(), key=self.key or "", argument=self.argument, to=None, record_at=None,
                      record_schema={}, found=None, total=None, fields={}, filters={}, query=self.query,
                      prefix=None, limit=None, cursor=None)

    def describe(self) -> str:
        each = f"each item of {self.argument}"
        by = f"by {self.key}" if self.key else "compared whole"
        if self.kind == "create" and self.minted:
            said = f"create {self.collection} from {each}, each with a new {self.key}"
            if self.parent is not None:
                said += f", under a new record of {self.parent[0]} named by {self.parent[1]}"
        elif self.kind == "create":
            said = f"create {self.collection} from {each}, {by}; a record already there is left as it is"
        elif self.kind == "delete":
            said = f"delete {self.collection} named in {self.argument}, {by}"
            if self.related:
                said += f", with the {', '.join(self.related)} that refer to them"
        elif self.kind == "read":
            said = "read " + " and ".join(name for name, _, _ in self.shows)
            if self.select:
                said += f"; {self.select} selects by {self.shows[0][2]}"
            if self.query:
                said += f"; {self.query} searched in every field"
        else:
            verb = "append to" if self.kind == "append" else "remove from"
            said = (f"{verb} {self.collection}.{self.target} the {self.values} of {each}, "
                    f"the record named by {self.ref}")
        return said + " (inferred from the schemas; x-sim.state declares another, or none)"


@dataclass
class BatchPlan(StatePlan):
    batch: Batch | None = None
    # What the call writes: records to add, keys or records to remove, per-record list edits.
    adds: list[dict[str, Any]] = field(default_factory=list)
    removes: list[Any] = field(default_factory=list)
    edits: list[tuple[Any, list[Any]]] = field(default_factory=list)
    parent: dict[str, Any] | None = None  # minted create: the parent record it makes


@dataclass(frozen=True)
class Seen:
    """The keys a tool's success examples show: of its items, and of their parent (a minted create's)."""

    items: tuple[Any, ...] = ()
    parents: tuple[Any, ...] = ()


def plan(batch: Batch, live: LiveData, arguments: dict[str, Any], output_schema: dict[str, Any] | None,
         constant: Any = None, failures: tuple[tuple[Any, str], ...] = (), seen: Seen = Seen(),
         world: str = "") -> BatchPlan | None:
    """The plan of one call; CONSTANT: the answer every success example of the tool gives, if one does;
    FAILURES: the tool's failure examples, (the record they named, their text); SEEN: its examples' keys,
    which a minted create's new keys follow in WORLD."""
    step = BatchPlan(batch.layout(), batch=batch)
    items = arguments.get(batch.argument) if batch.argument else None
    if batch.kind == "read":
        return _plan_read(step, live, arguments, output_schema)
    if not isinstance(items, list):
        return None
    if batch.kind == "create" and batch.minted:
        return _plan_minted(step, live, arguments, items, output_schema, seen, world)
    if batch.kind == "create":
        _plan_create(step, live, items)
    elif batch.kind == "delete":
        step.removes = [item for item in items if isinstance(item, dict | str | int)]
    else:
        missing = _plan_edits(step, live, items, failures)
        if missing is not None:
            step.answer, step.is_error, step.complete = missing, True, True
            return step
    step.note = _note(batch.collection, [*step.adds, *(record for record, _ in step.edits)])
    if output_schema is None:
        return step
    shape = output_schema
    answer = constant if constant is not None else _write_answer(step, shape)
    flags = {f"/{name}": True for name in SUCCESS_FLAGS if _root_boolean(shape, name)}
    if answer is not None and validation_error(answer, output_schema) is None:
        step.answer, step.complete = ordered(answer, shape), True
    step.pins = flags
    return step


def swap_noun(answer: dict[str, Any], noun: str, other: str) -> dict[str, Any] | None:
    """ANSWER with every text's NOUN (any case of its first letter) made OTHER; None when no text has it."""
    if not noun or not other:
        return None
    found = False

    def swapped(value: Any) -> Any:
        nonlocal found
        if isinstance(value, str):
            for old, new in ((noun, other), (noun.capitalize(), other.capitalize())):
                if re.search(rf"\b{re.escape(old)}\b", value):
                    found = True
                    value = re.sub(rf"\b{re.escape(old)}\b", new, value)
            return value
        return value

    result = {name: swapped(value) for name, value in answer.items()}
    return result if found else None


def _plan_minted(step: BatchPlan, live: LiveData, arguments: dict[str, Any], items: list[Any],
                 output_schema: dict[str, Any] | None, seen: Seen, world: str) -> BatchPlan:
    """Each item a new record under a new key (and, with a parent, a new parent record of the call's other
    arguments); the answer's keys, count and records pinned, the rest left to the model."""
    batch = step.batch
    assert batch is not None and batch.key is not None and batch.argument is not None
    parent_key = None
    if batch.parent is not None:
        collection, named = batch.parent
        parent_key = _mint(live, collection, "id", list(seen.parents), world, [])
        fields = {name: value for name, value in arguments.items()
                  if name != batch.argument and isinstance(value, str | int | float | bool)}
        step.parent = {"id": parent_key, named: parent_key, **fields}
        if batch.count:
            step.parent[batch.count] = sum(isinstance(item, dict) for item in items)
    keys: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        keys.append(_mint(live, batch.collection, batch.key, list(seen.items), world, keys))
        record = {batch.key: keys[-1], **dict(batch.defaults), **item}
        if batch.parent is not None:
            record[batch.parent[1]] = parent_key
        step.adds.append(record)
    step.note = _note(batch.collection, step.adds)
    if output_schema is None:
        return step
    shown = array_items(properties(output_schema).get(batch.argument)) or {}
    step.pins = {f"/{batch.argument}": [_project(record, shown) for record in step.adds]}
    if batch.parent is not None:
        step.pins[f"/{batch.parent[1]}"] = parent_key
    if batch.count:
        step.pins[f"/{batch.count}"] = len(step.adds)
    answer = ordered(apply_pins({}, step.pins), output_schema)
    if validation_error(answer, output_schema) is None and set(answer) == set(properties(output_schema)):
        step.answer, step.complete = answer, True
    return step


def _mint(live: LiveData, collection: str, key: str, seen: list[Any], world: str, taken: list[Any]) -> Any:
    """A new key of COLLECTION; in a world that has none yet, the first its examples show (a fresh server
    counts from where the recorded one began: task-1)."""
    if not taken and not live.records(collection, key) and not live.absent.get(collection) and seen:
        numbered = [key for key in seen if re.search(r"\d+$", str(key))]
        return min(numbered, key=lambda k: int(re.findall(r"\d+$", str(k))[0])) if numbered else seen[0]
    return live.next_key(collection, key, "pattern", seen, world, taken=taken)


def _plan_create(step: BatchPlan, live: LiveData, items: list[Any]) -> None:
    batch = step.batch
    assert batch is not None
    records = live.records(batch.collection, batch.key or "")
    for item in items:
        if not isinstance(item, dict):
            continue
        there = [*records, *step.adds]
        if batch.key:
            if not any(same_key(r.get(batch.key), item.get(batch.key)) for r in there):
                step.adds.append(item)
        elif item not in there:
            step.adds.append(item)


def _plan_edits(step: BatchPlan, live: LiveData, items: list[Any], failures: tuple[tuple[Any, str], ...]) -> str | None:
    """Each edit's record and the values it adds or removes; the failure when a record is not there (in the
    words of the tool's failure examples, else plain ones)."""
    batch = step.batch
    assert batch is not None and batch.key is not None and batch.ref and batch.values and batch.target
    for item in items:
        if not isinstance(item, dict):
            continue
        name, values = item.get(batch.ref), item.get(batch.values)
        record = live.find(batch.collection, batch.key, name)
        if record is None:
            if batch.kind == "append":  # the call cannot add to nothing: it fails whole
                said = next((text.replace(str(named), str(name)) for named, text in failures
                             if named is not None and str(named) in text), None)
                return said or f"Error: {singular(batch.collection)} {name} not found"
            continue
        held = record.get(batch.target)
        now: list[Any] = held if isinstance(held, list) else []
        given: list[Any] = values if isinstance(values, list) else []
        if batch.kind == "append":
            changed = [value for index, value in enumerate(given) if value not in now and value not in given[:index]]
        else:
            changed = [value for value in now if value in given]
        step.edits.append((record, changed))
    return None


def _write_answer(step: BatchPlan, shape: dict[str, Any]) -> Any | None:
    """The answer a write's output shows: the records it created, or one entry per edit (the edit's own
    fields, and the values it changed in the output's one list field)."""
    batch = step.batch
    assert batch is not None
    roots = properties(shape)
    arrays = [name for name, node in roots.items() if array_items(node) is not None]
    if batch.kind == "create" and batch.argument in arrays and set(roots) == {batch.argument}:
        return {batch.argument: step.adds}
    if batch.kind == "append" and len(arrays) == 1 and set(roots) == set(arrays):
        entry = properties(array_items(roots[arrays[0]]))
        lists = [name for name, node in entry.items()
                 if node.get("type") == "array" and name != batch.values]
        if batch.ref not in entry or len(lists) != 1:
            return None
        return {arrays[0]: [{batch.ref: record.get(batch.key or ""), lists[0]: changed}
                            for record, changed in step.edits]}
    return None


def _plan_read(step: BatchPlan, live: LiveData, arguments: dict[str, Any],
               output_schema: dict[str, Any] | None) -> BatchPlan | None:
    batch = step.batch
    assert batch is not None
    selected = arguments.get(batch.select) if batch.select else None
    needle = arguments.get(batch.query) if batch.query else None
    answer: dict[str, Any] = {}
    chosen: list[Any] = []  # the keys of the keyed records shown
    filtered = isinstance(selected, list) or isinstance(needle, str)
    for name, collection, key in batch.shows:
        if key is None:
            continue
        records = live.records(collection, key)
        if isinstance(selected, list):
            records = [r for r in records if any(same_key(r.get(key), wanted) for wanted in selected)]
        if isinstance(needle, str):
            records = [r for r in records if _mentions(r, needle.lower())]
        answer[name] = records
        chosen += [r.get(key) for r in records]
    for name, collection, key in batch.shows:
        if key is None:
            records = live.records(collection, "")
            if filtered:
                records = [r for r in records if any(_refers(r, wanted) for wanted in chosen)]
            answer[name] = records
    step.note = _note(batch.collection, answer.get(batch.shows[0][0], []))
    if output_schema is None:
        return step
    shape = output_schema
    for name, node in properties(shape).items():  # each record as the output shows one
        if name in answer:
            answer[name] = [_project(r, array_items(node) or {}) for r in answer[name]]
    if validation_error(answer, output_schema) is None:
        step.answer, step.complete = ordered(answer, shape), True
    return step


def _mentions(record: dict[str, Any], needle: str) -> bool:
    """NEEDLE (lower case) in one of the record's text fields, or in a text of one of its lists."""
    for value in record.values():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(text, str) and needle in text.lower() for text in texts):
            return True
    return False


def _refers(record: dict[str, Any], key: Any) -> bool:
    return any(same_key(value, key) for value in record.values() if isinstance(value, str | int))


def _project(record: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    declared = properties(schema)
    return {name: value for name, value in record.items() if name in declared} if declared else dict(record)


def _root_boolean(shape: dict[str, Any], name: str) -> bool:
    node = properties(shape).get(name)
    return isinstance(node, dict) and node.get("type") == "boolean"


def _note(collection: str, records: list[Any]) -> str:
    return f"The world's {collection} this call touches (JSON): {json.dumps(records, ensure_ascii=False)}"


def commit(step: BatchPlan, live: LiveData, is_error: bool) -> StateChange | None:
    """Write what the call did into LIVE (nothing when it failed)."""
    batch = step.batch
    if batch is None or is_error or batch.kind == "read":
        return None
    key = batch.key
    if batch.kind == "create":
        if step.parent is not None and batch.parent is not None:
            live.put(batch.parent[0], "id", step.parent)
        for record in step.adds:
            if key:
                live.put(batch.collection, key, record)
            else:
                live.append(batch.collection, record)
        keys = [record.get(key) if key else record for record in step.adds]
        return StateChange(batch.collection, "create", keys, None, None) if keys else None
    if batch.kind == "delete":
        return _commit_delete(batch, step.removes, live)
    for record, changed in step.edits:
        now = record.get(batch.target) if isinstance(record.get(batch.target), list) else []
        after = [*now, *changed] if batch.kind == "append" else [v for v in now if v not in changed]
        live.put(batch.collection, key or "", {**record, str(batch.target): after})
    names = [record.get(key or "") for record, _ in step.edits]
    return StateChange(batch.collection, "update", names, None, None) if names else None


def _commit_delete(batch: Batch, removes: list[Any], live: LiveData) -> StateChange | None:
    gone: list[Any] = []
    for item in removes:
        if batch.key:
            name = item.get(batch.key) if isinstance(item, dict) else item
            if live.find(batch.collection, batch.key, name) is not None:
                live.remove(batch.collection, batch.key, name)
                gone.append(name)
        elif isinstance(item, dict) and live.drop(batch.collection, item.__eq__):
            gone.append(item)
    for collection in batch.related:
        live.drop(collection, lambda record: any(_refers(record, name) for name in gone))
    return StateChange(batch.collection, "delete", gone, None, None) if gone else None
