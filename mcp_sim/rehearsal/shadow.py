"""Shadowing a real server: which tools its reads come from, and the answer source that asks it.

A read-only tool (the server marks it `readOnlyHint: true`, or the spec declares `x-sim.read_only`) is
answered by the real server, unless the world itself wrote what it reads: then the world answers, so the
agent sees its own writes. Every other tool is simulated and never reaches the real server. Names alone
never send a call there: `get_thing` without the mark is simulated.

The real server is reached through `RealCall`, a plain callable (the fidelity layer's live connection, or a
recording of one), so nothing here knows MCP's client.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from mcp_sim.base.content import content_text
from mcp_sim.base.result import SimulationMeta
from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.core.computed_answers import past_calls
from mcp_sim.core.prompt import render_error, render_observation
from mcp_sim.core.resource_reads import READ_TOOL
from mcp_sim.core.specs import ToolSpec
from mcp_sim.state.book import StateBook

# A real answer as on the wire (content, structuredContent, isError), given the tool and its arguments.
RealCall = Callable[[str, dict[str, Any]], dict[str, Any]]

REAL = "real"
WORLD = "world"


@dataclass(frozen=True)
class Route:
    """Where a tool's calls go, and why, in words for `shadow --plan`."""

    tool: str
    goes_to: str  # REAL or WORLD
    reason: str


def route(tool: ToolSpec, declared_read_only: Collection[str] = ()) -> Route:
    """REAL only for a tool the spec, the command line or the server's annotations call read-only."""
    if tool.read_only is not None:
        said = "declared read-only in the spec (x-sim.read_only)" if tool.read_only else \
            "declared not read-only in the spec (x-sim.read_only: false)"
        return Route(tool.name, REAL if tool.read_only else WORLD, said)
    if tool.name in declared_read_only:
        return Route(tool.name, REAL, "declared read-only (--read-only)")
    hints = tool.annotations or {}
    if hints.get("destructiveHint") is True:
        return Route(tool.name, WORLD, "the server marks it destructiveHint: true")
    if hints.get("openWorldHint") is True:
        return Route(tool.name, WORLD, "the server marks it openWorldHint: true (it reaches beyond its own data)")
    if hints.get("readOnlyHint") is True:
        return Route(tool.name, REAL, "the server marks it readOnlyHint: true")
    if "readOnlyHint" in hints:
        return Route(tool.name, WORLD, "the server marks it readOnlyHint: false")
    return Route(tool.name, WORLD, "not marked read-only")


def plan_lines(routes: Iterable[Route]) -> list[str]:
    """`shadow --plan`: one line per tool."""
    listed = list(routes)
    width = max((len(r.tool) for r in listed), default=0)
    where = {REAL: "real server", WORLD: "simulated"}
    return [f"{r.tool.ljust(width)}  {where[r.goes_to]:<11}  {r.reason}" for r in listed]


class ShadowSource:
    """Asks the real server for the calls routed to it that the world has not written, and first reads the
    real record a simulated write changes, so an edit or a move starts from the real bytes. A real answer
    says `simulated: false` in its _meta, and joins the world's history and live state like any other."""

    name = REAL

    def __init__(self, routes: dict[str, Route], book: StateBook, real: RealCall, server: str):
        self.routes = routes
        self.book = book
        self.real = real
        self.server = server

    def answer(self, call: Call) -> SimulationResult | None:
        if call.tool.name == READ_TOOL:  # a resource read: the real server's resource
            return self._ask(call.tool, call.arguments, "a resource read goes to the real server")
        goes = self.routes.get(call.tool.name)
        if goes is None or goes.goes_to != REAL:
            self._read_before_write(call)
            return None
        written = touched(call, self.book)
        layout = self.book.layout(call.tool.name)
        if layout is not None and layout.effect.op == "read" and layout.argument is not None:
            key = call.arguments.get(layout.argument)
            if key is not None and str(key) in written.get(layout.effect.collection, set()):
                return None  # the world wrote this record: its own state answers
            return self._ask(call.tool, call.arguments, goes.reason)
        result = self._ask(call.tool, call.arguments, goes.reason)
        if not written or result.is_error:
            return result
        return self._patched(call, result)

    def _ask(self, tool: ToolSpec, arguments: dict[str, Any], reason: str) -> SimulationResult:
        wire = self.real(tool.name, arguments)
        structured = wire.get("structuredContent")
        content = wire.get("content") or []
        text = content_text(content)
        is_error = bool(wire.get("isError"))
        meta = SimulationMeta(simulated=False, details={"real_server": self.server, "why": reason})
        observation = render_error(text, tool.output_schema is not None) if is_error else \
            render_observation(structured if isinstance(structured, dict) else None, text)
        return SimulationResult(text, structured if isinstance(structured, dict) else None, is_error,
                                simulation=meta, observation=observation, content=content or None)

    def _read_before_write(self, call: Call) -> None:
        """A simulated write of a record the world has never seen: read it from the real server first
        (with a tool routed there that reads the same collection by key), then plan the write again."""
        layout = self.book.layout(call.tool.name)
        if layout is None or not layout.effect.writes or layout.argument is None or call.live is None:
            return
        key = call.arguments.get(layout.argument)
        collection = layout.effect.collection
        if key is None or call.live.find(collection, layout.key, key) is not None \
                or call.live.is_absent(collection, key) or str(key) in touched(call, self.book).get(collection, ()):
            return
        reader = self._reader(call, collection)
        if reader is None:
            return
        read_layout = self.book.layout(reader.name)
        assert read_layout is not None and read_layout.argument is not None
        arguments = {read_layout.argument: key}
        step = self.book.plan(reader.name, arguments, call.live, call.world.name)
        if step is None:
            return
        real = self._ask(reader, arguments, "read before a simulated write")
        self.book.commit(step, call.live, real.structured, real.text, real.is_error)
        call.state = self.book.plan(call.tool.name, call.arguments, call.live, call.world.name)
        call.state_digest = call.live.digest()

    def _reader(self, call: Call, collection: str) -> ToolSpec | None:
        """A tool of the call's spec file routed to the real server that reads COLLECTION by key."""
        tools = call.tool.spec_set.tools if call.tool.spec_set is not None else []
        for tool in tools:
            layout = self.book.layout(tool.name)
            goes = self.routes.get(tool.name)
            if goes is not None and goes.goes_to == REAL and layout is not None and layout.effect.op == "read" \
                    and layout.effect.collection == collection and layout.argument is not None \
                    and not set(tool.input_schema.get("required") or []) - {layout.argument}:
                return tool
        return None

    def _patched(self, call: Call, result: SimulationResult) -> SimulationResult:
        """A real listing with the world's writes in it: lines naming a record the world moved or deleted
        are dropped, and a record it made under the listed path gets a line like its siblings'."""
        removed, added = world_changes(call, self.book)
        under = [value for value in call.arguments.values() if isinstance(value, str) and value.startswith("/")]
        text = patch_listing(result.text, removed, [key for key in added if any(_inside(key, p) for p in under)])
        if text == result.text:
            return result
        structured = result.structured
        if isinstance(structured, dict):
            structured = {name: text if value == result.text else value for name, value in structured.items()}
        result.text, result.structured = text, structured
        if result.content is not None:
            result.content = [{**block, "text": text} if block.get("type") == "text" else block
                              for block in result.content]
        result.observation = render_observation(structured, text)
        result.simulation.details["patched"] = "the real answer, with the world's own writes in it"
        return result


