"""`op: vcs`: a git server's tools on one repository held in the world. The repository follows git's rules
(checked against real git), its answers take the server's words learned from the examples, and a git
server that `mirror` or `learn` meets gets the effect without a hand edit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.fidelity.evaluate import RealResults, SimulatorResponder
from mcp_sim.fidelity.mirror import MirroredServer, spec_document
from mcp_sim.rehearsal.traces import TraceRecord
from mcp_sim.state.effect import parse_effect
from mcp_sim.state.repository import Repository, UnknownRef
from mcp_sim.state.repository_commands import repository_commands
from mcp_sim.state.repository_text import Case, learn_answer, learn_voice, parse_log, status
from tests.scripted import ScriptedEngine

FIDELITY = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"
GIT = FIDELITY / "git.yaml"
REPO = {"repo_path": "/sandbox/repo"}


def _git(folder: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "ada@example.com", "LC_ALL": "C", "HOME": str(folder), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=folder, env=env, check=True, capture_output=True,
                          text=True).stdout


def test_status_reads_as_real_git_prints_it_after_the_same_steps(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "README.md").write_text("# Demo\n")
    (tmp_path / "LICENSE").write_text("MIT\n")
    _git(tmp_path, "add", "README.md", "LICENSE")
    _git(tmp_path, "commit", "-q", "-m", "Initial commit")
    repository = Repository()
    repository.add(["README.md", "LICENSE"])
    repository.commit("Initial commit", "Ada", None, "w")
    assert status(repository) == _git(tmp_path, "status").rstrip("\n") == \
        "On branch main\nnothing to commit, working tree clean"

    (tmp_path / "README.md").write_text("# Demo\nMore.\n")
    (tmp_path / "notes.txt").write_text("notes\n")
    repository.paths["README.md"].changed = True
    repository.paths["notes.txt"] = type(repository.paths["LICENSE"])()
    assert status(repository) == _git(tmp_path, "status").rstrip("\n")  # unstaged and untracked

    _git(tmp_path, "add", "notes.txt")
    repository.add(["notes.txt"])
    assert status(repository) == _git(tmp_path, "status").rstrip("\n")  # staged beside unstaged

    _git(tmp_path, "add", "README.md")
    repository.add(["README.md"])
    _git(tmp_path, "reset", "-q")
    repository.reset()
    assert status(repository) == _git(tmp_path, "status").rstrip("\n")  # unstaged again, the new file untracked

    _git(tmp_path, "commit", "-q", "-am", "More")
    repository.add(["README.md"])
    repository.commit("More", None, None, "w")
    assert status(repository) == _git(tmp_path, "status").rstrip("\n")  # nothing but an untracked file

    (tmp_path / "LICENSE").write_text("MIT, 2026\n")
    repository.paths["LICENSE"].changed = True
    _git(tmp_path, "add", "LICENSE")
    repository.add(["LICENSE"])
    _git(tmp_path, "checkout", "-q", "-b", "docs")
    repository.create_branch("docs")
    repository.checkout("docs")
    assert status(repository) == _git(tmp_path, "status").rstrip("\n")


def test_commits_chain_and_refs_resolve() -> None:
    repository = Repository()
    repository.add(["a.txt"])
    first = repository.commit("one", "Ada", "today", "w")
    repository.paths["a.txt"].changed = True
    repository.add(["a.txt"])
    second = repository.commit("two", None, None, "w")
    assert second["parent"] == first["hash"] and second["files"] == ["a.txt"]
    assert (second["author"], second["date"]) == ("Ada", "today")  # the world has no clock: the newest's
    assert [c["message"] for c in repository.history()] == ["two", "one"]
    assert repository.resolve("HEAD") == second and repository.resolve("HEAD~1") == first
    assert repository.resolve(first["hash"][:7]) == first and repository.resolve("main~1") == first
    with pytest.raises(UnknownRef):
        repository.resolve("HEAD~2")
    with pytest.raises(UnknownRef):
        repository.checkout("nope")
    with pytest.raises(UnknownRef):
        repository.create_branch("x", "nope")
    # The same steps in the same world give the same hash, as git's content hashes do.
    again = Repository()
    again.add(["a.txt"])
    assert again.commit("one", "Ada", "today", "w")["hash"] == first["hash"]
    repository.create_branch("old", first["hash"][:8])
    assert repository.differing("old") == ["a.txt"]


def _cases() -> list[Case]:
    catalog = load_catalog([GIT])
    commands = repository_commands(catalog.tools)
    return [Case(name, commands[name], e.arguments, str(e.result), e.is_error)
            for name in commands for e in catalog.tools[name].examples]


def test_the_examples_teach_the_servers_words_and_seed_the_repository() -> None:
    voice = learn_voice(_cases())
    assert voice.prefixes["status"] == "Repository status:\n"
    assert voice.prefixes["log"] == "Commit history:\n"
    assert voice.log_labels == ("Commit", "Author", "Date", "Message")
    seed = voice.seed
    assert seed.branch == "main" and seed.unstaged() == ["setup.cfg"] and seed.untracked() == ["notes.txt"]
    # The log example shows one commit no example made: the seed's history. Its message ends in a newline
    # (the example's extra empty line), as git commit -m writes it.
    assert [(c["hash"][:7], c["message"]) for c in seed.history()] == [("644de74", "Initial commit\n")]
    assert "docs" not in seed.branches  # made by a create_branch example, not there before
    assert voice.confirmations["commit"] == "Changes committed successfully with hash \x00hash\x00"
    assert voice.confirmations["create_branch"] == "Created branch '\x00branch_name\x00' from '\x00base\x00'"
    assert voice.missing_ref == "Error executing tool \x00tool\x00: Ref '\x00ref\x00' did not resolve to an object"


@pytest.fixture()
def simulator() -> tuple[Simulator, ScriptedEngine]:
    engine = ScriptedEngine()
    return Simulator(load_catalog([GIT]), engine, SimOptions()), engine


def _call(simulator: Simulator, tool: str, world: str = "w", **arguments: Any) -> tuple[str, bool, str]:
    result = simulator.simulate(tool, {**REPO, **arguments}, world=world)
    assert result.meta is not None
    return result.text, result.is_error, result.meta[META_KEY]["source"]


def test_a_rehearsal_reads_what_it_wrote_without_the_model(simulator: tuple[Simulator, ScriptedEngine]) -> None:
    sim, engine = simulator
    assert _call(sim, "git_add", files=["notes.txt", "setup.cfg"]) == ("Files staged successfully", False, "state")
    text, _, _ = _call(sim, "git_status")
    assert text.startswith("Repository status:\nOn branch main\nChanges to be committed:")
    assert "\tnew file:   notes.txt" in text and "\tmodified:   setup.cfg" in text
    committed, is_error, source = _call(sim, "git_commit", message="Add the notes")
    made = committed.rsplit(" ", 1)[-1]
    assert committed == f"Changes committed successfully with hash {made}" and not is_error and source == "state"
    log, _, _ = _call(sim, "git_log", max_count=1)
    assert log == f"Commit history:\nCommit: {made}\nAuthor: Ada Dev\nDate: 2026-11-30 10:00:00+00:00\n" \
                  "Message: Add the notes\n"
    assert _call(sim, "git_show", revision=made[:7])[0].startswith(f"commit {made}\nAuthor: Ada Dev\n")
    assert _call(sim, "git_status")[0] == "Repository status:\nOn branch main\nnothing to commit, working tree clean"
    assert _call(sim, "git_create_branch", branch_name="feature") == \
        ("Created branch 'feature' from 'main'", False, "state")
    assert _call(sim, "git_checkout", branch_name="feature") == ("Switched to branch 'feature'", False, "state")
    assert _call(sim, "git_branch", branch_type="local")[0] == "* feature\n  main"
    assert _call(sim, "git_status")[0].startswith("Repository status:\nOn branch feature\n")
    # A ref the repository lacks fails in the server's own words, and changes nothing.
    assert _call(sim, "git_checkout", branch_name="nope") == (
        "Error executing tool git_checkout: Ref 'nope' did not resolve to an object", True, "state")
    assert _call(sim, "git_status")[0].startswith("Repository status:\nOn branch feature\n")
    # Another world starts from the seed.
    assert "On branch main\nChanges not staged" in _call(sim, "git_status", world="other")[0]
    assert engine.requests == []


def test_a_real_answer_teaches_the_world_what_it_could_not_know() -> None:
    """Teacher forcing (and replayed recordings) hand the world the real answers: a status shows the real
    tree, a commit its real hash, a log the real hashes of the history."""
    sim = Simulator(load_catalog([GIT]), ScriptedEngine(), SimOptions(), sources=[RealResults()])
    responder = SimulatorResponder(sim)
    real_status = ("Repository status:\nOn branch main\nChanges not staged for commit:\n"
                   "  (use \"git add <file>...\" to update what will be committed)\n"
                   "  (use \"git restore <file>...\" to discard changes in working directory)\n"
                   "\tmodified:   README.md\n\nno changes added to commit (use \"git add\" and/or \"git commit -a\")")
    steps = [("git_status", {}, real_status), ("git_add", {"files": ["README.md"]}, "Files staged successfully"),
             ("git_commit", {"message": "Describe"}, "Changes committed successfully with hash " + "ab12" * 10)]
    for step, (tool, arguments, text) in enumerate(steps, 1):
        responder.observe("s", TraceRecord("s", step, tool, {**REPO, **arguments},
                                           {"content": [{"type": "text", "text": text}]}, False))
    assert _call(sim, "git_status", world="s")[0] == \
        "Repository status:\nOn branch main\nnothing to commit, working tree clean"  # setup.cfg: not in the real tree
    assert _call(sim, "git_show", world="s", revision="HEAD")[0].startswith("commit " + "ab12" * 10)
    assert _call(sim, "git_log", world="s", max_count=1)[0].startswith("Commit history:\nCommit: " + "ab12" * 10)

    repository = Repository()
    repository.add(["a"])
    ours = repository.commit("Initial commit\n", None, None, "w")["hash"]
    learn_answer(repository, "log", "Commit history:\nCommit: " + "cd34" * 10 + "\nMessage: Initial commit\n\n")
    assert repository.history()[0]["hash"] == "cd34" * 10 != ours and repository.branches["main"] == "cd34" * 10


def test_parse_log_keeps_the_examples_layout() -> None:
    parsed = parse_log("History:\nCommit: " + "a" * 40 + "\nMessage: x\n\nCommit: " + "b" * 40 + "\nMessage: y\n")
    assert parsed is not None
    prefix, labels, commits = parsed
    assert (prefix, labels) == ("History:\n", ("Commit", "Message"))
    assert [(c["hash"][0], c["message"]) for c in commits] == [("a", "x"), ("b", "y")]
    assert parse_log("no commits here") is None


def test_only_a_server_whose_names_make_a_repository_gets_it() -> None:
    assert repository_commands(["git_status", "git_add", "git_commit", "git_log", "git_diff_staged"]) == {
        "git_status": "status", "git_add": "add", "git_commit": "commit", "git_log": "log",
        "git_diff_staged": "diff_staged"}
    assert repository_commands(["status", "add", "commit"]) == {"status": "status", "add": "add", "commit": "commit"}
    assert repository_commands(["get_status", "add_item", "list_items"]) == {}  # a to-do list, not a repository
    assert repository_commands(["status", "log", "list_items"]) == {}  # two commands do not make a repository
    problems: list[str] = []
    assert parse_effect({"collection": "repository", "op": "vcs", "command": "push"}, "tools/0/x-sim/state",
                        problems) is None
    assert problems == ["tools/0/x-sim/state/command: op vcs runs one of status, add, reset, commit, log, show, "
                        "create_branch, checkout, branches, diff, diff_staged, diff_unstaged, got 'push'"]


def test_mirror_gives_a_git_server_one_repository(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"repo_path": {"type": "string"}}}
    tools = [{"name": name, "description": name, "inputSchema": schema}
             for name in ("git_status", "git_add", "git_commit", "git_log", "git_create_branch")]
    document = spec_document(MirroredServer("mcp-git", "1.0", None, tools))
    effects = {tool["name"]: tool["x-sim"]["state"] for tool in document["tools"]}
    assert effects["git_create_branch"] == {"collection": "repository", "op": "vcs", "command": "create_branch"}
    assert {effect["op"] for effect in effects.values()} == {"vcs"}
    (tmp_path / "git.yaml").write_text(json.dumps(document))
    assert load_catalog([tmp_path / "git.yaml"]).tools["git_log"].spec_set is not None  # it loads as a spec
    other = spec_document(MirroredServer("todo", None, None, [{**tools[4], "name": "create_branch"}]))
    assert other["tools"][0].get("x-sim", {}).get("state", {}).get("op") != "vcs"


def test_the_eval_session_is_answered_from_the_repository() -> None:
    """The recorded eval sessions of the git server: every call but git_reset (no example shows its words)
    is answered by the repository, and the words that state decides are the real ones."""
    sim = Simulator(load_catalog([GIT]), ScriptedEngine(), SimOptions())
    sources, same = [], 0
    for line in (FIDELITY / "git.jsonl").read_text().splitlines():
        record = json.loads(line)
        result = sim.simulate(record["tool"], record["arguments"], world=record["session"])
        assert result.meta is not None
        sources.append((record["tool"], result.meta[META_KEY]["source"]))
        same += result.text == record["result"]["content"][0]["text"]
    assert {tool for tool, source in sources if source != "state"} == {"git_reset"}
    assert same >= 8
