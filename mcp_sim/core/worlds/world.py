"""One world: a scenario, the history of every call answered in it and its live data, per spec file."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from mcp_sim.base.errors import McpSimError
from mcp_sim.core.prompt import Turn
from mcp_sim.core.scenarios import DEFAULT_SCENARIO
from mcp_sim.state.live import LiveData

DEFAULT_WORLD = "default"
MAX_NAME_LENGTH = 128
# Names travel in URLs, logs and file names: printable, no spaces, nothing that needs escaping.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")


class WorldError(McpSimError):
    """A world or scenario cannot be used as asked (bad name, unknown scenario, unknown world)."""


def check_world_name(name: str, what: str = "world") -> str:
    if not isinstance(name, str) or not name:
        raise WorldError(f"a {what} name must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise WorldError(f"the {what} name is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed")
    if not _NAME.match(name):
        raise WorldError(f"the {what} name {name[:40]!r} has characters that are not allowed: use letters, "
                         "digits and . _ : @ - (starting with a letter or digit)")
    return name


@dataclass
class World:
    name: str
    scenario: str = DEFAULT_SCENARIO
    # Every call answered in this world, per spec file (its source path): each file is its own server.
    turns: dict[str, list[Turn]] = field(default_factory=dict)
    # Per spec file, how many of the oldest turns no longer fit the context and are left out of prompts.
    dropped: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    # Per spec file, its live data (x-sim.state): seeded from the scenario on first use, then changed by calls.
    live: dict[str, LiveData] = field(default_factory=dict)
    # The world this one was forked from: its model state is a prefix of this world's prompts.
    forked_from: str | None = None
    created: float = field(default_factory=time.time)
    # How many times the store wrote this world: a cached copy whose version is not the store's is stale.
    # (Calls of one world run one at a time under the store's lock for it, so call N sees calls 1..N-1.)
    version: int = field(default=0, compare=False)

    def history(self, source: str) -> list[Turn]:
        """The turns of `source` that still go into prompts."""
        return list(self.turns.get(source, [])[self.dropped.get(source, 0):])

    def all_turns(self) -> int:
        return sum(len(turns) for turns in self.turns.values())
