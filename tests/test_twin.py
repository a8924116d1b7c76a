"""Every path the reference model (Qwen-AgentWorld-35B-A3B, qwen35moe) takes, run on real qwen35moe tensors.

The model is a tiny twin with random weights, written by tests/twin.py in a fraction of a second: Gated
DeltaNet and gated attention layers, mixture of experts, hybrid memory, Qwen's chat tokens. The tests assert
behaviour, not text quality: the published file's off-by-one is handled, answers fit the schema, recurrent
state resumes only from exact snapshots and gives the bytes a fresh process gives, slots, thinking budgets,
forks, worlds past their context, doctor's figures.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import llama_cpp
import pytest
import yaml
from click.testing import CliRunner

from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.llama.gguf import read_header
from mcp_sim.engines.llama.loading import is_recurrent
from mcp_sim.engines.llama.overrides import layer_count_fix
from tests.conftest import SPECS, subprocess_env
from tests.twin import LAYERS, THOUGHT, build_twin


def _ops_answered_by_the_model() -> Path:
    """ops.yaml with get_service_status left to the model (`x-sim.state: none`): these tests follow the
    model's own prompts, snapshots and turns, which a status read from the live state would skip."""
    document = yaml.safe_load((SPECS / "ops.yaml").read_text())
    for tool in document["tools"]:
        if tool["name"] == "get_service_status":
            tool["x-sim"]["state"] = "none"
    path = Path(tempfile.mkdtemp(prefix="twin-ops-")) / "ops.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


OPS = _ops_answered_by_the_model()
SERVICES = ("api", "web", "worker", "scheduler", "postgres")
# The reference model's settings: its native prompt, thinking on with a budget, greedy here for repeatability.
OPTIONS = SimOptions(temperature=0.0, max_tokens=96, attempts=1, prompt_style="agentworld", think=True,
                     think_budget=16)
STATUS_SCHEMA: dict[str, Any] = load_catalog([OPS]).tools["get_service_status"].output_schema or {}
CTX = 16384
HEALTH_SCHEMA = {"type": "object", "properties": {"healthy": {"type": "boolean"}}, "required": ["healthy"],
                 "additionalProperties": False}


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("twin")
    return {"good": build_twin(folder / "twin.gguf"),
            "defective": build_twin(folder / "twin-off-by-one.gguf", off_by_one=True)}


@pytest.fixture(scope="module")
def engine(twins: dict[str, Path]) -> Iterator[LlamaEngine]:
    """A one-slot engine on the defective file: every test that uses it also proves the detection."""
    engine = LlamaEngine(twins["defective"], n_ctx=CTX, n_threads=2, seed=0)
    engine.load()
    yield engine
    engine.close()


def simulate(simulator: Simulator, service: str, world: str) -> dict[str, Any]:
    result = simulator.simulate("get_service_status", {"service": service}, world=world)
    assert not result.is_error, result.text
    jsonschema.validate(result.structured, STATUS_SCHEMA)
    meta = dict(result.meta[META_KEY])
    meta["text"] = result.text
    return meta


def test_the_defect_is_found_in_the_files_own_tensor_list(twins: dict[str, Path]) -> None:
    assert layer_count_fix(read_header(twins["good"])) is None
    fix = layer_count_fix(read_header(twins["defective"]))
    assert fix is not None
    overrides, finding = fix
    assert overrides == {"qwen35moe.block_count": LAYERS}
    assert f"block_count is {LAYERS + 1}" in finding and f"no blk.{LAYERS}.* tensors" in finding


