"""The whole loop against real servers and the real model: mirror, record, learn, eval with SmolLM2."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client

from mcp_sim.cli.fidelity import _progress
from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.fidelity.evaluate import RealResults, SimulatorResponder, StepResult
from mcp_sim.fidelity.scoring import Observation, score_step
from mcp_sim.rehearsal.traces import read_traces
from tests.fidelity_helpers import TRACES, filesystem_server, memory_server, recorder, run_cli, time_server

# One thread: on a busy shared machine llama.cpp's threads spin at barriers, and one thread ran these
# tests ten times faster than two (same answers; decoding is deterministic for a fixed seed).
FAST = ["--max-tokens", "128", "--attempts", "1", "--ctx", "4096", "--threads", "1"]


def scripted_calls(name: str, root: str) -> list[tuple[str, dict[str, Any]]]:
    if name == "time":
        return [("get_current_time", {"timezone": "Europe/Paris"}),
                ("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                  "target_timezone": "Asia/Tokyo"}),
                ("get_current_time", {"timezone": "Nowhere/Land"})]
    if name == "filesystem":
        return [("write_file", {"path": f"{root}/a.txt", "content": "one two\n"}),
                ("read_text_file", {"path": f"{root}/a.txt"}),
                ("list_directory", {"path": root}),
                ("edit_file", {"path": f"{root}/a.txt", "edits": [{"oldText": "two", "newText": "three"}]}),
                ("read_text_file", {"path": f"{root}/a.txt"})]
    bob = {"name": "Bob", "entityType": "person", "observations": ["likes tea"]}
    return [("create_entities", {"entities": [bob]}),
            ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["plays chess"]}]}),
            ("open_nodes", {"names": ["Bob"]})]


@pytest.mark.parametrize("name", ["time", "filesystem", "memory"])
def test_mirror_record_learn_eval_against_the_real_server(name: str, tmp_path: Path) -> None:
    root = os.path.realpath(tmp_path / "sandbox")
    Path(root).mkdir()
    server = {"time": time_server(), "filesystem": filesystem_server(root), "memory": memory_server()}[name]
    env = {"MEMORY_FILE_PATH": str(Path(root) / "memory.jsonl")}
    spec, trace, report = tmp_path / f"{name}.yaml", tmp_path / f"{name}.jsonl", tmp_path / "report"

    mirrored = run_cli("mirror", "--out", str(spec), "--", *server, env=env)
    assert mirrored.returncode == 0, mirrored.stderr

    calls = scripted_calls(name, root)

    async def agent() -> None:
        proxy = recorder(trace, server, "--session", f"{name}-test", "--replace", f"{root}=/sandbox", **env)
        async with Client(proxy, mode="legacy") as client:
            for tool, arguments in calls:
                await client.call_tool(tool, arguments)

    anyio.run(agent)
    records = read_traces([trace])
    assert [r.tool for r in records] == [tool for tool, _ in calls]
    traced = {r.tool for r in records}
    if name != "time":
        # Keep the CPU test short: the model reads only the tools the session used (a user may prune too).
        document = yaml.safe_load(spec.read_text())
        document["tools"] = [t for t in document["tools"] if t["name"] in traced]
        spec.write_text(yaml.safe_dump(document, sort_keys=False))

    learned = run_cli("learn", str(trace), "--spec", str(spec))
    assert learned.returncode == 0, learned.stderr
    assert all(load_catalog([spec]).tools[tool].examples for tool in traced)

    evaluated = run_cli("eval", str(trace), "--spec", str(spec), "--report", str(report), *FAST)
    assert evaluated.returncode == 0, evaluated.stderr
    assert evaluated.stdout.startswith("### closed loop") and "━" not in evaluated.stdout  # progress: stderr
    # stderr is a pipe here, not a terminal: one plain line per step, as a log file would show it.
    progress = [line for line in evaluated.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 2 * len(records) and progress[-1].startswith(f"[{2 * len(records)}/")
    summary = json.loads((report / "fidelity.json").read_text())
    assert summary["meta"]["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert set(summary["modes"]) == {"closed", "forced"}
    for mode in ("closed", "forced"):
        block = summary["modes"][mode]
        assert set(block["tools"]) == traced
        assert block["overall"]["steps"] == len(records)
        for metric in summary["metrics"]:
            value = block["overall"][metric]
            assert value is None or 0.0 <= value <= 100.0
        # Every successful simulated answer passed the outputSchema check before it was returned.
        assert block["overall"]["schema_valid"] in (100.0, None)
        assert block["overall"]["error_agreement"] is not None
    steps = [(s["mode"], s["step"]) for s in summary["steps"]]
    assert steps == [(m, r.step) for m in ("closed", "forced") for r in records]
    assert (report / "fidelity.png").read_bytes()[:4] == b"\x89PNG"
    assert "| **overall** |" in (report / "fidelity.md").read_text()


@pytest.fixture(scope="module")
def time_simulator(model_path: Path) -> Simulator:
    engine = LlamaEngine(model_path, n_ctx=4096, n_threads=1)
    return Simulator(load_catalog([TRACES / "time.yaml"]), engine,
                     SimOptions(max_tokens=96, expose_prompt=True), sources=[RealResults()])


def prompt_of(simulator: Simulator, session: str, tool: str, arguments: dict[str, Any]) -> str:
    result = simulator.simulate(tool, arguments, session)
    messages = result.meta["mcp-sim/simulation"]["prompt"]
    return "\n".join(m["content"] for m in messages[1:])  # the history and the call, not the system


def test_teacher_forcing_puts_the_real_observations_into_the_history(time_simulator: Simulator) -> None:
    first, second = read_traces([TRACES / "time.jsonl"])[:2]
    real_datetime = first.structured["datetime"]
    responder = SimulatorResponder(time_simulator)

    responder.observe("forced", first)
    forced = prompt_of(time_simulator, "forced", second.tool, second.arguments)
    assert real_datetime in forced

    closed_answer = responder.respond("closed", first)
    closed = prompt_of(time_simulator, "closed", second.tool, second.arguments)
    assert not closed_answer.is_error, closed_answer.text  # only answers that passed the checks are kept
    assert closed_answer.text in closed  # closed loop: the simulator's own earlier answer
    assert real_datetime not in closed_answer.text  # the model cannot know the recorded instant...
    assert real_datetime not in closed  # ...so the closed loop's history holds no trace of it


def test_eval_with_the_llm_judge_reports_the_five_dimensions(tmp_path: Path) -> None:
    evaluated = run_cli("eval", str(TRACES / "time.jsonl"), "--spec", str(TRACES / "time.yaml"), "--judge",
                        "--mode", "forced", "--max-steps", "2", "--report", str(tmp_path), *FAST)
    assert evaluated.returncode == 0, evaluated.stderr
    summary = json.loads((tmp_path / "fidelity.json").read_text())
    judged = ["judge_format", "judge_factuality", "judge_consistency", "judge_realism", "judge_quality"]
    assert summary["metrics"][-5:] == judged
    assert summary["meta"]["judge"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert list(summary["modes"]) == ["forced"] and len(summary["steps"]) == 2
    for step in summary["steps"]:
        assert set(step["judge"]) == {"format", "factuality", "consistency", "realism", "quality"}
        assert all(0.0 <= v <= 1.0 and (v * 4).is_integer() for v in step["judge"].values())
    assert "| factuality |" in evaluated.stdout


def test_eval_progress_is_plain_lines_when_stderr_is_not_a_terminal() -> None:
    stream = io.StringIO()  # not a terminal, like a log file or a pipe
    step = StepResult("closed", "s-1", 2, "read_text_file", Observation("a"), Observation("a"),
                      score_step(Observation("a"), Observation("a")), 1.25)
    with _progress(3, stream) as advance:
        advance(step)
        assert stream.getvalue() == "[1/3] s-1 closed read_text_file step 2: 100 (1.2 s)\n"  # at once
        advance(step)
    assert stream.getvalue().splitlines()[-1].startswith("[2/3] ")
