"""Text that is JSON (x-sim.text_json): learned from a real server's recorded answers (the task manager, which
answers `JSON.stringify(result, null, 2)` with no outputSchema), loaded as a structured answer, and printed
back as the server prints it: text only, in its layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mcp_sim.base.result import SimulationResult
from mcp_sim.cli import cli
from mcp_sim.core.specs import SpecError, load_catalog, validation_error
from mcp_sim.core.text_json import TextJson, as_printed, layout_of
from mcp_sim.fidelity.learn_text_json import infer_text_json
from mcp_sim.rehearsal.traces import TraceRecord, read_traces
from tests.conftest import REPO, mcp_sim_command, subprocess_env

FIDELITY = REPO / "tool_specs" / "fidelity"
TRAIN = FIDELITY / "taskmanager.train.jsonl"


def record(tool: str, text: str, step: int = 1, is_error: bool = False) -> TraceRecord:
    return TraceRecord("s", step, tool, {}, {"content": [{"type": "text", "text": text}], "isError": is_error},
                       is_error)


def mirrored(tmp_path: Path) -> Path:
    """The task manager's spec as `mirror` wrote it, without what learn added."""
    document = yaml.safe_load((FIDELITY / "taskmanager.yaml").read_text())
    for tool in document["tools"]:
        for learned in ("examples", "text_json", "rules"):
            tool.get("x-sim", {}).pop(learned, None)
        if tool.get("x-sim") == {}:
            del tool["x-sim"]
    spec = tmp_path / "taskmanager.yaml"
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    return spec


def test_the_layout_is_the_one_that_prints_every_answer_back_byte_for_byte() -> None:
    value = {"status": "ok", "tasks": [{"id": "t1"}], "empty": []}
    assert layout_of([json.dumps(value, indent=2)]) == (2, (",", ": "))
    assert layout_of([json.dumps(value, indent=4)]) == (4, (",", ": "))
    assert layout_of([json.dumps(value, separators=(",", ":"))]) == (None, (",", ":"))  # JavaScript, one line
    assert layout_of([json.dumps(value)]) == (None, (", ", ": "))  # Python's default
    for layout in ((2, (",", ": ")), (None, (",", ":"))):
        assert TextJson({}, *layout).render(value) == json.dumps(value, indent=layout[0], separators=layout[1])


def test_only_tools_whose_every_answer_is_a_json_object_are_learned_as_json_text() -> None:
    pretty = json.dumps({"status": "planned", "requestId": "req-1", "totalTasks": 2}, indent=2)
    other = json.dumps({"status": "error", "message": "Request not found"}, indent=2)
    learned = infer_text_json([record("t", pretty), record("t", other, 2), record("t", "No such id", 3, True)])
    assert learned is not None and learned.indent == 2
    assert learned.schema["required"] == ["status"]  # the one key every answer has
    assert set(learned.schema["properties"]) == {"status", "requestId", "totalTasks", "message"}
    assert "$schema" not in learned.schema
    assert infer_text_json([record("t", pretty), record("t", "Done.", 2)]) is None  # prose once: text it is
    assert infer_text_json([record("t", "[1, 2]")]) is None  # an array is not an answer object
    assert infer_text_json([record("t", "No such id", 1, True)]) is None  # nothing but failures


