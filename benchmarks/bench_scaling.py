"""Scale-out: throughput against instance count behind HAProxy on one Postgres store, and what a call costs
in each world store.

    .venv/bin/python benchmarks/bench_scaling.py                          # answers from the state (no model)
    flock /tmp/mcp-sim-model.lock .venv/bin/python benchmarks/bench_scaling.py --engine   # one llama_cpp.server

Front-end bound: examples/todo.yaml with --replay-only, so every call is answered by the world's live state
(the same path as a fixture or cache hit: no model). Engine bound (--engine): tool_specs/weather.yaml on
`--engine openai` against one shared `python -m llama_cpp.server` with the default model.
CLIENTS stateless SDK clients, each on its own world, make CALLS calls each through HAProxy (round-robin).
The store cost: one call's world lock, version check and turn write, in process, per store.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
from mcp import Client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_sim.core.prompt import Turn  # noqa: E402
from mcp_sim.core.worlds import Worlds  # noqa: E402
from mcp_sim.core.worlds.stores import open_store  # noqa: E402
from tests.balancer import Balancer  # noqa: E402
from tests.conftest import default_model_path, llama_cpp_server, start_http_server, stop  # noqa: E402
from tests.pg_cluster import Cluster  # noqa: E402

TODO = REPO / "examples" / "todo.yaml"
WEATHER = REPO / "tool_specs" / "weather.yaml"
ALIAS = "smollm2"


def store_cost(url: str, calls: int) -> float:
    """Milliseconds per call of the store's part: hold the world, read it (version check), write one turn."""
    worlds = Worlds(store=open_store(url))
    started = time.perf_counter()
    for number in range(calls):
        with worlds.calling("bench") as world:
            worlds.record(world, "todo.yaml", Turn(f'{{"name": "create_task", "n": {number}}}', '{"id": "T-2"}'))
    worlds.close()
    return (time.perf_counter() - started) * 1000 / calls


@contextmanager
def instances(count: int, store: str, serve: list[str]) -> Iterator[str]:
    """COUNT instances behind HAProxy; yields the balancer's MCP URL."""
    with ExitStack() as stack:
        ports = {}
        for number in range(count):
            process, url = start_http_server(*serve, "--store", store, timeout=120)
            stack.callback(stop, process)
            ports[f"i{number}"] = int(url.split(":")[2].split("/")[0])
        balancer = Balancer(ports)
        stack.callback(balancer.stop)
        yield balancer.url


async def load(url: str, clients: int, calls: int, tag: str, engine: bool) -> tuple[float, list[float], int]:
    """Seconds for all calls, each call's latency, and how many were isError (a small model's answer that
    never fit the schema is one: it still cost the engine its tokens)."""
    latencies: list[float] = []
    errors = [0]

    async def client(number: int) -> None:
        async with Client(f"{url}?world={tag}-{number}", read_timeout_seconds=600) as session:
            for call in range(calls):
                started = time.perf_counter()
                if engine:
                    result = await session.call_tool("get_weather", {"city": f"City {number}-{call}"})
                else:
                    result = await session.call_tool("create_task", {"title": f"task {call}"})
                latencies.append(time.perf_counter() - started)
                errors[0] += bool(result.is_error)
                if result.is_error and errors[0] == 1:
                    print(f"first isError ({tag}): {str(result.content)[:300]}", file=sys.stderr)
                if result.is_error and not engine:
                    raise RuntimeError(f"a state-answered call failed: {result.content}")

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for number in range(clients):
            group.start_soon(client, number)
    return time.perf_counter() - started, latencies, errors[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--store-calls", type=int, default=300)
    parser.add_argument("--engine", action="store_true", help="answers from one shared llama_cpp.server")
    args = parser.parse_args()
    postgres = Cluster()
    postgres.start(durable=True)  # fsync on, as SQLite's synchronous=FULL: a fair cost per call
    try:
        with ExitStack() as stack:
            if args.engine:
                log = Path(tempfile.mkdtemp()) / "llama-server.log"
                # llama_cpp.server cuts a running answer short when another request arrives, unless told not to.
                engine_url = stack.enter_context(llama_cpp_server(default_model_path(), log, ALIAS, "--n_ctx", "4096",
                                                                  "--interrupt_requests", "False"))
                serve = [str(WEATHER), "--engine", "openai", "--base-url", engine_url.removesuffix("/v1"),
                         "--model", ALIAS, "--max-tokens", "160"]
            else:
                with tempfile.TemporaryDirectory() as folder:
                    print("| store | ms per call (lock, version check, turn write) |\n| --- | --- |")
                    for url in ("memory:", f"sqlite://{folder}", postgres.url):
                        print(f"| {url.split(':')[0]} | {store_cost(url, args.store_calls):.2f} |")
                serve = [str(TODO), "--replay-only"]
            print(f"\n| instances | clients | calls | isError | seconds | calls/s | p50 ms | p95 ms |\n{'| --- ' * 8}|")
            for count in args.instances:
                with instances(count, postgres.url, serve) as url:
                    seconds, latencies, errors = anyio.run(load, url, args.clients, args.calls, f"n{count}",
                                                           args.engine)
                latencies.sort()
                total = len(latencies)
                print(f"| {count} | {args.clients} | {total} | {errors} | {seconds:.1f} | {total / seconds:.2f} | "
                      f"{statistics.median(latencies) * 1000:.0f} | {latencies[int(total * 0.95)] * 1000:.0f} |")
    finally:
        postgres.remove()


if __name__ == "__main__":
    main()
