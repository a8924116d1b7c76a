"""pytest plugin: rehearse an agent against simulated MCP tools, in-process, from a test.

Installed with mcp-sim (a `pytest11` entry point, so it loads by itself; from a checkout, pass
`-p mcp_sim.pytest_plugin`). The `mcp_sim` fixture starts a simulated server with any of the options of
`mcp-sim serve` and yields a connected `mcp.Client`; its `journal` lists every call answered in the test:

    @pytest.mark.anyio
    async def test_agent(mcp_sim):
        async with mcp_sim("tools.yaml", cache="tools.cache.db", replay_only=True) as client:
            await my_agent(client)
        assert mcp_sim.journal.tools() == ["get_order", "refund_order"]
        assert set(mcp_sim.journal.sources()) == {"cache"}

Relative paths (specs, cache, replay traces) are found beside the test file, wherever pytest runs from.

Nothing heavy is imported until a test asks for the fixture: pytest loads this module in every run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client

    from mcp_sim.core.calls import Call, SimulationResult
    from mcp_sim.core.simulator import Simulator


@dataclass(frozen=True)
class JournalEntry:
    """One answered call: what the agent asked, what it got and where the answer came from."""

    tool: str
    arguments: dict[str, Any]
    result: mcp_types.CallToolResult
    source: str  # "fixture", "cassette", "cache", "state", "rules", "model", "miss", "fault"
    world: str

    @property
    def structured(self) -> dict[str, Any] | None:
        return self.result.structured_content

    @property
    def is_error(self) -> bool:
        return bool(self.result.is_error)


@dataclass
class Journal:
    """The calls answered in one test, in order, across every simulated server it started (a call whose
    arguments break the tool's inputSchema is refused before any answer, and is not listed)."""

    entries: list[JournalEntry] = field(default_factory=list)

    def __iter__(self) -> Iterator[JournalEntry]:
        return iter(list(self.entries))

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> JournalEntry:
        return self.entries[index]

    def tools(self) -> list[str]:
        return [entry.tool for entry in self.entries]

    def sources(self) -> list[str]:
        return [entry.source for entry in self.entries]

    def calls_of(self, tool: str) -> list[JournalEntry]:
        return [entry for entry in self.entries if entry.tool == tool]

    def observed(self, call: Call, result: SimulationResult, source: str) -> None:
        """A CallObserver: the simulator reports each final answer here."""
        from mcp_sim.serving.server import to_call_tool_result

        self.entries.append(JournalEntry(call.tool.name, dict(call.arguments), to_call_tool_result(result), source,
                                         call.world.name))


class McpSim:
    """The `mcp_sim` fixture: call it to start a simulated server, `async with` it for a connected client."""

    def __init__(self, base: Path | None = None) -> None:
        self.journal = Journal()
        # The folder relative paths are read from: the test file's (so a run from elsewhere finds them).
        self.base = base

    def __call__(self, *specs: str | Path, cache: str | Path | None = None, replay_only: bool = False,
                 strict: bool = False, replay: Sequence[str | Path] = (),
                 fixtures: dict[str, list[dict[str, Any]]] | None = None, world: str | None = None,
                 scenario: str | None = None, store: str | None = None,
                 **engine: Any) -> AbstractAsyncContextManager[Client]:
        """A simulated server over SPECS, as `mcp-sim serve` would run it.

        cache, replay_only, strict, replay: as --cache, --replay-only, --strict, --replay. fixtures: more
        x-sim fixtures per tool name, answered before the spec's own. world: the world every call of the
        client goes to (default: the server's default world); scenario: the one it starts from. store: where
        worlds are kept, as --store (memory:, sqlite:///DIR, postgresql://...; default memory). Any other
        keyword is an engine option of `serve` (model, max_tokens, seed, expose_prompt, ...)."""
        from mcp_sim.rehearsal.setup import RehearsalSettings

        rehearsal = RehearsalSettings(cache=self._path(cache), replay_only=replay_only, strict=strict,
                                      replay=[self._resolve(p) for p in replay], model=engine.get("model"))
        return self._serve([self._resolve(p) for p in specs], rehearsal, fixtures or {}, world, scenario, store,
                           engine)

    def _path(self, value: str | Path | None) -> Path | None:
        return None if value is None else self._resolve(value)

    def _resolve(self, value: str | Path) -> Path:
        """VALUE beside the test file; a path that only exists from the current folder still works (as before)."""
        path = Path(value)
        if path.is_absolute() or self.base is None:
            return path
        beside = self.base / path
        return path if not beside.exists() and path.exists() else beside

    @asynccontextmanager
    async def _serve(self, specs: list[str | Path], rehearsal: Any, fixtures: dict[str, list[dict[str, Any]]],
                     world: str | None, scenario: str | None, store: str | None,
                     engine: dict[str, Any]) -> AsyncIterator[Client]:
        import anyio.to_thread

        from mcp_sim.serving.server import create_server

        simulator = await anyio.to_thread.run_sync(
            lambda: _build(specs, rehearsal, fixtures, scenario, store, engine, self.journal))
        try:
            async with _client(create_server(simulator), world) as client:
                yield client
        finally:
            simulator.engine.close()
            simulator.worlds.close()


def _build(specs: list[str | Path], rehearsal: Any, fixtures: dict[str, list[dict[str, Any]]],
           scenario: str | None, store: str | None, engine: dict[str, Any], journal: Journal) -> Simulator:
    from mcp_sim import app
    from mcp_sim.base import defaults
    from mcp_sim.core.specs import load_catalog
    from mcp_sim.engines.settings import EngineSettings

    catalog = load_catalog(specs)
    _add_fixtures(catalog.tools, fixtures)
    worlds = app.build_worlds(catalog, scenario, None, defaults.MAX_WORLDS, store)
    settings = app.AppSettings(EngineSettings(**engine), rehearsal, observers=[journal])
    return app.build_simulator(catalog, settings, worlds)


def _add_fixtures(tools: dict[str, Any], fixtures: dict[str, list[dict[str, Any]]]) -> None:
    """The test's own fixtures go before the spec's: they are checked as the spec's are."""
    from mcp_sim.base.errors import SpecError
    from mcp_sim.xsim.fixtures import parse_fixtures

    problems = [f"mcp_sim(fixtures=...): no tool {name!r} in the specs" for name in fixtures if name not in tools]
    for name, raw in fixtures.items():
        if name in tools:
            parsed, found = parse_fixtures(raw, tools[name], f"mcp_sim(fixtures={{{name!r}: ...}})")
            problems.extend(found)
            # Negative file order: a test's fixture beats an equally specific one of the spec.
            tools[name].fixtures[:0] = [_first(fixture, len(parsed)) for fixture in parsed]
    if problems:
        raise SpecError(problems)


def _first(fixture: Any, count: int) -> Any:
    from dataclasses import replace

    return replace(fixture, index=fixture.index - count)


def _client(server: Any, world: str | None) -> Client:
    """An mcp.Client of SERVER that sends every call to WORLD when the test names one."""
    from mcp import Client

    from mcp_sim.serving.server import WORLD_META_KEY

    class WorldClient(Client):
        async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *args: Any,
                            meta: Any = None, **kwargs: Any) -> mcp_types.CallToolResult:
            if world is not None:
                meta = {WORLD_META_KEY: world, **(meta or {})}
            return await super().call_tool(name, arguments, *args, meta=meta, **kwargs)

    return WorldClient(server)


@pytest.fixture
def mcp_sim(request: pytest.FixtureRequest) -> McpSim:
    """Start simulated MCP servers in-process: `async with mcp_sim(spec, **options) as client:`."""
    return McpSim(Path(request.path).parent)
