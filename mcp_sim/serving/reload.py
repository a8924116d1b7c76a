"""`serve --reload`: watch the spec files and serve an edited spec without dropping a client.

The files are polled (their size and modification time, every `defaults.RELOAD_POLL_S`; a directory is
listed again, so a new spec file in it is picked up). A change loads the whole catalog again and builds a
server over it; its handlers then replace the running server's, so every connection, session and world goes
on. Connections that can hear the server outside a request (stdio, 2025-11-25 HTTP sessions) are told
`notifications/tools/list_changed` (and the resources or prompts one when those lists changed); stateless
2026-07-28 clients hear the same events on their `subscriptions/listen` stream.

A spec that no longer loads (a YAML error, a bad schema, a prompt too large for the context) changes nothing:
the old catalog keeps serving, and the problems go to stderr and, as an `error` log message, to every
connection whose log level lets it through.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.core.specs import SPEC_SUFFIXES, Catalog, load_catalog
from mcp_sim.serving.server_features import AdvertisingServer, Peers

logger = logging.getLogger(__name__)

Fingerprint = dict[str, tuple[int, int]]
LOGGER_NAME = "mcp-sim/reload"


def fingerprint(paths: Sequence[str | Path]) -> Fingerprint:
    """Each spec file's (size, mtime in ns), directories listed again; a file that vanished is left out."""
    seen: Fingerprint = {}
    for raw in paths:
        path = Path(raw)
        files = sorted(p for p in path.iterdir() if p.suffix in SPEC_SUFFIXES) if path.is_dir() else [path]
        for file in files:
            try:
                stat = file.stat()
            except OSError:
                continue
            seen[str(file)] = (stat.st_size, stat.st_mtime_ns)
    return seen


@dataclass(frozen=True)
class Lists:
    """What tools/list, resources/list (with templates) and prompts/list show, for telling what changed."""

    tools: str
    resources: str
    prompts: str

    @classmethod
    def of(cls, catalog: Catalog) -> Lists:
        def dumped(items: list[Any]) -> str:
            return json.dumps(items, sort_keys=True, ensure_ascii=False, default=str)

        surfaces = [spec_set.surface for spec_set in catalog.spec_sets]
        return cls(dumped([tool.definition() for tool in catalog.tools.values()]),
                   dumped([r.declared for s in surfaces for r in s.resources]
                          + [t.declared for s in surfaces for t in s.templates]),
                   dumped([p.declared for s in surfaces for p in s.prompts]))


class SpecReloader:
    """Watches SPECS; `rebuild` makes a server over a new catalog (raising McpSimError when it cannot), whose
    handlers then serve in place of `live`'s."""

    def __init__(self, specs: Sequence[str | Path], catalog: Catalog, live: AdvertisingServer,
                 rebuild: Callable[[Catalog], AdvertisingServer], peers: Peers,
                 interval: float = defaults.RELOAD_POLL_S):
        self.specs = list(specs)
        self.catalog = catalog
        self.live = live
        self.rebuild = rebuild
        self.peers = peers
        self.interval = interval
        self.reloads = 0
        self._seen = fingerprint(self.specs)

    async def watch(self) -> None:
        """Poll until cancelled; reload on every change."""
        while True:
            await anyio.sleep(self.interval)
            now = await anyio.to_thread.run_sync(fingerprint, self.specs)
            if now != self._seen:
                self._seen = now
                await self.reload()

    async def reload(self) -> bool:
        """Load the specs again and serve them; False (the old ones still serving) when they do not load."""
        try:
            catalog, fresh = await anyio.to_thread.run_sync(self._build)
        except McpSimError as exc:
            message = f"reload failed, still serving the specs as they were before the edit:\n{exc}"
            logger.error("mcp-sim: %s", message)
            await self.peers.connections.log(self.peers.levels, "error", message, LOGGER_NAME)
            return False
        except Exception as exc:  # a bug in building must not stop the server that still works
            logger.exception("mcp-sim: reload failed unexpectedly; still serving the specs as they were")
            await self.peers.connections.log(self.peers.levels, "error", f"reload failed: {exc}", LOGGER_NAME)
            return False
        before, after = Lists.of(self.catalog), Lists.of(catalog)
        swap_handlers(self.live, fresh)
        self.catalog = catalog
        self.reloads += 1
        logger.warning("mcp-sim: reloaded %d tool(s) from %s", len(catalog.tools),
                       ", ".join(spec_set.source for spec_set in catalog.spec_sets))
        await self.peers.connections.list_changed(before.tools != after.tools, before.resources != after.resources,
                                                  before.prompts != after.prompts, self.peers.bus)
        return True

    def _build(self) -> tuple[Catalog, AdvertisingServer]:
        catalog = load_catalog(self.specs)
        return catalog, self.rebuild(catalog)


def swap_handlers(live: AdvertisingServer, fresh: AdvertisingServer) -> None:
    """Serve FRESH's request handlers (and what it advertises) from LIVE, whose transports and middleware stay."""
    # The SDK offers no public way to list or remove handlers; a method the new specs no longer serve must go.
    live._request_handlers.clear()
    live._request_handlers.update(fresh._request_handlers)
    live.advertised = fresh.advertised


async def serve_reloading(reloader: SpecReloader | None, serve: Callable[[], Awaitable[None]]) -> None:
    """Run SERVE, with RELOADER watching beside it (if any) until SERVE returns."""
    if reloader is None:
        await serve()
        return
    async with anyio.create_task_group() as group:
        group.start_soon(reloader.watch)
        await serve()
        group.cancel_scope.cancel()
