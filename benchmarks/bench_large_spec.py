"""A spec of any size: GitHub's REST API imported whole (1,223 tools) against small specs, default --ctx.

    .venv/bin/python benchmarks/bench_large_spec.py            # ~10 min on 2 cores (the import alone ~1 min)
    .venv/bin/python benchmarks/bench_large_spec.py --idle 20 --later 3

Imports npm @octokit/openapi's api.github.com.json with `mcp-sim import openapi` (kept in --work for the next
run), whole and its four git-ref operations alone (a spec that fits in full), then serves each of them and
tool_specs/weather.yaml, one after the other, over streamable HTTP with the defaults
(--ctx 8192, temperature 0). Each server sits idle for --idle seconds after its port opens (the warm-up reads
its system prompt meanwhile), then answers a first call and --later calls in one world: for GitHub, calls of
three different tools, each bringing its own definition (tools whose answers fit --max-tokens). Records the
time to the open port (the spec's load), the first call and the later calls. Writes its section of
docs/BENCHMARKS.md.
Target: GitHub's first call costs no more than twice the small spec's first call. The small spec that answers
the same first call (git_get-ref, an answer of some 150 tokens) is the four git-ref operations': the ratio is
then what the spec's size costs. weather.yaml's first call is shown too; its answer is a third as long.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.report import machine_load, write_section  # noqa: E402
from tests.conftest import mcp_sim_command, start_http_server, stop, subprocess_env  # noqa: E402

GITHUB = REPO / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.json"
SERVE_ARGS = ("--temperature", "0")
# Calls whose answers fit the default --max-tokens (512): repos_get and issues_get answer objects of some 80
# required fields, which take more than 512 tokens (an isError "cut off" until --max-tokens is raised).
CALLS = {
    "github": [("git_get-ref", {"owner": "octocat", "repo": "hello-world", "ref": "heads/main"}),
               ("issues_list-labels-for-repo", {"owner": "octocat", "repo": "hello-world", "per_page": 3}),
               ("meta_get-zen", {}),
               ("git_get-ref", {"owner": "octocat", "repo": "hello-world", "ref": "tags/v1.0"})],
    "weather": [("get_weather", {"city": "Oslo"}), ("get_forecast", {"city": "Oslo", "days": 3}),
                ("get_weather", {"city": "Lima"}), ("get_weather", {"city": "Kyiv"})],
    "github-refs": [("git_get-ref", {"owner": "octocat", "repo": "hello-world", "ref": "heads/main"}),
                    ("git_list-matching-refs", {"owner": "octocat", "repo": "hello-world", "ref": "tags"}),
                    ("git_get-ref", {"owner": "octocat", "repo": "hello-world", "ref": "tags/v1.0"}),
                    ("git_get-ref", {"owner": "octocat", "repo": "hello-world", "ref": "heads/dev"})],
}


def github_spec(work: Path, name: str = "github", *paths: str) -> Path:
    """GitHub's REST API imported whole, or only the operations whose paths match PATHS."""
    spec = work / f"{name}.yaml"
    if not spec.exists():
        work.mkdir(parents=True, exist_ok=True)
        selection = [option for path in paths for option in ("--path", path)]
        subprocess.run(mcp_sim_command("import", "openapi", str(GITHUB), "--out", str(spec), *selection),
                       check=True, env=subprocess_env())
    return spec


def run(name: str, spec: Path, idle: float, later: int) -> dict[str, Any]:
    import anyio
    from mcp import Client

    started = time.perf_counter()
    process, url = start_http_server(str(spec), *SERVE_ARGS, timeout=1800)
    port_open = time.perf_counter() - started
    seconds: list[float] = []
    calls = CALLS[name]
    try:
        time.sleep(idle)

        async def session() -> None:
            async with Client(url, mode="legacy", read_timeout_seconds=900) as client:
                for index in range(later + 1):
                    tool, arguments = calls[index % len(calls)]
                    begun = time.perf_counter()
                    result = await client.call_tool(tool, arguments)
                    seconds.append(time.perf_counter() - begun)
                    meta = (result.meta or {}).get("mcp-sim/simulation", {})
                    print(f"{name}: call {index + 1} {tool}: {seconds[-1]:.2f} s, error={result.is_error}, "
                          f"prompt {meta.get('prompt_tokens')} evaluated {meta.get('evaluated_tokens')} "
                          f"answered {meta.get('completion_tokens')} in {meta.get('attempts')} attempt(s)",
                          flush=True)

        anyio.run(session)
    finally:
        stop(process)
    return {"spec": name, "port_open": port_open, "first": seconds[0], "later": statistics.mean(seconds[1:])}


def report(rows: list[dict[str, Any]], idle: float, load: str) -> str:
    lines = ["| spec | tools | port open s | first call s | later calls s (mean) |", "| --- | --- | --- | --- | --- |"]
    tools = {"github": "1,223", "github-refs": "4", "weather": "2"}
    for row in rows:
        lines.append(f"| {row['spec']} | {tools[row['spec']]} | {row['port_open']:.1f} | {row['first']:.2f} | "
                     f"{row['later']:.2f} |")
    by = {row["spec"]: row for row in rows}
    if {"github", "github-refs"} <= by.keys():
        lines.append(f"\nGitHub's first call / the same call in the small github-refs spec: "
                     f"{by['github']['first'] / by['github-refs']['first']:.2f}x (target <= 2x).")
    if {"github", "weather"} <= by.keys():
        lines.append(f"GitHub's first call / weather's (a shorter answer): "
                     f"{by['github']['first'] / by['weather']['first']:.2f}x.")
    lines.append(f"Default --ctx 8192; each server idle {idle:.0f} s after its port opened. Machine load: {load}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--later", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mcp-sim-bench-large"))
    parser.add_argument("--specs", nargs="+", default=["weather", "github-refs", "github"],
                        help="which specs to serve, of weather, github-refs and github")
    options = parser.parse_args()
    specs = {"weather": lambda: REPO / "tool_specs" / "weather.yaml",
             "github-refs": lambda: github_spec(options.work, "github-refs", "/repos/*/*/git/*ref*/**"),
             "github": lambda: github_spec(options.work)}
    rows = [run(name, specs[name](), options.idle, options.later) for name in options.specs]
    text = report(rows, options.idle, machine_load())
    print(text)
    write_section("large-spec", "Large specs: GitHub's REST API whole (bench_large_spec.py)", text)


if __name__ == "__main__":
    main()
