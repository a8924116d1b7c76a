"""What the live state says about one call before anyone answers it, and what the answer changes after.

`plan` reads the state: the record a call names, the records a list matches, the key a create gets. When
the state says everything the output holds, the plan carries the whole answer and no model runs; else it
carries pins (the values the model must write) and a note of the records touched, shown near the call.
`commit` writes what the final answer says back into the state (from the model, a fixture, a cassette or
the cache alike) and returns the change, for the ledger.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any

from mcp_sim.base.schemas import validation_error
from mcp_sim.state.diffs import DiffTemplate
from mcp_sim.state.joins import joined
from mcp_sim.state.layout import Layout, escape, properties, schema_at
from mcp_sim.state.live import LiveData, same_key
from mcp_sim.state.naming import singular
from mcp_sim.state.pins import Pins, apply_pins, fitting, get_pointer
from mcp_sim.state.sql import Style, answer, is_read, run, statement
from mcp_sim.state.templates import ListTemplate, WriteTemplate
from mcp_sim.state.text_ops import edited, line_range

# What a tool's examples spell out of its answers (templates, diffs, an SQL tool's style).
Template = WriteTemplate | ListTemplate | DiffTemplate | Style

_UNSET = object()  # a field the record lacks (None is a value)

# Root booleans an answer sets on success: `created` says whether the record is new, the others say yes.
SUCCESS_FLAGS = ("created", "updated", "deleted", "removed", "success", "ok", "done")
# Words of a failure that says a record is not there ("Key not found", "ENOENT: no such file").
NOT_FOUND_WORDS = ("not", "no such", "missing", "unknown", "enoent", "404")
# Fields whose text a read of a text tool answers with.
TEXT_FIELDS = ("content", "text", "body", "value", "data")


@dataclass
class StatePlan:
    layout: Layout
    key: Any = None
    before: dict[str, Any] | None = None  # the record as it was
    record: dict[str, Any] | None = None  # the record this call writes (create, update)
    written: dict[str, Any] = field(default_factory=dict)  # the fields its arguments set
    to: Any = None  # move: the record's new key
    cut: str | None = None  # read: the text field this read shows only some lines of
    edit: tuple[str, str] | None = None  # update: the edited text field before and after the call's edits
    dump: list[str] | None = None  # sql: the database after the statement (None: unchanged)
    # The whole answer, when the state says it all: a structured value, or text; `is_error` for not-found.
    answer: Any = None
    complete: bool = False
    is_error: bool = False
    pins: Pins = field(default_factory=dict)
    note: str | None = None
    # The keys a list answer shows, in order (its records learn the fields the model writes for them).
    listed: list[Any] = field(default_factory=list)
    # The record lacks no field the output shows: the pins may be the whole answer.
    whole: bool = False

    @property
    def op(self) -> str:
        return self.layout.effect.op


@dataclass(frozen=True)
class StateChange:
    collection: str
    op: str
    key: Any
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"collection": self.collection, "op": self.op, "key": self.key, "before": self.before,
                "after": self.after}


def plan(layout: Layout, live: LiveData, arguments: dict[str, Any], output_schema: dict[str, Any] | None,
         *, error_texts: list[tuple[dict[str, Any], str]], seen_keys: list[Any], world: str,
         template: Template | None = None) -> StatePlan | None:
    """The plan for one call, or None when the state has nothing to say about it (a read with no key).
    TEMPLATE: the answer the tool's examples spell out (see templates), which answers its writes whole."""
    style = template if isinstance(template, Style) else Style()
    step = _plan(layout, live, arguments, output_schema, error_texts, seen_keys, world, style)
    if step is not None and not step.complete:
        _use_template(step, template, arguments, output_schema)
    if step is None or output_schema is None or step.complete:
        return step
    shared = joined(layout, step.record or step.before, live) if step.op in ("read", "update") else {}
    step.pins = fitting({**_echoes(arguments, layout.output_shape, step.pins), **shared, **step.pins}, output_schema)
    if step.whole:
        answer = apply_pins({}, step.pins)
        # Optional fields outside the record (get_customer's orders) are left out rather than made up.
        if validation_error(answer, output_schema) is None:
            step.answer, step.complete = ordered(answer, layout.output_shape), True
    return step