def test_learn_writes_text_json_from_the_real_servers_answers(tmp_path: Path) -> None:
    spec = mirrored(tmp_path)
    result = CliRunner().invoke(cli, ["learn", str(TRAIN), "--spec", str(spec)])
    assert result.exit_code == 0, result.output
    assert "request_planning answers JSON text (indent 2" in result.output
    shipped = yaml.safe_load((FIDELITY / "taskmanager.yaml").read_text())
    assert yaml.safe_load(spec.read_text()) == shipped  # the shipped spec is learn's own, unedited
    tools = load_catalog([spec]).tools
    planning = tools["request_planning"]
    assert planning.text_json is not None and planning.output_schema == planning.text_json.schema
    assert "outputSchema" not in planning.definition()  # tools/list advertises what the server does
    # The examples are the server's own text in the spec, and objects that fit the schema once loaded.
    document = yaml.safe_load(spec.read_text())
    written = next(t for t in document["tools"] if t["name"] == "request_planning")["x-sim"]["examples"][0]
    assert isinstance(written["result"], str) and written["result"].startswith("{\n  \"status\"")
    assert isinstance(planning.examples[0].result, dict)
    assert validation_error(planning.examples[0].result, planning.output_schema) is None
    for record_ in read_traces([FIDELITY / "taskmanager.jsonl"]):  # the eval answers fit the learned shapes
        tool = tools[record_.tool]
        if tool.text_json is not None and not record_.is_error:
            parsed: Any = json.loads(record_.text)
            assert tool.text_json.render(parsed) == record_.text


def test_a_structured_answer_reaches_the_client_as_the_servers_text() -> None:
    text_json = TextJson({"type": "object"}, 2, (",", ": "))
    answer = SimulationResult('{"status": "ok"}', {"status": "ok"}, observation='{"status": "ok"}')
    printed = as_printed(answer, text_json)
    assert printed.structured is None and printed.text == '{\n  "status": "ok"\n}'
    assert printed.observation == answer.observation  # the world's history keeps the answer as it was
    failure = SimulationResult("Task not found", is_error=True)
    assert as_printed(failure, text_json) is failure
    assert as_printed(answer, None) is answer


@pytest.mark.parametrize(("text_json", "problem"), [
    ({"indent": 2}, "schema: must be a JSON Schema of an object"),
    ({"schema": {"type": "object"}, "indent": "two"}, "indent: must be a number of spaces"),
    ({"schema": {"type": "object"}, "layout": 2}, "unknown field(s) layout"),
    ({"schema": {"type": "object"}, "separators": [","]}, "separators: must be two strings"),
])
def test_a_bad_text_json_is_a_clear_error(tmp_path: Path, text_json: dict[str, Any], problem: str) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({"tools": [{"name": "t", "inputSchema": {"type": "object"},
                                               "x-sim": {"text_json": text_json}}]}))
    with pytest.raises(SpecError, match="x-sim/text_json"):
        load_catalog([spec])
    try:
        load_catalog([spec])
    except SpecError as exc:
        assert problem in str(exc)


def test_text_json_is_for_tools_without_an_output_schema(tmp_path: Path) -> None:
    spec = tmp_path / "both.yaml"
    spec.write_text(yaml.safe_dump({"tools": [{"name": "t", "inputSchema": {"type": "object"},
                                               "outputSchema": {"type": "object"},
                                               "x-sim": {"text_json": {"schema": {"type": "object"}}}}]}))
    with pytest.raises(SpecError, match="declares an outputSchema"):
        load_catalog([spec])


def test_the_model_answers_a_json_text_tool_in_the_servers_layout_without_structured_content() -> None:
    import subprocess

    done = subprocess.run(mcp_sim_command("call", str(FIDELITY / "taskmanager.yaml"), "--tool", "request_planning",
                                          "--args", json.dumps({"originalRequest": "Paint the fence", "tasks": [
                                              {"title": "Buy paint", "description": "Two litres of white"}]}),
                                          "--max-tokens", "256"),
                          env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    result = json.loads(done.stdout)
    assert "structuredContent" not in result, result  # the real server sends none
    if result.get("isError"):
        pytest.fail(f"the model's answer broke the learned schema: {result}")
    text = result["content"][0]["text"]
    answer = json.loads(text)
    tool = load_catalog([FIDELITY / "taskmanager.yaml"]).tools["request_planning"]
    assert validation_error(answer, tool.output_schema) is None  # under the grammar of the learned shape
    assert text == json.dumps(answer, indent=2, ensure_ascii=False)  # printed as JSON.stringify(_, null, 2)
    assert result["_meta"]["mcp-sim/simulation"]["source"] in ("model", "state", "rules")
