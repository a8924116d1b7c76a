"""Effects worked out from tool names when a spec declares none: `create_task`, `get_task`, `list_tasks`,
`complete_task` and `delete_task` over `world.data.tasks` (or over a collection one of them creates).

Only families the names make plain are inferred: the collection must exist in the world's data, or a tool
of the same file must create it. `x-sim.state: none` turns inference off for one tool.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp_sim.state.effect import StateEffect
from mcp_sim.state.layout import inline, properties
from mcp_sim.state.naming import plural, same_noun, verb_and_noun, words

# Verbs that finish a record, and the values that say so in its fields.
FINISHING_VERBS = {"complete": ("completed", "done"), "finish": ("finished", "done", "completed"),
                   "close": ("closed", "done"), "mark": ("done", "completed"), "approve": ("approved",)}
# What `mark_X_<state>` says the record becomes, though the tool's own output may not show it.
MARKED_STATES = ("done", "completed", "finished", "closed", "approved")


def infer_effects(tools: list[tuple[str, dict[str, Any] | None]], data: Any,
                  declared: Iterable[str] = ()) -> dict[str, StateEffect]:
    """The inferred effect of each (name, outputSchema) in TOOLS, over the world DATA and the collections
    the file's DECLARED effects name (move_file joins the files write_file declares); tools with no plain
    effect are left out."""
    guesses = {name: verb_and_noun(name) for name, _ in tools}
    created = {noun for guess in guesses.values() if guess and guess[0] == "create" for noun in [guess[1]]}
    items = data.items() if isinstance(data, dict) else []
    collections = [key for key, value in items if isinstance(value, (list, dict))]
    collections += [name for name in declared if name and name not in collections]
    effects = {}
    for name, output in tools:
        guess = guesses[name]
        if guess is None:
            continue
        op, noun = guess
        collection = next((key for key in collections if same_noun(key, noun)), None)
        if collection is None and any(same_noun(noun, made) for made in created):
            collection = plural(noun)
        if collection is not None:
            values = finishing_values(words(name), output) if op == "update" else {}
            if op == "create":
                values = {field: False for field in finished_flags(output)}
            if op == "read" and "next" in words(name)[1:]:  # get_next_task hands out the next unfinished one
                op = "next"
            effects[name] = StateEffect(collection, op, values=values, inferred=True)
    return effects


def finished_flags(output_schema: dict[str, Any] | None) -> list[str]:
    """The record's booleans that say it is finished (done, completed, closed): a new record is not."""
    fields = _fields(output_schema)
    names = sorted({name for verbs in FINISHING_VERBS.values() for name in verbs})
    return [name for name in names if isinstance(fields.get(name), dict) and fields[name].get("type") == "boolean"]


def _fields(output_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The output's top-level properties and those one object down, where a record usually sits."""
    roots = properties(inline(output_schema))
    fields = dict(roots)
    for node in roots.values():
        fields.update(properties(node))
    return fields


def finishing_values(name: list[str], output_schema: dict[str, Any] | None) -> dict[str, Any]:
    """`complete_task` sets done: true, or status: completed, when the record has such a field;
    `mark_task_done` sets done: true, the state its NAME (its words) ends with."""
    verb = name[0] if name else ""
    if verb == "mark" and len(name) > 2 and name[-1] in MARKED_STATES:
        return {name[-1]: True}
    states = FINISHING_VERBS.get(verb)
    if states is None:
        return {}
    fields = _fields(output_schema)
    for state in states:
        if isinstance(fields.get(state), dict) and fields[state].get("type") == "boolean":
            return {state: True}
    status = fields.get("status")
    enum = status.get("enum", []) if isinstance(status, dict) else []
    return next(({"status": value} for value in states if value in enum), {})