def touched(call: Call, book: StateBook) -> dict[str, set[str]]:
    """Per collection, the keys this world's earlier calls wrote, moved (both ends) or deleted, read from its
    history, so a fork, a reset or a restarted server knows them too."""
    keys: dict[str, set[str]] = {}
    for past in past_calls(call.world.turns.get(call.source, [])):
        for collection, key in _written_keys(book, past.tool, past.arguments):
            keys.setdefault(collection, set()).add(key)
    return keys


def world_changes(call: Call, book: StateBook) -> tuple[list[str], list[str]]:
    """The keys the world's writes took away (a move's source, a delete) and those they made, in order."""
    removed: list[str] = []
    added: list[str] = []
    for past in past_calls(call.world.turns.get(call.source, [])):
        layout = book.layout(past.tool)
        if layout is None or not layout.effect.writes or layout.argument is None:
            continue
        key = past.arguments.get(layout.argument)
        if key is None:
            continue
        if layout.effect.op in ("delete", "move"):
            removed.append(str(key))
            added = [k for k in added if k != str(key)]
        if layout.effect.op == "create":
            added.append(str(key))
        if layout.effect.op == "move" and layout.to is not None and past.arguments.get(layout.to) is not None:
            added.append(str(past.arguments[layout.to]))
            removed = [k for k in removed if k != str(past.arguments[layout.to])]
    return removed, list(dict.fromkeys(added))


def _written_keys(book: StateBook, tool: str, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    layout = book.layout(tool)
    if layout is None or not layout.effect.writes or layout.argument is None:
        return []
    names = [layout.argument] + ([layout.to] if layout.effect.op == "move" and layout.to else [])
    return [(layout.effect.collection, str(arguments[name])) for name in names if arguments.get(name) is not None]


def patch_listing(text: str, removed: Iterable[str], added: Iterable[str]) -> str:
    """TEXT, a listing of one entry per line, without the lines that name a REMOVED key and with a line for
    each ADDED key not in it yet, made from a sibling line (its last word swapped for the new name)."""
    gone = {name for key in removed for name in (key, posixpath.basename(key))}
    lines = [line for line in text.split("\n") if not line.strip() or _last_word(line) not in gone]
    for key in added:
        name = posixpath.basename(key)
        if any(_last_word(line) in (key, name) for line in lines):
            continue
        sibling = _sibling(lines, name)
        if sibling is None:
            continue
        word = _last_word(sibling)
        lines.append(sibling[: len(sibling) - len(word)] + (key if word.startswith("/") else name))
    return "\n".join(lines)


def _sibling(lines: list[str], name: str) -> str | None:
    """A line to copy for NAME: one naming an entry of the same kind (with an extension, or without)."""
    entries = [line for line in lines if _last_word(line)]
    same = [line for line in entries if ("." in posixpath.basename(_last_word(line))) == ("." in name)]
    found = same or entries
    return found[0] if found else None


def _last_word(line: str) -> str:
    words = line.split()
    return words[-1] if words else ""


def _inside(key: str, folder: str) -> bool:
    return posixpath.dirname(key.rstrip("/")) == folder.rstrip("/")
