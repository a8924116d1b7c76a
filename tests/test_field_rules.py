"""Field rules: what a real tool computes (a count, a copy, a growing list) is learned from its traces, kept
only when it explains every example, declared or corrected in x-sim.rules, shown by check, and pinned in
each answer. The real sequential-thinking traces (tool_specs/fidelity) are the proof: rules learned from
the train session reproduce every answer of the eval sessions, which learn never saw."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mcp_sim.base.errors import SpecError
from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.rehearsal.traces import read_traces
from mcp_sim.state.field_rules import FieldRule, Past, learn_rules, rule_pins
from tests.scripted import ScriptedEngine

FIDELITY = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"
SERVERS = ("duckdb", "filesystem", "git", "memory", "redis", "sequential-thinking", "sqlite", "taskmanager", "time")
THINK = "sequentialthinking"


def sessions(path: Path) -> list[list[Past]]:
    grouped: dict[str, list[Past]] = {}
    for record in sorted(read_traces([path]), key=lambda r: (r.session, r.step)):
        answer = record.structured if not record.is_error and isinstance(record.structured, dict) else None
        grouped.setdefault(record.session, []).append(Past(record.tool, record.arguments, answer))
    return list(grouped.values())


def thinking_tool() -> dict[str, Any]:
    document = yaml.safe_load((FIDELITY / "sequential-thinking.yaml").read_text())
    tool: dict[str, Any] = document["tools"][0]
    return tool


def test_rules_learned_from_the_train_session_reproduce_every_eval_answer() -> None:
    tool = thinking_tool()
    rules = learn_rules(THINK, tool["inputSchema"], tool["outputSchema"],
                        sessions(FIDELITY / "sequential-thinking.train.jsonl"))
    assert {rule.pointer: rule.to_spec() for rule in rules} == {
        "/thoughtNumber": {"copy": "thoughtNumber"}, "/totalThoughts": {"copy": "totalThoughts"},
        "/nextThoughtNeeded": {"copy": "nextThoughtNeeded"}, "/branches": {"grows": "branchId"},
        "/thoughtHistoryLength": {"count": "tool"}}
    checked = 0
    for session in sessions(FIDELITY / "sequential-thinking.jsonl"):
        for index, call in enumerate(session):
            assert rule_pins(rules, THINK, call.arguments, session[:index], tool["outputSchema"]) == {
                f"/{name}": value for name, value in (call.answer or {}).items()}
            checked += 1
    assert checked == 21  # two branches, a revision and thoughts past the first total among them


def test_a_rule_is_kept_only_when_it_explains_every_example() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    inputs = {"type": "object", "properties": {"x": {"type": "integer"}}}
    counted = [[Past("t", {"x": 7}, {"n": 1}), Past("t", {"x": 7}, {"n": 2}), Past("t", {"x": 7}, {"n": 3})]]
    assert [r.to_spec() for r in learn_rules("t", inputs, schema, counted)] == [{"count": "tool"}]
    # One answer off the count: no rule explains n, and the model keeps writing it.
    broken = [[*counted[0][:2], Past("t", {"x": 7}, {"n": 5})]]
    assert learn_rules("t", inputs, schema, broken) == []
    # A step of 10 from 100; calls of another tool between them do not count, failures neither.
    stepped = [[Past("t", {}, {"n": 100}), Past("u", {}, {"n": 1}), Past("t", {}, None), Past("t", {}, {"n": 110})]]
    assert [r.to_spec() for r in learn_rules("t", inputs, schema, stepped)] == [{"step": 10, "start": 100}]
    # Two equal values are chance, three a constant.
    assert learn_rules("t", inputs, schema, [[Past("t", {}, {"n": 4})] * 2]) == []
    assert [r.to_spec() for r in learn_rules("t", inputs, schema, [[Past("t", {}, {"n": 4})] * 3])] == [{"const": 4}]


def test_pins_that_the_schema_refuses_are_left_to_the_model() -> None:
    schema = {"type": "object", "properties": {"done": {"type": "boolean"}}}
    rules = [FieldRule("/done", "copy", argument="done")]
    assert rule_pins(rules, "t", {"done": True}, [], schema) == {"/done": True}
    assert rule_pins(rules, "t", {"done": "yes"}, [], schema) == {}  # an argument of type boolean|string
    assert rule_pins(rules, "t", {}, [], schema) == {}  # not given: nothing to copy


def test_check_shows_the_rules_and_a_bad_rule_says_what_to_write(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["check", str(FIDELITY / "sequential-thinking.yaml")])
    assert result.exit_code == 0, result.output
    assert "rule: thoughtHistoryLength = calls of this tool so far" in result.output
    assert "rule: branches = the branchId values given so far" in result.output
    document = yaml.safe_load((FIDELITY / "sequential-thinking.yaml").read_text())
    document["tools"][0]["x-sim"]["rules"] = {"thoughtHistoryLength": {"count": "session"},
                                              "branches": {"grows": "branch"}, "totalThoughts": {"add": 1}}
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(document))
    with pytest.raises(SpecError) as failed:
        load_catalog([spec])
    message = str(failed.value)
    assert "thoughtHistoryLength/count: must be tool or world, got 'session'" in message
    assert "branches: no argument 'branch' in the inputSchema" in message
    assert "totalThoughts: must be one of {copy: ARGUMENT}" in message
    document["tools"][0].pop("outputSchema")
    document["tools"][0]["x-sim"]["rules"] = {"thoughtNumber": {"copy": "thoughtNumber"}}
    spec.write_text(yaml.safe_dump(document))
    with pytest.raises(SpecError, match="rules fix fields of a structured answer; the tool has no outputSchema"):
        load_catalog([spec])


@pytest.mark.parametrize("server", SERVERS)
def test_the_fidelity_specs_are_what_learn_writes_from_their_train_traces(server: str, tmp_path: Path) -> None:
    spec = tmp_path / f"{server}.yaml"
    shutil.copy(FIDELITY / f"{server}.yaml", spec)
    result = CliRunner().invoke(cli, ["learn", str(FIDELITY / f"{server}.train.jsonl"), "--spec", str(spec),
                                      "--replace"])
    assert result.exit_code == 0, result.output
    assert spec.read_text() == (FIDELITY / f"{server}.yaml").read_text()


def test_a_fully_ruled_answer_needs_no_model() -> None:
    engine = ScriptedEngine()  # it has nothing to say: a model call would fail the test
    simulator = Simulator(load_catalog([FIDELITY / "sequential-thinking.yaml"]), engine, SimOptions())
    answers = []
    for number, branch in ((1, None), (2, "cache"), (3, None)):
        arguments: dict[str, Any] = {"thought": "t", "thoughtNumber": number, "totalThoughts": 3,
                                     "nextThoughtNeeded": number < 3}
        if branch:
            arguments |= {"branchFromThought": 1, "branchId": branch}
        result = simulator.simulate(THINK, arguments, world="W")
        assert not result.is_error and result.meta[META_KEY]["source"] == "rules"
        answers.append(result.structured)
    assert [a["thoughtHistoryLength"] for a in answers] == [1, 2, 3]
    assert [a["branches"] for a in answers] == [[], ["cache"], ["cache"]]
    # Another world counts from 1 again.
    other = simulator.simulate(THINK, {"thought": "t", "thoughtNumber": 1, "totalThoughts": 1,
                                       "nextThoughtNeeded": False}, world="other")
    assert json.loads(other.text)["thoughtHistoryLength"] == 1
    assert engine.requests == []
