"""The world stores, chosen by URL scheme. Adding one: a module with `from_url(url) -> WorldStore`, and a line
here. Modules are imported when their scheme is used, so a store's driver (psycopg) is needed only by it."""

from __future__ import annotations

import importlib
from pathlib import Path

from mcp_sim.core.worlds.store import StoreError, WorldStore

STORES = {
    "memory": "mcp_sim.core.worlds.memory_store",
    "sqlite": "mcp_sim.core.worlds.sqlite_store",
    "postgresql": "mcp_sim.core.worlds.postgres_store",
    "postgres": "mcp_sim.core.worlds.postgres_store",
}


def open_store(url: str | None = None, state_dir: Path | None = None) -> WorldStore:
    """The store URL names (`memory:`, `sqlite:///DIR`, `postgresql://...`); `state_dir` is the older way to
    say sqlite://DIR. Neither: memory."""
    if url is not None and state_dir is not None:
        raise StoreError(f"--state-dir and --store both say where worlds are kept: pass one (--state-dir "
                         f"{state_dir} is --store sqlite://{state_dir})")
    if url is None:
        url = f"sqlite://{state_dir}" if state_dir is not None else "memory:"
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    module = STORES.get(scheme)
    if module is None:
        raise StoreError(f"the world store {url!r} has no known scheme; use one of: memory:, sqlite:///DIR, "
                         "postgresql://USER@HOST:PORT/DB")
    try:
        opener = importlib.import_module(module).from_url
    except ModuleNotFoundError as exc:
        raise StoreError(f"the world store {scheme}: needs {exc.name}, which is not installed: pip install "
                         "'mcp-sim[postgres]'") from None
    store: WorldStore = opener(url)
    return store