def _use_template(step: StatePlan, template: Template | None, arguments: dict[str, Any],
                  output_schema: dict[str, Any] | None) -> None:
    """Answer STEP whole with TEMPLATE when it fits: a write's confirmation in the server's own words, an
    edit's diff in its examples' layout, or a text list of the keys the state shows (an empty list is left to
    the model: its words are not known)."""
    if isinstance(template, DiffTemplate):
        if step.edit is not None:
            filled = template.fill(step.key, *step.edit)
            if output_schema is None or validation_error(filled, output_schema) is None:
                step.answer, step.complete = filled, True
        return
    if isinstance(template, ListTemplate):
        if step.op == "list" and output_schema is None and step.listed:
            step.answer, step.complete = template.fill(step.listed), True
        return
    if not isinstance(template, WriteTemplate) or step.op not in ("create", "update", "delete", "move"):
        return
    filled = template.fill(arguments)
    if filled is None or (output_schema is None) != isinstance(filled, str):
        return
    if output_schema is not None and validation_error(filled, output_schema) is not None:
        return
    step.answer, step.complete = filled, True


def _plan(layout: Layout, live: LiveData, arguments: dict[str, Any], output_schema: dict[str, Any] | None,
          error_texts: list[tuple[dict[str, Any], str]], seen_keys: list[Any], world: str,
          style: Style) -> StatePlan | None:
    op = layout.effect.op
    if op == "list":
        return _plan_list(layout, live, arguments, output_schema)
    if op == "sql":
        return _plan_sql(layout, live, arguments, output_schema, style)
    if op == "create":
        key = arguments.get(layout.argument) if layout.argument else None
        if key is None:
            key = live.next_key(layout.effect.collection, layout.key, layout.effect.new_key, seen_keys, world)
            kind = properties(layout.record_schema).get(layout.key, {}).get("type")
            if kind == "string":
                key = str(key)
            elif kind == "integer" and str(key).isdigit():  # keys read back from storage are text
                key = int(key)
        return _plan_write(layout, live, arguments, output_schema, key, error_texts)
    if op not in ("read", "update", "delete", "move") or layout.argument is None or layout.argument not in arguments:
        return None
    key = arguments[layout.argument]
    if isinstance(key, list):  # several records at once (redis DEL k1 k2): only a delete says what happens
        return StatePlan(layout, key=key) if op == "delete" else None
    record = live.find(layout.effect.collection, layout.key, key)
    if record is None and live.is_absent(layout.effect.collection, key):
        said = live.absence(layout.effect.collection, key)
        if said is not None:  # the world failed this key before: it fails the same way again
            return StatePlan(layout, key=key, answer=said, complete=True, is_error=True)
        return _not_found(layout, key, output_schema, error_texts)
    if op == "read":
        return _plan_read(layout, key, record, output_schema, arguments)
    if op == "move":
        to = arguments.get(layout.to) if layout.to else None
        if not isinstance(to, str | int) or isinstance(to, bool):
            return None
        moved = None if record is None else {**record, layout.key: to}
        return StatePlan(layout, key=key, before=record, record=moved, to=to,
                         note=_note(layout, [record]) if record else None)
    if op == "delete":
        return _plan_delete(layout, key, record, output_schema)
    return _plan_write(layout, live, arguments, output_schema, key, error_texts)


