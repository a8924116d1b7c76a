"""A text answer that echoes the prompt is caught and tried again, then answered in the shape of the
nearest example, and _meta says so. Measured on real data: no real answer of the benchmark's text tools
reads as an echo, and the default model's recorded echoes (docs/fidelity/after) are caught. An answer
copied from another tool (its example, or its answer earlier in the session) is caught too, and no real
answer, with its real session before it, reads as copied."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml

from mcp_sim.core.echoes import borrowed_from, echo_of
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.rehearsal.traces import read_traces
from tests.scripted import ScriptedEngine

REPO = Path(__file__).resolve().parent.parent
FIDELITY = REPO / "tool_specs" / "fidelity"
RECORDED = REPO / "docs" / "fidelity" / "after" / "parts"
def model_git(folder: Path) -> Path:
    """The git spec as the model answers it: without its repository (op: vcs answers these tools from state),
    but for git_create_branch, which keeps a record effect on a `branches` collection."""
    document = yaml.safe_load((FIDELITY / "git.yaml").read_text())
    for tool in document["tools"]:
        tool["x-sim"].pop("state", None)
        if tool["name"] == "git_create_branch":
            tool["x-sim"]["state"] = {"collection": "branches", "op": "create", "key": "name",
                                      "argument": "branch_name"}
    spec = folder / "git.yaml"
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    return spec


ECHO = ("The tool does not have any way to modify the output of a command. It is only able to execute "
        "commands, and it does not have any ability to change the output.")


def test_no_real_text_answer_reads_as_an_echo() -> None:
    checked = 0
    for spec in sorted(FIDELITY.glob("*.yaml")):
        tools = load_catalog([spec]).tools
        for records in (spec.with_suffix(".jsonl"), spec.with_name(f"{spec.stem}.train.jsonl")):
            for record in read_traces([records]):
                tool = tools[record.tool]
                if tool.output_schema is None:  # judged without the examples that would excuse it
                    assert echo_of(record.text, dataclasses.replace(tool, examples=[])) is None, record.text
                    checked += 1
    assert checked >= 90


def _others(tool_name: str, tools: dict, history: list[tuple[str, str, dict]]) -> list[tuple[str, str, dict]]:
    """What model_answer compares an answer with: the other tools' examples and this session's answers."""
    return [(other.name, str(example.result), example.arguments) for other in tools.values()
            if other.name != tool_name for example in other.examples if not example.is_error] + [
        turn for turn in history if turn[0] != tool_name]


def test_no_real_text_answer_reads_as_copied_from_another_tool() -> None:
    checked = 0
    for spec in sorted(FIDELITY.glob("*.yaml")):
        tools = load_catalog([spec]).tools
        for records in (spec.with_suffix(".jsonl"), spec.with_name(f"{spec.stem}.train.jsonl")):
            sessions: dict[str, list[tuple[str, str, dict]]] = {}
            for record in read_traces([records]):
                history = sessions.setdefault(record.session, [])
                tool = tools[record.tool]
                if tool.output_schema is None:
                    copied = borrowed_from(record.text, record.arguments, tool.examples,
                                           _others(tool.name, tools, history))
                    assert copied is None, (spec.stem, record.tool, copied, record.text)
                    checked += 1
                history.append((record.tool, record.text, record.arguments))
    assert checked >= 170


def test_the_default_models_recorded_copies_are_caught() -> None:
    """docs/fidelity/after-text-json: the git session where git_checkout and git_branch answered with
    git_create_branch's words, and the everything server's get-sum answering like another tool."""
    git = load_catalog([FIDELITY / "git.yaml"]).tools
    created = "Created branch 'feature-login' from 'main'"
    branch = {"repo_path": "/sandbox/repo", "branch_name": "feature-login"}
    history = [("git_create_branch", created, branch)]
    for name in ("git_checkout", "git_branch"):
        copied = borrowed_from(created, branch, git[name].examples, _others(name, git, history))
        assert copied is not None and "git_create_branch" in copied, name
    # The same words with another branch put in are still a copy; the tool's own answer is not.
    other = {"repo_path": "/sandbox/repo", "branch_name": "hotfix"}
    assert borrowed_from("Created branch 'hotfix' from 'main'", other, git["git_checkout"].examples,
                         _others("git_checkout", git, history))
    assert borrowed_from(created, branch, git["git_create_branch"].examples,
                         _others("git_create_branch", git, [])) is None
    assert borrowed_from("Switched to branch 'feature-login'", branch, git["git_checkout"].examples,
                         _others("git_checkout", git, history)) is None
    # A chatty answer to a person, not the tool's output (recorded on every git_* call of a session).
    assert echo_of("What would you add to the example above?", git["git_status"])
    assert echo_of("Would you like me to stage the changes too?", git["git_status"])
    assert echo_of("Here's the output:\n```\nOn branch main\n```", git["git_status"])


def test_the_default_models_recorded_echoes_are_caught() -> None:
    git = load_catalog([FIDELITY / "git.yaml"]).tools
    recorded = [step for step in json.loads((RECORDED / "git.both" / "fidelity.json").read_text())["steps"]
                if step["simulated"] and "does not have any way" in step["simulated"]]
    assert len(recorded) >= 10
    for step in recorded:
        assert echo_of(step["simulated"], git[step["tool"]]) is not None
    sqlite = load_catalog([FIDELITY / "sqlite.yaml"]).tools
    # The issue's own examples, and a tool's description copied back.
    assert echo_of('The world description says that the table "customers" does not exist.', sqlite["read_query"])
    assert echo_of('The "git_commit" command is used to add a new commit', git["git_commit"])
    description = git["git_log"].description or ""
    assert "copies the tool's definition" in (echo_of(f"Sure. {description}", git["git_log"]) or "")


def test_an_echo_is_tried_again_then_answered_from_the_nearest_example(tmp_path: Path) -> None:
    catalog = load_catalog([model_git(tmp_path)])
    status = catalog.tools["git_status"]
    assert status.output_schema is None and status.examples
    engine = ScriptedEngine(ECHO, "On branch main\nnothing to commit, working tree clean")
    simulator = Simulator(catalog, engine, SimOptions(attempts=3))
    retried = simulator.simulate("git_status", {"repo_path": "/repo"}, world="A")
    assert retried.text == "On branch main\nnothing to commit, working tree clean"
    assert retried.meta[META_KEY]["attempts"] == 2 and "echoed_prompt" not in retried.meta[META_KEY]

    engine.enqueue(ECHO, ECHO, ECHO)
    fallback = simulator.simulate("git_status", {"repo_path": "/repo"}, world="B")
    meta = fallback.meta[META_KEY]
    assert meta["attempts"] == 3 and meta["answered_from"] == "nearest example"
    assert "repeats the prompt's words" in meta["echoed_prompt"]
    assert fallback.text == str(status.examples[0].result) and not fallback.is_error

    # The nearest example's answer, with this call's arguments where the example's own stood.
    missing = catalog.tools["git_checkout"].examples[0]
    assert missing.result == "Error executing tool git_checkout: Ref 'nope' did not resolve to an object"
    engine.enqueue(ECHO, ECHO, ECHO)
    checked_out = simulator.simulate("git_checkout", {"repo_path": "/repo", "branch_name": "feature-login"},
                                     world="C")
    assert checked_out.meta[META_KEY]["answered_from"] == "nearest example" and checked_out.is_error
    assert checked_out.text == "Error executing tool git_checkout: Ref 'feature-login' did not resolve to an object"
    created = simulator.simulate("git_create_branch", {"repo_path": "/repo", "branch_name": "feature-login"},
                                 world="D")  # answered by the world's state, not the model
    assert created.text == "Created branch 'feature-login' from 'main'"
    assert created.meta[META_KEY]["source"] == "state"

    # A checkout answered with the branch creation's words, just after it in the same world: tried again.
    branch = {"repo_path": "/repo", "branch_name": "feature-login"}
    engine.enqueue(created.text, "Switched to branch 'feature-login'")
    checkout = simulator.simulate("git_checkout", branch, world="D")
    assert checkout.text == "Switched to branch 'feature-login'"
    assert checkout.meta[META_KEY]["attempts"] == 2


def test_a_text_tool_whose_examples_share_fixed_words_answers_in_them_without_the_model(tmp_path: Path) -> None:
    spec = tmp_path / "echo.yaml"
    spec.write_text(yaml.safe_dump({"tools": [{
        "name": "echo", "description": "Echoes back the input string",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        "x-sim": {"examples": [{"arguments": {"message": "hello there"}, "result": "Echo: hello there"}]}}]}))
    engine = ScriptedEngine("the model's words")
    simulator = Simulator(load_catalog([spec]), engine, SimOptions())
    answered = simulator.simulate("echo", {"message": "rehearse me"}, world="T")
    assert answered.text == "Echo: rehearse me" and answered.meta[META_KEY]["source"] == "template"
    assert engine.requests == []
    # Every call of the tool, in every world: the words are the server's, only the argument changes.
    assert simulator.simulate("echo", {"message": "a\nb"}, world="U").text == "Echo: a\nb"


def test_a_write_whose_examples_all_confirm_alike_confirms_so_and_a_read_does_not(tmp_path: Path) -> None:
    git = model_git(tmp_path)
    simulator = Simulator(load_catalog([git]), ScriptedEngine("the model's words"), SimOptions())
    staged = simulator.simulate("git_add", {"repo_path": "/repo", "files": ["app.py"]}, world="W")
    assert staged.text == "Files staged successfully" and staged.meta[META_KEY]["source"] == "template"
    # A read's one example is data that happened to be so, not words it always says; a commit's has a hash.
    spec = tmp_path / "weather.yaml"
    spec.write_text(yaml.safe_dump({"tools": [{
        "name": "get_weather", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "x-sim": {"examples": [{"arguments": {"city": "Oslo"}, "result": "Sunny"}]}}]}))
    engine = ScriptedEngine("Rain")
    simulator = Simulator(load_catalog([spec, git]), engine, SimOptions())
    assert simulator.simulate("get_weather", {"city": "Lima"}, world="W").text == "Rain"
    engine.enqueue("Changes committed successfully with hash 0123abc")
    committed = simulator.simulate("git_commit", {"repo_path": "/repo", "message": "x"}, world="W")
    assert committed.meta[META_KEY]["source"] == "model"
