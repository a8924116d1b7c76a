"""What the world page reads: the server's worlds (through their registry, from the store), the spec files that
seed them, the StateBook that applies calls, this process's call details and the ledger, put together per page."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcp_sim.core.specs import Catalog
from mcp_sim.core.worlds import Worlds
from mcp_sim.core.worlds.world import World
from mcp_sim.rehearsal.ledger import LedgerEntry, LedgerError, read_ledger
from mcp_sim.serving.ui.call_log import CallLog
from mcp_sim.serving.ui.view import CallView, State, collection_keys, states, tables, timeline
from mcp_sim.state.book import StateBook


@dataclass
class Site:
    worlds: Worlds
    catalog: Catalog
    log: CallLog = field(default_factory=CallLog)
    ledger: Path | None = None  # serve --ledger: the would-be writes

    def __post_init__(self) -> None:
        self.book = StateBook(self.catalog.spec_sets)
        self._keys = collection_keys(self.book)
        self._structured = frozenset(name for name, tool in self.catalog.tools.items()
                                     if tool.output_schema is not None)
        self._seeds = {spec_set.source: spec_set for spec_set in self.catalog.spec_sets}

    def signature(self, name: str | None) -> str:
        """Changes whenever the page about NAME (None: the list of worlds) would: read from the store."""
        if name is not None:
            world = self.worlds.find(name)
            return "gone" if world is None else f"{world.version}:{world.all_turns()}"
        found = [(world_name, self.worlds.find(world_name)) for world_name in self.worlds.names()]
        return ";".join(f"{world_name}:{w.version}:{w.all_turns()}" for world_name, w in found if w is not None)

    def world_list(self) -> list[dict[str, Any]]:
        rows = []
        for name in self.worlds.names():
            world = self.worlds.find(name)
            if world is not None:
                calls = self.calls(world)
                rows.append({**self.worlds.summary(world), "last_activity": _last_activity(world, calls)})
        return rows

    def calls(self, world: World) -> list[CallView]:
        return timeline(world, self.log, self._structured)

    def world_page(self, name: str, at: int | None = None, before: bool = False) -> dict[str, Any]:
        """The page about world NAME: every call, the state after call AT (None: the latest) or, with BEFORE,
        just before it, each row marked with what that call changed; and the ledger's entries of the world."""
        world = self.worlds.existing(name)
        calls = self.calls(world)
        history = states(calls, functools.partial(self._seed, world.scenario), self.book, world.name,
                         self._structured)
        selected = len(calls) if at is None else max(0, min(at, len(calls)))
        if before and selected:
            shown = history[selected - 1]
            marked = tables(shown, shown, self._keys)
        else:
            shown = history[selected]
            marked = tables(history[max(selected - 1, 0)], shown, self._keys)
        return {"world": self.worlds.summary(world), "calls": calls, "at": None if at is None else selected,
                "before": before and bool(selected), "tables": marked, "drift": _drift(world, history[-1]),
                "ledger": self.ledger_entries(world.name), "ledger_path": self.ledger,
                "signature": self.signature(world.name), "last_activity": _last_activity(world, calls)}

    def _seed(self, scenario: str, source: str) -> Any:
        spec_set = self._seeds.get(source)
        return None if spec_set is None else spec_set.world_state(scenario)[1]

    def ledger_entries(self, world: str) -> list[LedgerEntry] | str:
        """The ledger's entries of WORLD, or why there are none to show."""
        if self.ledger is None:
            return "This server keeps no ledger: serve with --ledger FILE to see the writes calls would make."
        try:
            return [entry for entry in read_ledger(self.ledger) if entry.world == world]
        except LedgerError as exc:
            return str(exc)


def _drift(world: World, replayed: State) -> list[str]:
    """Spec files whose live data is not what the calls, applied again, give (a spec edited since, say)."""
    return [source for source, live in world.live.items()
            if source in replayed and replayed[source].digest() != live.digest()]


def _last_activity(world: World, calls: Sequence[CallView]) -> str:
    seen = [call.details.at for call in calls if call.details is not None]
    if not seen:
        return "—" if calls else "no calls yet"
    return datetime.fromtimestamp(max(seen), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") + _ago(max(seen))


def _ago(moment: float) -> str:
    seconds = max(0, int(time.time() - moment))
    return f" ({seconds} s ago)" if seconds < 120 else f" ({seconds // 60} min ago)"