def test_both_files_load_and_the_defective_one_only_through_the_override(
        twins: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    # llama.cpp alone stops at the missing layer, as it does on the published file.
    with pytest.raises(ValueError):
        llama_cpp.Llama(model_path=str(twins["defective"]), n_ctx=256, verbose=False)
    for name, path in twins.items():
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mcp_sim.engines.llama"):
            engine = LlamaEngine(path, n_ctx=1024, n_threads=2)
            engine.load()
        try:
            assert is_recurrent(engine._model)
            notes = [r.getMessage() for r in caplog.records if "metadata overrides" in r.getMessage()]
            assert len(notes) == (1 if name == "defective" else 0), notes
            if notes:
                assert f"qwen35moe.block_count={LAYERS}" in notes[0]
        finally:
            engine.close()


def test_answers_are_schema_valid_and_thinking_stays_out_of_them(engine: LlamaEngine) -> None:
    simulator = Simulator(load_catalog([OPS]), engine, OPTIONS)
    for service in SERVICES:
        meta = simulate(simulator, service, world="valid")
        assert meta["reasoning_tokens"] == 2  # THOUGHT, then </think> by the model's own choice
        assert "<think>" not in meta["text"] and "</think>" not in meta["text"]


def test_a_think_budget_that_ends_the_thinking_early(engine: LlamaEngine) -> None:
    messages = [ChatMessage("system", "You simulate a tool."), ChatMessage("user", "Call get_service_status.")]
    for budget, reasoning_tokens in ((16, 2), (2, 2), (1, 1)):
        generation = engine.generate(GenerationRequest(
            messages=messages, max_tokens=64, json_schema=HEALTH_SCHEMA, schema_key="health", think=True,
            think_budget=budget, temperature=0.0))
        assert (generation.reasoning_tokens, generation.reasoning) == (reasoning_tokens, THOUGHT), budget
        jsonschema.validate(json.loads(generation.text), HEALTH_SCHEMA)
        assert "think>" not in generation.text


SESSION_SCRIPT = """
import json, sys
from pathlib import Path
from typing import Any
from tests.test_twin import run_sessions
print(json.dumps(run_sessions(Path(sys.argv[1]), cold=True)))
"""


def run_sessions(path: Path, cold: bool, engine: LlamaEngine | None = None) -> list[list[Any]]:
    """Three worlds called in turn; `cold`: every call from a full evaluation of its prompt (no state kept)."""
    engine = engine or LlamaEngine(path, n_ctx=CTX, n_threads=2, seed=0, state_cache_mb=0 if cold else 256)
    simulator = Simulator(load_catalog([OPS]), engine, OPTIONS)
    answers = []
    for step in range(3):
        for world in ("red", "blue", "green"):
            if cold:
                engine.forget()
            meta = simulate(simulator, SERVICES[(step + len(world)) % 5], world)
            answers.append([world, meta["evaluated_tokens"], meta["prompt_tokens"], meta.get("forced_tokens", 0),
                            meta["text"]])
    return answers


def test_recurrent_state_resumes_from_exact_snapshots_and_gives_a_fresh_processs_bytes(
        twins: dict[str, Path]) -> None:
    warm_engine = LlamaEngine(twins["good"], n_ctx=CTX, n_threads=2, seed=0, state_cache_mb=256)
    try:
        warm = run_sessions(twins["good"], cold=False, engine=warm_engine)
        saved = set(warm_engine.states._entries)
    finally:
        warm_engine.close()
    done = subprocess.run([sys.executable, "-c", SESSION_SCRIPT, str(twins["good"])], env=subprocess_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    cold = json.loads(done.stdout.strip().splitlines()[-1])
    assert [text for *_, text in warm] == [text for *_, text in cold]
    # From the second round on each call reads only its world's last turn and itself, from a snapshot of the
    # end of its finished turns (exact prefixes only: hybrid state cannot be cut back).
    for _, evaluated, prompt, _, _ in warm[3:]:
        assert evaluated < prompt / 5, warm
    assert all(evaluated == prompt for _, evaluated, prompt, _, _ in cold)
    # The answers jumped over forced spans (a recurrent state only moves forward, as a jump does), and the
    # snapshots taken after them still give a fresh process's bytes.
    assert all(forced > 0 for *_, forced, _ in warm), warm
    assert {key.split("|")[0] for key in saved if key.startswith("turns:")} == {
        "turns:red", "turns:blue", "turns:green"}


def test_four_slots_decode_worlds_together(twins: dict[str, Path]) -> None:
    engine = LlamaEngine(twins["defective"], n_ctx=CTX, n_threads=2, seed=0, slots=4)
    simulator = Simulator(load_catalog([OPS]), engine, OPTIONS)
    results: dict[str, list[dict[str, Any]]] = {}
    failures: list[BaseException] = []

    def world(name: str) -> None:
        try:
            results[name] = [simulate(simulator, service, name) for service in SERVICES[:2]]
        except BaseException as exc:
            failures.append(exc)

    try:
        threads = [threading.Thread(target=world, args=(f"w{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not failures, failures
        assert sorted(results) == ["w0", "w1", "w2", "w3"]
        for _, second in results.values():
            assert second["evaluated_tokens"] < second["prompt_tokens"] / 5
        assert engine._decoder is not None and engine._decoder.recurrent
    finally:
        engine.close()


def test_a_forks_first_call_reads_only_what_no_snapshot_holds(engine: LlamaEngine) -> None:
    simulator = Simulator(load_catalog([OPS]), engine, OPTIONS)
    for service in SERVICES[:3]:
        simulate(simulator, service, "origin")
    simulator.worlds.fork("origin", "fork")
    fork = simulate(simulator, "postgres", "fork")
    origin = simulate(simulator, "postgres", "origin")
    # The fork resumes from its origin's snapshot: like the origin's own next call, it reads the last turn
    # and the new call, not the history.
    assert fork["evaluated_tokens"] <= origin["evaluated_tokens"] + 8, (fork, origin)
    assert fork["evaluated_tokens"] < fork["prompt_tokens"] / 5
    assert fork["text"] == origin["text"]


def test_a_world_past_its_context_drops_turns_and_reads_the_rest_again(twins: dict[str, Path],
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    small = LlamaEngine(twins["good"], n_ctx=5400, n_threads=2, seed=0, slots=2)
    cold = LlamaEngine(twins["good"], n_ctx=5400, n_threads=2, seed=0, state_cache_mb=0)
    simulator, reference = (Simulator(load_catalog([OPS]), e, OPTIONS) for e in (small, cold))
    try:
        with caplog.at_level(logging.INFO, logger="mcp_sim.engines.llama"):
            metas = []
            for index in range(8):
                metas.append(simulate(simulator, SERVICES[index % 5], "long"))
                cold.forget()
                expected = simulate(reference, SERVICES[index % 5], "long")
                assert metas[-1]["text"] == expected["text"], index
        dropped = [meta for meta in metas if meta["dropped_turns"]]
        assert dropped, [meta["prompt_tokens"] for meta in metas]
        assert not [r for r in caplog.records if "context shift" in r.getMessage()]  # never on this memory
        # The call that first drops turns reads the kept history again (no snapshot holds that prefix): more
        # than a call that resumes from its finished turns and reads one turn and itself.
        assert dropped[0]["evaluated_tokens"] > 1.5 * metas[1]["evaluated_tokens"], metas
    finally:
        small.close()
        cold.close()


def test_doctor_reports_the_detected_defect_and_its_override(twins: dict[str, Path]) -> None:
    result = CliRunner().invoke(cli, ["doctor", "--model", str(twins["defective"]), "--ctx", "8192"])
    assert result.exit_code == 0, result.output
    lines = dict(line.split(": ", 1) for line in result.output.splitlines() if ": " in line)
    assert f"block_count is {LAYERS + 1}" in lines["[ ok ] overrides"]
    assert f"loading with qwen35moe.block_count={LAYERS}" in lines["[ ok ] overrides"]
    good = CliRunner().invoke(cli, ["doctor", "--model", str(twins["good"]), "--ctx", "8192"])
    assert "[ ok ] overrides: none needed" in good.output
