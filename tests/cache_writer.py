"""A child process that writes to a response cache and prints each key once its put has returned.

    python tests/cache_writer.py CACHE PREFIX COUNT      (COUNT 0: until killed)
"""

from __future__ import annotations

import itertools
import sys

from mcp_sim.rehearsal.cache import ResponseCache


def result_bytes(prefix: str, number: int) -> bytes:
    return f'{{"by": "{prefix}", "n": {number}, "pad": "{"x" * 200}"}}'.encode()


def main(path: str, prefix: str, count: int) -> None:
    cache = ResponseCache(path)
    numbers = itertools.count() if count == 0 else range(count)
    for number in numbers:
        key = f"{prefix}-{number}"
        cache.put(key, result_bytes(prefix, number), model_hash="h", model_name="m", tool=f"tool-{prefix}",
                  arguments={"n": number}, world=prefix)
        print(key, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