def _plan_sql(layout: Layout, live: LiveData, arguments: dict[str, Any], output_schema: dict[str, Any] | None,
              style: Style) -> StatePlan | None:
    """Run the call's statement on the world's database; the answer when the examples show how it looks."""
    sql = statement(arguments, layout.effect.sql, layout.argument)
    if sql is None:
        return None
    dialect = layout.effect.dialect
    if layout.effect.readonly and not is_read(sql, dialect):
        return StatePlan(layout)  # the real server refuses a write here, in words only the model can guess
    database = live.data.get(layout.effect.collection) if isinstance(live.data, dict) else None
    outcome = run(database if isinstance(database, list) else [], sql, dialect)
    step = StatePlan(layout, dump=outcome.dump)
    said = answer(outcome, style) if output_schema is None else None
    if said is not None:
        step.answer, step.is_error = said
        step.complete = True
    return step


def _plan_read(layout: Layout, key: Any, record: dict[str, Any] | None,
               output_schema: dict[str, Any] | None, arguments: dict[str, Any]) -> StatePlan:
    step = StatePlan(layout, key=key, before=record)
    if record is not None:  # read_text_file(head=1) shows the first line of what the record holds
        text_field = _text_field(layout, record)
        if text_field is not None and isinstance(record[text_field], str):
            shown = line_range(record[text_field], arguments)
            if shown != record[text_field]:  # what this read shows; `before` keeps the whole
                record, step.cut = {**record, text_field: shown}, text_field
    if record is None:  # never seen: the model decides, under the key asked for
        # Only a record at the output's root is sure to be there; a nested one may be left out (not found).
        step.pins = _record_pins(layout, _shown(layout, {layout.key: key}, output_schema)) \
            if layout.record_at == "" and output_schema is not None else {}
        step.note = (f"No record of {layout.effect.collection} with {layout.key} {json.dumps(key)} is known yet: "
                     "answer as the world description says.")
        return step
    if output_schema is None:
        text_field = _text_field(layout, record)
        if text_field is not None:
            step.answer, step.complete = _as_text(record[text_field]), True
        step.note = _note(layout, [record])
        return step
    step.pins = {**_record_pins(layout, _shown(layout, record, output_schema)), **_found(layout, True),
                 **layout.effect.set}
    step.whole = _lacks_nothing(layout, record)
    step.note = _note(layout, [record])
    return step


def _plan_delete(layout: Layout, key: Any, record: dict[str, Any] | None,
                 output_schema: dict[str, Any] | None) -> StatePlan:
    step = StatePlan(layout, key=key, before=record)
    step.note = _note(layout, [record]) if record else None
    if output_schema is None:
        return step
    if record is None:  # never seen: the model decides whether it existed
        step.pins = _record_pins(layout, _shown(layout, {layout.key: key}, output_schema))
        return step
    flags = {f"/{name}": True for name in SUCCESS_FLAGS if _root_boolean(layout.output_shape, name)}
    step.pins = {**flags, **_record_pins(layout, _shown(layout, record, output_schema)), **layout.effect.set}
    step.whole = True
    return step


def _plan_write(layout: Layout, live: LiveData, arguments: dict[str, Any], output_schema: dict[str, Any] | None,
                key: Any, error_texts: list[tuple[dict[str, Any], str]]) -> StatePlan:
    collection = layout.effect.collection
    before = live.find(collection, layout.key, key)
    written = {field: arguments[name] for name, field in layout.fields.items() if name in arguments}
    if not layout.fields and not layout.record_schema:
        # Nothing declares the record's fields: those the records written so far have, else every argument.
        known = {name for record in live.records(collection, layout.key)[:20] for name in record}
        written = {name: value for name, value in arguments.items()
                   if name != layout.argument and (not known or name in known)}
    kept = {name: value for name, value in (before or {}).items() if name not in layout.effect.fresh}
    text_field = _text_field(layout, before) if before else None
    edited_field = None  # the text field this call's find-and-replace edits rewrote
    if before and text_field is not None and isinstance(before[text_field], str) and text_field not in written:
        after_edits = edited(before[text_field], arguments)  # edit_file's [{oldText, newText}]
        if after_edits is not None:
            written[text_field], edited_field = after_edits, text_field
    record = {layout.key: key, **kept, **layout.effect.values, **written}
    record[layout.key] = key
    step = StatePlan(layout, key=key, before=before, record=record, written=written)
    if edited_field is not None and before is not None:
        step.edit = (before[edited_field], written[edited_field])
    step.note = _note(layout, [record])
    if output_schema is None:
        return step
    flags = {f"/{name}": (before is None if name == "created" else True)
             for name in SUCCESS_FLAGS if _root_boolean(layout.output_shape, name) and name != "deleted"}
    shown = _shown(layout, record, output_schema)
    if edited_field is not None:
        # An edit answers with a diff or a confirmation, seldom the whole new text: the model says it.
        shown.pop(edited_field, None)
        step.whole = False
    else:
        step.whole = _lacks_nothing(layout, record)
    step.pins = {**flags, **_record_pins(layout, shown), **layout.effect.set}
    return step


