"""A world as the page shows it: its calls in order, its live data as tables, and what each call changed.

Pure logic over a World, the StateBook that applies calls to live data, and the CallLog's details; no HTTP.
The state as of an earlier call is the scenario's seed data with the calls up to it applied again, each by the
same plan-and-commit step that applied it when it was answered (mcp_sim.core.simulator._commit_state).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_sim.core.worlds.world import World
from mcp_sim.serving.ui.call_log import CallDetails, CallLog
from mcp_sim.state.book import StateBook
from mcp_sim.state.live import LiveData

# Per spec file, its live data: the whole state of a world.
State = dict[str, LiveData]


@dataclass(frozen=True)
class CallView:
    number: int  # its place in the timeline, from 1
    source_file: str  # the spec file that answered it
    index: int  # its turn's index in that file's history
    tool: str
    arguments: dict[str, Any]
    answer: str  # the observation, as the world's history keeps it
    is_error: bool
    details: CallDetails | None  # None: answered by another instance, or too long ago to remember


@dataclass(frozen=True)
class Row:
    key: str
    cells: dict[str, str]
    status: str  # same, added, changed or removed
    changed: frozenset[str] = frozenset()  # the columns a changed row changed


@dataclass(frozen=True)
class Table:
    source_file: str
    collection: str
    columns: list[str]
    rows: list[Row]

    def count(self, status: str) -> int:
        return sum(row.status == status for row in self.rows)


def timeline(world: World, log: CallLog | None = None,
             structured_tools: frozenset[str] = frozenset()) -> list[CallView]:
    """Every call answered in WORLD, spec file by spec file (a world's files each keep their own order).
    STRUCTURED_TOOLS (tools with an outputSchema) tell a stored failure ({"error": ...}) from an answer."""
    calls: list[CallView] = []
    for source_file, turns in world.turns.items():
        for index, turn in enumerate(turns):
            tool, arguments = parse_action(turn.action)
            details = log.details(world.name, source_file, index, turn.action, turn.observation) if log else None
            is_error = details.is_error if details else _looks_failed(turn.observation, tool in structured_tools)
            calls.append(CallView(len(calls) + 1, source_file, index, tool, arguments, turn.observation, is_error,
                                  details))
    return calls


def parse_action(action: str) -> tuple[str, dict[str, Any]]:
    """(tool, arguments) of a stored action (mcp_sim.core.prompt.render_action)."""
    try:
        parsed = json.loads(action)
    except ValueError:
        return "?", {}
    if not isinstance(parsed, dict):
        return "?", {}
    arguments = parsed.get("arguments")
    return str(parsed.get("name", "?")), arguments if isinstance(arguments, dict) else {}


def _looks_failed(observation: str, structured: bool) -> bool:
    """A failure as mcp_sim.core.prompt.render_error stored it, for a call this process did not see."""
    if not structured:
        return observation.startswith("Error")
    try:
        parsed = json.loads(observation)
    except ValueError:
        return False
    return isinstance(parsed, dict) and list(parsed) == ["error"]


def states(calls: Sequence[CallView], seeds: Callable[[str], Any], book: StateBook, world: str,
           structured_tools: frozenset[str] = frozenset()) -> list[State]:
    """The world's state before any call (index 0) and after each call (index N: after call N). SEEDS gives a
    spec file's seed data in the world's scenario."""
    current: State = {source: LiveData(seeds(source)) for source in dict.fromkeys(c.source_file for c in calls)}
    history = [current]
    for call in calls:
        current = {source: live.copy() for source, live in current.items()}
        _apply(call, current[call.source_file], book, world, call.tool in structured_tools)
        history.append(current)
    return history


def _apply(call: CallView, live: LiveData, book: StateBook, world: str, structured: bool) -> None:
    """The call's change, as the simulator committed it: a failure a fault made up changes nothing."""
    step = book.plan(call.tool, call.arguments, live, world)
    if step is None:
        return
    faulted = call.details is not None and (call.details.source == "fault" or bool(call.details.faults))
    if call.is_error and faulted:
        return
    answer: Any = None
    text = call.answer
    if structured:
        try:
            answer = json.loads(call.answer)
        except ValueError:
            answer = None
        if call.is_error and isinstance(answer, dict):
            text, answer = str(answer.get("error", text)), None
    book.commit(step, live, answer if isinstance(answer, dict) else None, text, call.is_error)


def collection_keys(book: StateBook) -> dict[str, str]:
    """Each collection's key field, as the tools that change it name its records."""
    return {effect.collection: effect.key for effect in book.effects().values()}


def tables(before: State, after: State, keys: Mapping[str, str]) -> list[Table]:
    """AFTER as one table per collection, each row marked against BEFORE: added, changed, removed or same."""
    found = []
    for source_file in dict.fromkeys([*after, *before]):
        old = before.get(source_file, LiveData()).data
        new = after.get(source_file, LiveData()).data
        old, new = (old if isinstance(old, dict) else {}), (new if isinstance(new, dict) else {})
        for collection in dict.fromkeys([*new, *old]):
            found.append(_table(source_file, collection, old.get(collection), new.get(collection),
                                keys.get(collection, "id")))
    return found


def _table(source_file: str, collection: str, old: Any, new: Any, key: str) -> Table:
    old_rows, new_rows = _records(old, key), _records(new, key)
    rows = []
    for row_key, record in new_rows.items():
        previous = old_rows.get(row_key)
        if previous is None:
            rows.append(Row(row_key, record, "added"))
        else:
            changed = frozenset(name for name in {*record, *previous} if record.get(name) != previous.get(name))
            rows.append(Row(row_key, record, "changed" if changed else "same", changed))
    rows += [Row(row_key, record, "removed") for row_key, record in old_rows.items() if row_key not in new_rows]
    columns = list(dict.fromkeys(name for row in rows for name in row.cells))
    return Table(source_file, collection, columns, rows)


def _records(value: Any, key: str) -> dict[str, dict[str, str]]:
    """A collection's records by key, each cell as text. A mapping of key -> record gives each its key; a
    value that is not a collection of records is one row holding it whole."""
    if value is None:
        return {}
    if isinstance(value, dict) and all(isinstance(record, dict) for record in value.values()):
        items = [(str(name), {key: name, **record}) for name, record in value.items()]
    elif isinstance(value, list) and all(isinstance(record, dict) for record in value):
        items = [(str(record.get(key, f"#{number + 1}")), record) for number, record in enumerate(value)]
    else:
        items = [("value", {"value": value})]
    return {row_key: {name: cell_text(cell) for name, cell in record.items()} for row_key, record in items}


def cell_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
