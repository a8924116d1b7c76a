"""What a pinned answer costs with jump-forward decoding (issue 30): per-call time against the share of the
answer that is pinned (0%, 50%, 90%), with the forced spans fed in one batch and decoded a token at a time.

    .venv/bin/python benchmarks/bench_jump_forward.py          # ~3 min on 2 cores

The answer is the helpdesk's create_ticket (crm spec, its whole system prompt), at temperature 0. The model
first writes it with nothing pinned; then its own values are pinned (as live state pins them: `const` in the
answer's schema), nulls and then the largest first, until they hold the share asked for of the answer's values (the keys
and punctuation are fixed by the schema anyway), so every row is the same answer. Each call resumes the
prompt's prefix (evaluated once before), so the time is the answer's.
Target: 90% pinned costs <= 40% of the same answer unpinned. Writes its section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_decode import prompts, schema  # noqa: E402
from benchmarks.report import machine_load, write_section  # noqa: E402
from mcp_sim.engines.base import ChatMessage, Generation, GenerationRequest  # noqa: E402
from mcp_sim.engines.llama import LlamaEngine, default_threads  # noqa: E402
from mcp_sim.models.bundled import default_model_path  # noqa: E402

CTX = 4608
MAX_TOKENS = 400
SHARES = (0, 50, 90)
MODE = {False: "token", True: "jump"}  # jump_forward off: a token at a time


def call(engine: LlamaEngine, messages: list[ChatMessage], json_schema: dict[str, Any] | None,
         repeats: int) -> tuple[float, Generation]:
    """Median seconds of `repeats` calls, after one that evaluates the prompt's prefix."""
    seconds, generation = [], None
    for _ in range(repeats + 1):
        request = GenerationRequest(messages=messages, max_tokens=MAX_TOKENS, temperature=0.0,
                                    json_schema=json_schema, schema_key=json.dumps(json_schema, sort_keys=True),
                                    cache_key="bench-jump")
        started = time.perf_counter()
        generation = engine.generate(request)
        seconds.append(time.perf_counter() - started)
    assert generation is not None
    return statistics.median(seconds[1:] or seconds), generation


def leaves(node: dict[str, Any], value: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """The answer's values at the deepest object properties its schema names, with their paths."""
    if isinstance(value, dict) and isinstance(node.get("properties"), dict):
        return [leaf for key, item in value.items() if key in node["properties"]
                for leaf in leaves(node["properties"][key], item, (*path, key))]
    return [(path, value)]


def pin(node: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    if not path:
        return {"const": value}
    properties = dict(node["properties"])
    properties[path[0]] = pin(properties[path[0]], path[1:], value)
    return {**node, "properties": properties}


def pinned_schema(base: dict[str, Any], answer: dict[str, Any], share: int) -> tuple[dict[str, Any], float]:
    """`base` with the answer's largest values pinned until they hold `share`% of its values' text (the keys
    and punctuation the schema fixes anyway); the share reached."""
    # Nulls first: where the state pins the rest, the model writes a value where it wrote null alone.
    values = sorted(leaves(base, answer), key=lambda leaf: (leaf[1] is not None, -len(json.dumps(leaf[1]))))
    total = sum(len(json.dumps(value)) for _, value in values)
    json_schema, pinned = base, 0
    for path, value in values:
        if pinned * 100 >= share * total:
            break
        json_schema = pin(json_schema, path, value)
        pinned += len(json.dumps(value))
    return json_schema, pinned / total


def run(repeats: int) -> dict[str, Any]:
    engine = LlamaEngine(default_model_path(), n_ctx=CTX, n_threads=default_threads(), seed=0)
    messages = prompts()["long"]
    base = schema()
    engine.jump_forward = True
    _, free = call(engine, messages, base, 0)
    answer = json.loads(free.text, strict=False)
    rows: dict[str, Any] = {"answer": free.text, "shares": []}
    for share in SHARES:
        json_schema, reached = pinned_schema(base, answer, share)
        row: dict[str, Any] = {"share": share, "reached": reached}
        for jump in (False, True):
            engine.jump_forward = jump
            seconds, generation = call(engine, messages, json_schema, repeats)
            same = json.loads(generation.text, strict=False) == answer
            row[MODE[jump]] = {"seconds": seconds, "tokens": generation.completion_tokens,
                               "forced": generation.forced_tokens, "same": same}
            print(f"pinned {share:2}% ({reached:.0%}) jump {jump!s:5}: {seconds:.3f} s, "
                  f"{generation.completion_tokens} tokens ({generation.forced_tokens} forced), "
                  f"same answer: {row[MODE[jump]]['same']}", flush=True)
        rows["shares"].append(row)
    for jump in (False, True):  # free text: no grammar, so nothing to jump over (no slower is the target)
        engine.jump_forward = jump
        seconds, generation = call(engine, messages, None, repeats)
        rows[f"free {jump}"] = generation.completion_tokens / seconds
        print(f"no grammar, jump {jump!s:5}: {rows[f'free {jump}']:.1f} tokens/s", flush=True)
    engine.close()
    return rows


def report(rows: dict[str, Any], load: str) -> str:
    unpinned = {mode: rows["shares"][0][mode]["seconds"] for mode in MODE.values()}
    lines = ["| pinned (of the values' text) | token at a time s | tokens | jump-forward s | tokens (forced) "
             "| jump / same answer unpinned, token at a time | jump / unpinned, jump | same answer |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows["shares"]:
        off, on = row["token"], row["jump"]
        lines.append(f"| {row['share']}% ({row['reached']:.0%}) | {off['seconds']:.3f} | {off['tokens']} "
                     f"| {on['seconds']:.3f} | {on['tokens']} ({on['forced']}) "
                     f"| {on['seconds'] / unpinned['token']:.2f}x | {on['seconds'] / unpinned['jump']:.2f}x "
                     f"| {'yes' if off['same'] and on['same'] else 'no'} |")
    lines.append(f"\nWith no grammar (free text, nothing to jump over): {rows['free False']:.1f} tokens/s token "
                 f"at a time, {rows['free True']:.1f} with jump-forward on. The answer, unpinned: "
                 f"`{rows['answer']}`. Median of the calls after the prefix's; temperature 0; machine load: "
                 f"{load}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args()
    rows = run(args.repeats)
    body = report(rows, machine_load())
    print(body)
    if not args.no_write:
        write_section("jump-forward", "Jump-forward decoding: what a pinned answer costs (`bench_jump_forward.py`)",
                      body)


if __name__ == "__main__":
    main()