def _plan_list(layout: Layout, live: LiveData, arguments: dict[str, Any],
               output_schema: dict[str, Any] | None) -> StatePlan:
    records = [r for r in live.records(layout.effect.collection, layout.key) if _matches(layout, r, arguments)]
    total = len(records)
    start = _offset(arguments.get(layout.cursor)) if layout.cursor else 0
    limit = arguments.get(layout.limit) if layout.limit else None
    bounds = [n for n in (limit, _max_items(layout.output_shape, layout.record_at)) if isinstance(n, int) and n >= 0]
    page = records[start:start + min(bounds)] if bounds else records[start:]
    step = StatePlan(layout, listed=[r.get(layout.key) for r in page])
    step.note = _note(layout, page, total=total)
    if output_schema is None or layout.record_at is None:
        return step
    items = [_project(r, layout.record_schema) for r in page]
    step.pins = {layout.record_at: items, **layout.effect.set}
    if layout.total is not None:
        step.pins[layout.total] = total
    step.whole = all(_lacks_nothing(layout, item) for item in items)
    return step


def _not_found(layout: Layout, key: Any, output_schema: dict[str, Any] | None,
               error_texts: list[tuple[dict[str, Any], str]]) -> StatePlan:
    """The answer to a record the world has said does not exist: the output's found flag (or its success
    flag, deleted: false) when it has one, else the tool's own failure text from its examples, else a plain
    one."""
    step = StatePlan(layout, key=key, complete=True)
    flags = [f"/{name}" for name in SUCCESS_FLAGS if _root_boolean(layout.output_shape, name)]
    # found: false; else the failure the tool's examples show; else deleted: false
    said = [layout.found] if layout.found is not None else [] if _example_error(layout, key, error_texts) else flags
    if output_schema is not None and said:
        answer = apply_pins({}, dict.fromkeys(said, False))
        if layout.record_at == "":
            answer = apply_pins(answer, _record_pins(layout, _shown(layout, {layout.key: key}, output_schema)))
        answer = _nulls_for_required(answer, layout.output_shape)
        if validation_error(answer, output_schema) is None:
            step.answer = ordered(answer, layout.output_shape)
            return step
    step.is_error = True
    step.answer = _error_text(layout, key, error_texts)
    return step


def _error_text(layout: Layout, key: Any, error_texts: list[tuple[dict[str, Any], str]]) -> str:
    return _example_error(layout, key, error_texts) or f"Error: {singular(layout.effect.collection)} {key} not found"


def _example_error(layout: Layout, key: Any, error_texts: list[tuple[dict[str, Any], str]]) -> str | None:
    """The tool's own not-found failure from its examples, about KEY."""
    for arguments, text in error_texts:
        example_key = arguments.get(layout.argument) if layout.argument else None
        if example_key is not None and str(example_key) in text and any(
                word in text.lower() for word in NOT_FOUND_WORDS):
            return text.replace(str(example_key), str(key))
    return None


