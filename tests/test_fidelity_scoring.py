"""The scorer and the replay harness, proven honest on synthetic data and on the shipped real traces."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.fidelity.evaluate import RealResults, ReplayResponder, SimulatorResponder, StepResult, evaluate
from mcp_sim.fidelity.report import markdown, summarize, write_report
from mcp_sim.fidelity.scoring import (
    METRICS,
    Observation,
    aggregate,
    bootstrap_interval,
    score_step,
    structure_match,
    text_f1,
    value_match,
)
from mcp_sim.rehearsal.traces import TraceRecord, read_traces
from tests.fidelity_helpers import TRACES
from tests.scripted import ScriptedEngine

BENCHMARK = TRACES.parent / "fidelity"
BENCHMARK_SERVERS = sorted(p.stem for p in BENCHMARK.glob("*.yaml"))

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}, "count": {"type": "integer"},
                                            "done": {"type": "boolean"}, "note": {"type": "string"},
                                            "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["id", "count", "done"]}
REAL = {"id": "ord-42", "count": 10, "done": False, "note": "shipped to the main office", "tags": ["a", "b"]}


def observe(structured: dict[str, Any] | None = None, text: str = "", error: bool = False) -> Observation:
    return Observation(text, structured, error)


def test_identical_results_score_100_everywhere() -> None:
    scores = score_step(observe(REAL), observe(copy.deepcopy(REAL)), SCHEMA)
    assert (scores.schema_valid, scores.error_agreement, scores.structure, scores.value, scores.fidelity) == (
        1.0, 1.0, 1.0, 1.0, 1.0)


def test_one_changed_field_lowers_only_the_value_score() -> None:
    changed = {**REAL, "id": "ord-43"}
    scores = score_step(observe(REAL), observe(changed), SCHEMA)
    assert (scores.schema_valid, scores.error_agreement, scores.structure) == (1.0, 1.0, 1.0)
    leaves = 6  # id, count, done, note, tags[0], tags[1]
    assert scores.value == pytest.approx(1 - 1 / leaves)
    assert scores.fidelity == scores.value


def test_a_fixed_wrong_answer_scores_zero() -> None:
    wrong = {"id": "x", "count": 999, "done": True, "note": "zzz", "tags": []}
    scores = score_step(observe(REAL), observe(wrong), SCHEMA)
    assert scores.value == 0.0 and scores.fidelity == 0.0
    assert scores.schema_valid == 1.0  # well-formed, just wrong: only the value shows it


def test_error_disagreement_zeroes_content_scores() -> None:
    scores = score_step(observe(REAL), observe(text="Tool failed", error=True), SCHEMA)
    assert (scores.error_agreement, scores.structure, scores.value, scores.fidelity) == (0.0, 0.0, 0.0, 0.0)
    assert scores.schema_valid is None  # outputSchema governs successes only
    both = score_step(observe(text="ENOENT: no such file /a", error=True),
                      observe(text="Error: no such file /a", error=True), SCHEMA)
    assert both.error_agreement == 1.0 and both.structure is None
    assert 0 < both.value < 1 and both.fidelity == both.value  # the messages are compared by token F1


def test_schema_validity_fails_an_answer_a_client_would_reject() -> None:
    scores = score_step(observe(REAL), observe({**REAL, "count": "ten"}), SCHEMA)
    assert scores.schema_valid == 0.0 and scores.fidelity == 0.0
    assert scores.structure < 1.0  # a string where the real result has a number


def test_numbers_within_tolerance_and_exact_normalized_strings() -> None:
    assert value_match({"n": 100}, {"n": 109}) == 1.0
    assert value_match({"n": 100}, {"n": 111}) == 0.0
    assert value_match({"n": 100}, {"n": 111}, rel_tol=0.2) == 1.0
    assert value_match({"flag": True}, {"flag": 1}) == 0.0  # a boolean is not a number
    assert value_match({"id": "ABC-1"}, {"id": " abc-1 "}) == 1.0
    assert value_match({"id": "abc-1"}, {"id": "abc-2"}) == 0.0
    assert value_match({"items": []}, {"items": []}) == 1.0
    assert value_match({"items": []}, {"items": ["x"]}) == 0.0


def test_structure_checks_keys_types_and_array_lengths() -> None:
    assert structure_match({"a": 1, "b": "x"}, {"a": 2, "b": "y"}) == 1.0
    assert structure_match({"a": 1, "b": "x"}, {"a": 2}) == 0.5
    assert structure_match({"a": 1}, {"a": 1, "extra": 2}) == 0.5
    assert structure_match([1, 2, 3], [4, 5, 6]) == 1.0
    assert structure_match([1, 2, 3], [4, 5]) == pytest.approx(2 / 3)  # length differs, 2 items match
    assert structure_match({"a": 1}, {"a": 1.5}) == 1.0  # integers and floats are both numbers


def test_text_f1_counts_shared_tokens() -> None:
    assert text_f1("alpha beta", "alpha beta") == 1.0
    assert text_f1("alpha beta", "gamma") == 0.0
    assert text_f1("alpha beta gamma delta", "alpha beta") == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert text_f1("", "") == 1.0
    plain = score_step(observe(text="[FILE] notes.txt"), observe(text="[FILE] notes.txt\n[DIR] docs"))
    assert plain.structure is None and plain.value == pytest.approx(text_f1("[FILE] notes.txt",
                                                                            "[FILE] notes.txt\n[DIR] docs"))


def test_state_consistency_checks_values_written_earlier_and_read_back() -> None:
    written = [{"path": "/s/notes.txt", "content": "alpha\nbeta\n"}]
    real = observe({"content": "alpha\nbeta\n"})
    read_args = {"path": "/s/notes.txt"}
    assert score_step(real, observe({"content": "alpha\nbeta\n"}), None, written, read_args).state == 1.0
    assert score_step(real, observe({"content": "something else"}), None, written, read_args).state == 0.0
    # Nothing written earlier is read back, so state does not apply.
    unrelated = observe({"content": "ok"})
    assert score_step(unrelated, unrelated, None, written, read_args).state is None
    # The path is echoed by this very call, so reading it back is not state.
    echo = observe({"content": "wrote /s/notes.txt"})
    assert score_step(echo, observe({"content": "no"}), None, written[:1], read_args).state is None


def test_aggregate_averages_where_a_metric_applies() -> None:
    first = score_step(observe(REAL), observe(REAL), SCHEMA)
    second = score_step(observe(text="boom", error=True), observe(REAL), SCHEMA)
    summary = aggregate([first, second])
    assert summary["steps"] == 2
    assert summary["error_agreement"] == 50.0 and summary["fidelity"] == 50.0
    assert summary["schema_valid"] == 100.0  # both simulated answers are valid successes
    assert summary["state"] is None


# The harness, on the real traces shipped as the benchmark.

def shipped(name: str) -> tuple[list[TraceRecord], Any]:
    return read_traces([TRACES / f"{name}.jsonl"]), load_catalog([TRACES / f"{name}.yaml"]).tools


class FixedResponder:
    """Answers every call with the same wrong value, as a broken simulator would."""

    def respond(self, session_id: str, record: TraceRecord) -> Observation:
        return Observation('{"content": "wrong"}', {"content": "wrong"}, False)

    def observe(self, session_id: str, record: TraceRecord) -> None:
        pass


class OneFieldChanged(ReplayResponder):
    """The real answers, except one string leaf of every structured result is changed."""

    def respond(self, session_id: str, record: TraceRecord) -> Observation:
        real = super().respond(session_id, record)
        if real.structured is None:
            return real
        changed = copy.deepcopy(real.structured)
        _change_first_string(changed)
        return Observation(real.text, changed, real.is_error)


def _change_first_string(value: Any) -> bool:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, item in items:
        if isinstance(item, str):
            value[key] = "CHANGED"
            return True
        if _change_first_string(item):
            return True
    return False


@pytest.mark.parametrize("name", ["time", "filesystem", "memory"])
def test_replaying_the_real_results_scores_100(name: str) -> None:
    records, tools = shipped(name)
    results = evaluate(records, ReplayResponder(), tools)
    assert len(results) == 2 * len(records)
    summary = aggregate(r.scores for r in results)
    for metric in METRICS:
        assert summary[metric] in (100.0, None), metric
    assert summary["fidelity"] == 100.0 and summary["error_agreement"] == 100.0


@pytest.mark.parametrize("name", ["time", "filesystem", "memory"])
def test_a_fixed_wrong_answer_scores_near_zero_on_real_traces(name: str) -> None:
    records, tools = shipped(name)
    summary = aggregate(r.scores for r in evaluate(records, FixedResponder(), tools))
    assert summary["fidelity"] <= 5.0 and summary["value"] <= 5.0


def test_one_changed_field_lowers_exactly_the_value_score_on_real_traces() -> None:
    records, tools = shipped("memory")
    honest = aggregate(r.scores for r in evaluate(records, ReplayResponder(), tools))
    changed = aggregate(r.scores for r in evaluate(records, OneFieldChanged(), tools))
    assert changed["value"] < honest["value"] == 100.0
    assert changed["fidelity"] < 100.0
    for metric in ("schema_valid", "error_agreement", "structure", "state"):
        assert changed[metric] == honest[metric], metric


def test_reports_write_json_markdown_and_a_png_chart(tmp_path: Path) -> None:
    records, tools = shipped("time")
    results: list[StepResult] = evaluate(records, ReplayResponder(), tools)
    summary = summarize(results, {"model": "replay", "traces": ["time.jsonl"], "specs": ["time.yaml"]})
    assert set(summary["modes"]) == {"closed", "forced"}
    assert set(summary["modes"]["closed"]["tools"]) == {"get_current_time", "convert_time"}
    table = markdown(summary)
    assert "### closed loop" in table and "### teacher-forced" in table
    assert "| get_current_time | 3 | 100.0 | 100.0 |" in table
    paths = write_report(summary, tmp_path / "report")
    assert [p.name for p in paths] == ["fidelity.json", "fidelity.md", "fidelity.png"]
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[2].stat().st_size > 10_000
    assert "![chart](fidelity.png)" in paths[1].read_text()


def test_bootstrap_interval_brackets_the_mean_and_narrows_with_more_steps() -> None:
    assert bootstrap_interval([]) is None
    assert bootstrap_interval([0.5] * 10) == [50.0, 50.0]  # no spread, no width
    few = bootstrap_interval([1.0, 0.0, 1.0, 0.0])
    many = bootstrap_interval([1.0, 0.0] * 100)
    assert few is not None and many is not None
    assert few[0] < 50.0 < few[1] and many[0] < 50.0 < many[1]
    assert many[1] - many[0] < (few[1] - few[0]) / 3
    assert bootstrap_interval([1.0, 0.0, 1.0, 0.0]) == few  # a fixed seed: the same steps, the same interval


def test_the_benchmark_has_250_real_calls_from_10_servers_apart_from_its_train_sessions() -> None:
    records = read_traces([BENCHMARK / f"{name}.jsonl" for name in BENCHMARK_SERVERS])
    train = read_traces([BENCHMARK / f"{name}.train.jsonl" for name in BENCHMARK_SERVERS])
    assert len(records) >= 250 and len({r.server for r in records}) >= 10
    assert not {r.session for r in records} & {r.session for r in train}
    assert all("train" not in r.session for r in records)
    # Each spec learned only from its train session: no eval answer is an example, except the one fact
    # that is the same in every sandbox (the allowed directory).
    leaked = []
    for name in BENCHMARK_SERVERS:
        tools = load_catalog([BENCHMARK / f"{name}.yaml"]).tools
        for record in read_traces([BENCHMARK / f"{name}.jsonl"]):
            tool = tools[record.tool]
            answer = record.structured if record.structured is not None else record.text
            if tool.text_json is not None and not record.is_error:  # its examples are the objects the text holds
                answer = json.loads(record.text)
            if any(e.arguments == record.arguments and e.result == answer for e in tool.examples):
                leaked.append(record.tool)
    assert leaked == ["list_allowed_directories"]


def test_replaying_the_benchmark_scores_100_per_server_with_intervals() -> None:
    records = read_traces([BENCHMARK / f"{name}.jsonl" for name in BENCHMARK_SERVERS])
    tools = load_catalog([BENCHMARK / f"{name}.yaml" for name in BENCHMARK_SERVERS]).tools
    summary = summarize(evaluate(records, ReplayResponder(), tools), {"model": "replay"})
    servers = summary["modes"]["forced"]["servers"]
    assert len(servers) == len(BENCHMARK_SERVERS)
    for scores in [*servers.values(), summary["modes"]["closed"]["overall"]]:
        assert scores["fidelity"] == 100.0 and scores["ci95"]["fidelity"] == [100.0, 100.0]
    assert summary["modes"]["closed"]["overall"]["state"] == 100.0  # sessions that read back what they wrote
    table = markdown(summary)
    assert "Per server, closed loop: mean [bootstrap 95 % interval]" in table
    assert "| mcp-git | 25 | – | 100.0 [100.0, 100.0] |" in table


def test_a_written_report_summarizes_again_to_the_same_figures(tmp_path: Path) -> None:
    records, tools = shipped("memory")
    results = evaluate(records, OneFieldChanged(), tools)
    summary = summarize(results, {"model": "changed"})
    write_report(summary, tmp_path)
    steps = json.loads((tmp_path / "fidelity.json").read_text())["steps"]
    again = summarize([StepResult.from_json(step) for step in steps], {"model": "changed"})
    assert again["modes"] == summary["modes"]


def test_teacher_forcing_puts_the_real_results_into_the_live_state_too() -> None:
    """In forced mode the history holds the real earlier results; a read the live state answers must agree
    with them, not with what the simulator would have said (the model is never asked for those reads)."""
    bench = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"
    engine = ScriptedEngine()  # no answers: a model call would fail the step
    sim = Simulator(load_catalog([bench / "redis.yaml"]), engine, SimOptions(attempts=1), sources=[RealResults()])
    records = [r for r in read_traces([bench / "redis.jsonl"]) if r.session == "redis-eval-1"]
    steps = {step.step: step for step in evaluate(records, SimulatorResponder(sim), sim.catalog.tools, ["forced"])}
    assert steps[3].simulated.text == "Alice" and steps[3].scores.state == 1.0
    assert steps[9].simulated.text == "Alicia"  # the real second set, not the first
    assert steps[7].simulated.is_error  # the real delete removed it
