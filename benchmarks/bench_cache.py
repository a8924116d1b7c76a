"""Response cache micro-benchmark: what a hit costs the server (key + get) over 10,000 entries.

    .venv/bin/python benchmarks/bench_cache.py                    # 10,000 entries, 10,000 lookups
    .venv/bin/python benchmarks/bench_cache.py --entries 1000 --turns 50

A hit is cache_key() over the world's history and the call, then get(); the target is at most 5 ms.
put() is shown too: it commits with synchronous=FULL (one fsync), after a model answer that took far longer.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_sim.rehearsal.cache import ResponseCache, cache_key  # noqa: E402


def result_json(number: int) -> bytes:
    """About 1.2 KB, the size of a structured crm answer."""
    customer = {"id": f"C-{number}", "name": f"Customer {number}", "email": f"c{number}@example.com",
                "notes": "x" * 1000, "plan": "pro"}
    return json.dumps({"content": [{"type": "text", "text": "..."}], "structuredContent": customer,
                       "isError": False}).encode()


def history(turns: int) -> list[tuple[str, str]]:
    """A world's earlier calls, ~1 KB of observation each."""
    return [(json.dumps({"name": "get_customer", "arguments": {"customer_id": f"C-{n}"}}),
             result_json(n).decode()) for n in range(turns)]


def key_for(number: int, turns: list[tuple[str, str]]) -> str:
    return cache_key(model_hash="f" * 64, prompt_version="1", spec_digest="s" * 64, history=turns,
                     tool="get_customer", arguments={"customer_id": f"C-{number}"}, seed=0, options_digest="o" * 64)


def timed(action: Callable[[], Any], repeat: int) -> list[float]:
    """Milliseconds per call."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{name:<34} {statistics.median(ordered):>8.3f} {p99:>8.3f} {ordered[-1]:>8.3f}   n={len(ordered)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=20, help="history length hashed into each key")
    args = parser.parse_args()
    turns = history(args.turns)
    with tempfile.TemporaryDirectory() as folder:
        cache = ResponseCache(Path(folder) / "bench.db")
        started = time.perf_counter()
        keys = [key_for(n, turns) for n in range(args.entries)]
        numbers = iter(range(args.entries))

        def put_next() -> None:
            n = next(numbers)
            cache.put(keys[n], result_json(n), model_hash="f" * 64, model_name="bench", tool="get_customer",
                      arguments={"customer_id": f"C-{n}"}, world="bench")

        puts = timed(put_next, args.entries)
        print(f"filled {args.entries} entries in {time.perf_counter() - started:.1f} s; "
              f"{cache.stats()['size_bytes'] / 1e6:.1f} MB on disk\n")
        rng = random.Random(0)
        picks = [rng.randrange(args.entries) for _ in range(args.lookups)]
        iterator = iter(picks)
        gets = timed(lambda: cache.get(keys[next(iterator)]), args.lookups)
        misses = timed(lambda: cache.get("0" * 64), args.lookups)
        iterator = iter(picks)
        hits = timed(lambda: cache.get(key_for(next(iterator), turns)), args.lookups)
        print(f"{'ms':<34} {'p50':>8} {'p99':>8} {'max':>8}")
        print(row("get() hit", gets))
        print(row("get() miss", misses))
        print(row(f"cache_key({args.turns} turns) + get() hit", hits))
        print(row("put() (synchronous=FULL)", puts))
        cache.close()


if __name__ == "__main__":
    main()