def commit(step: StatePlan, live: LiveData, structured: Any, text: str, is_error: bool) -> StateChange | None:
    """Write what the final answer says into LIVE; the change, or None when nothing changed."""
    layout, collection = step.layout, step.layout.effect.collection
    if step.op == "list":
        _learn_listed(step, live, structured)
        return None
    if step.op == "sql":
        if step.dump is None or is_error:
            return None
        live.replace(collection, step.dump)
        return StateChange(collection, "sql", None, None, None)
    if step.key is None:
        return None
    if is_error or _says_not_found(layout, structured):
        if step.before is None and step.op != "create" and not isinstance(step.key, list):
            live.mark_absent(collection, step.key, text if is_error else None)
        return None
    if step.op == "move":  # the record leaves its key (now absent) and takes the new one, fields and all
        live.remove(collection, layout.key, step.key)
        after = step.record or {layout.key: step.to}
        live.put(collection, layout.key, after)
        return StateChange(collection, "move", step.to, step.before, after)
    if step.op == "delete" and isinstance(step.key, list):
        for key in step.key:
            live.remove(collection, layout.key, key)
        return StateChange(collection, "delete", step.key, None, None)
    if step.op == "delete":
        live.remove(collection, layout.key, step.key)
        return StateChange(collection, "delete", step.key, step.before, None)
    answered = _answered_record(layout, structured)
    if step.cut is not None:  # a few lines of the text say nothing about the rest
        answered.pop(step.cut, None)
    if step.op in ("read", "next"):
        # What the client saw wins: a model's answer repeats the pinned values anyway, and a recording that
        # read something else (the file changed behind the client's back) is what the next read must show.
        if step.before is not None and all(step.before.get(name, _UNSET) == value for name, value in answered.items()):
            return None
        after = {**(step.before or {}), **answered, layout.key: step.key}
    else:
        # What the client saw wins (a fixture's or cassette's own key too), but not over what the call wrote:
        # write_file's answer {"content": "Successfully wrote to ..."} is not the file's content.
        after = {**(step.record or {}), **answered, **step.written}
    live.put(collection, layout.key, after)
    return StateChange(collection, step.op, after.get(layout.key, step.key), step.before, after)


def _answered_record(layout: Layout, structured: Any) -> dict[str, Any]:
    if layout.record_at is None or not isinstance(structured, dict):
        return {}
    found = get_pointer(structured, layout.record_at)
    if not isinstance(found, dict):
        return {}
    skip = {layout.found, layout.total, *layout.effect.set}
    return {name: value for name, value in found.items()
            if f"{layout.record_at}/{escape(name)}" not in skip
            and not (layout.record_at == "" and name in SUCCESS_FLAGS)}


def _learn_listed(step: StatePlan, live: LiveData, structured: Any) -> None:
    layout = step.layout
    items = get_pointer(structured, layout.record_at) if layout.record_at else None
    if not isinstance(items, list):
        return
    for key, item in zip(step.listed, items, strict=False):  # a short answer teaches fewer
        record = live.find(layout.effect.collection, layout.key, key)
        if record is not None and isinstance(item, dict) and not set(item) <= set(record):
            live.put(layout.effect.collection, layout.key, {**item, **record})


def _says_not_found(layout: Layout, structured: Any) -> bool:
    return layout.found is not None and isinstance(structured, dict) and get_pointer(structured, layout.found) is False


def _record_pins(layout: Layout, record: dict[str, Any]) -> Pins:
    if layout.record_at is None:
        return {}
    return {f"{layout.record_at}/{escape(name)}": value for name, value in record.items()}


def _shown(layout: Layout, record: dict[str, Any], output_schema: dict[str, Any]) -> dict[str, Any]:
    """The fields of RECORD the output can hold where the record sits."""
    if layout.record_at is None:
        return {}
    node = schema_at(layout.output_shape or {}, layout.record_at)  # allOf merged, $refs inlined
    return _project(record, node if properties(node) else layout.record_schema)


def _project(record: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """RECORD cut down to the properties SCHEMA declares (all of it when the schema names none)."""
    declared = properties(schema)
    if not declared:
        return dict(record)
    return {name: value for name, value in record.items() if name in declared}


def _found(layout: Layout, value: bool) -> Pins:
    return {layout.found: value} if layout.found is not None else {}


def _lacks_nothing(layout: Layout, record: dict[str, Any]) -> bool:
    """RECORD holds every field the output shows of a record (else the model writes the rest); at the root
    of the output, the found flag, the count and the success flags are not the record's."""
    shown = set(properties(layout.record_schema))
    if layout.record_at == "":
        shown -= {*SUCCESS_FLAGS, *(p[1:] for p in (layout.found, layout.total, *layout.effect.set) if p)}
    return shown <= set(record)


def _echoes(arguments: dict[str, Any], shape: dict[str, Any] | None, pins: Pins) -> Pins:
    """Top-level output fields named like an argument repeat it (list_tickets' customer_id)."""
    roots = properties(shape)
    echoes = {}
    for name, value in arguments.items():
        pointer = f"/{escape(name)}"
        if name in roots and pointer not in pins and validation_error(value, roots[name]) is None:
            echoes[pointer] = value
    return echoes


def ordered(value: Any, schema: Any) -> Any:
    """VALUE with its object keys in the order SCHEMA declares them (as the model would write them)."""
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        return [ordered(item, items) for item in value]
    if not isinstance(value, dict):
        return value
    declared = properties(schema)
    keys = [name for name in declared if name in value] + [name for name in value if name not in declared]
    return {name: ordered(value[name], declared.get(name)) for name in keys}


def _root_boolean(shape: dict[str, Any] | None, name: str) -> bool:
    node = properties(shape).get(name)
    return isinstance(node, dict) and node.get("type") == "boolean"


def _nulls_for_required(answer: dict[str, Any], output_shape: dict[str, Any] | None) -> dict[str, Any]:
    shape = output_shape or {}
    for name in shape.get("required", []):
        node = properties(shape).get(name, {})
        if name not in answer and any(b.get("type") == "null" for b in node.get("anyOf", []) if isinstance(b, dict)):
            answer[name] = None
    return answer


def _matches(layout: Layout, record: dict[str, Any], arguments: dict[str, Any]) -> bool:
    for name, field_name in layout.filters.items():
        if name in arguments and not _equal(record.get(field_name), arguments[name]):
            return False
    if layout.query and isinstance(arguments.get(layout.query), str):
        needle = arguments[layout.query].lower()
        if any(mark in needle for mark in "*?["):  # a glob (redis KEYS, file patterns) matches the key whole
            if not fnmatch.fnmatchcase(str(record.get(layout.key, "")).lower(), needle):
                return False
        elif not any(needle in str(value).lower() for value in record.values() if isinstance(value, (str, int))):
            return False
    if layout.prefix and isinstance(arguments.get(layout.prefix), str):
        return str(record.get(layout.key, "")).startswith(arguments[layout.prefix])
    return True


def _equal(value: Any, wanted: Any) -> bool:
    return value == wanted or (same_key(value, wanted) and not isinstance(wanted, bool))


def _offset(cursor: Any) -> int:
    try:
        return max(0, int(cursor))
    except (TypeError, ValueError):
        return 0


def _max_items(shape: dict[str, Any] | None, pointer: str | None) -> int | None:
    if shape is None or pointer is None:
        return None
    node = schema_at(shape, pointer)
    maximum = node.get("maxItems") if isinstance(node, dict) else None
    return maximum if isinstance(maximum, int) else None


def _note(layout: Layout, records: list[dict[str, Any]], total: int | None = None) -> str:
    head = f"The world's {layout.effect.collection} this call touches"
    if total is not None:
        head += f" ({total} match{'es' if total != 1 else ''})"
    return f"{head} (JSON): {json.dumps(records, ensure_ascii=False)}"


def _text_field(layout: Layout, record: dict[str, Any]) -> str | None:
    """The record's field that holds its text (a file's content, a key's value), if it has one."""
    name = layout.effect.text or next((name for name in TEXT_FIELDS if name in record), None)
    return name if name is not None and name in record else None


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

