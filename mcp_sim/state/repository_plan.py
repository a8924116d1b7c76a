"""Plan one call of a repository tool (`op: vcs`): run its command on the world's repository, and answer in
the server's words when its examples show them (state.repository_text), else leave the words to the model
with the repository in its note. The repository is stored whole after every call that succeeds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp_sim.state.layout import Layout
from mcp_sim.state.live import LiveData
from mcp_sim.state.plan import StateChange, StatePlan
from mcp_sim.state.repository import Repository, UnknownRef
from mcp_sim.state.repository_text import Voice, branches, diff, fill, learn_answer, log, show, status, text_arguments

# The argument names each part of a command goes by, in the order they are tried.
PATH_NAMES = ("files", "paths", "file", "path", "pathspec")
MESSAGE_NAMES = ("message", "msg", "commit_message")
COUNT_NAMES = ("max_count", "limit", "count", "n", "number")
REVISION_NAMES = ("revision", "rev", "ref", "commit", "sha")
BRANCH_NAMES = ("branch_name", "branch", "name")
BASE_NAMES = ("base_branch", "base", "start_point", "from_branch")
TARGET_NAMES = ("target", "ref", "base", "branch")
# git's own words for a switch, where the examples show none.
SWITCHED = "Switched to branch '{}'"


@dataclass
class RepositoryPlan(StatePlan):
    after: dict[str, Any] | None = None  # the repository after the call (None: a failure changes nothing)
    command: str = ""


def plan_repository(layout: Layout, live: LiveData, tool: str, arguments: dict[str, Any], voice: Voice,
                    output_schema: dict[str, Any] | None, world: str) -> RepositoryPlan:
    collection, command = layout.effect.collection, layout.effect.command or ""
    stored = live.data.get(collection) if isinstance(live.data, dict) else None
    repository = Repository.from_json(stored if stored is not None else voice.seed.to_json())
    step = RepositoryPlan(layout, command=command)
    try:
        said = _run(repository, command, arguments, voice, world)
    except UnknownRef as missing:
        failure = fill(voice.missing_ref, {"tool": tool, "ref": missing.ref}) if voice.missing_ref else None
        step.note = f"The repository has no branch or commit {missing.ref!r}: the call fails."
        if failure is not None and output_schema is None:
            step.answer, step.is_error, step.complete = failure, True, True
        return step
    step.after = repository.to_json()
    if said is not None and output_schema is None:
        step.answer, step.complete = said, True
    else:
        step.note = f"The world's repository after this call (JSON): {json.dumps(step.after, ensure_ascii=False)}"
    return step


def commit_repository(step: RepositoryPlan, live: LiveData, text: str, is_error: bool) -> StateChange | None:
    """Store the repository after the call, with what its answer TEXT says of it (learn_answer)."""
    if step.after is None or is_error:
        return None
    repository = Repository.from_json(step.after)
    learn_answer(repository, step.command, text)
    after = repository.to_json()
    collection = step.layout.effect.collection
    before = live.data.get(collection) if isinstance(live.data, dict) else None
    if before == after:
        return None
    live.replace(collection, after)
    return StateChange(collection, f"vcs {step.command}", None, before, after)


def _run(repository: Repository, command: str, arguments: dict[str, Any], voice: Voice, world: str) -> str | None:
    """Apply COMMAND; the answer in the server's words, or None when they are not known."""
    prefix = voice.prefixes.get(command, "")
    confirmed = voice.confirmations.get(command)
    if command == "status":
        return status(repository, prefix)
    if command == "add":
        repository.add(_paths(_argument(arguments, PATH_NAMES)))
        return confirmed
    if command == "reset":
        repository.reset()
        return confirmed
    if command == "commit":
        message = _argument(arguments, MESSAGE_NAMES)
        made = repository.commit(str(message or ""), None, None, world)
        return fill(confirmed, {**text_arguments(arguments), "hash": made["hash"]}) if confirmed else None
    if command == "log":
        count = _argument(arguments, COUNT_NAMES)
        history = repository.history()
        return log(history[:count] if isinstance(count, int) and count > 0 else history, prefix, voice.log_labels)
    if command == "show":
        return show(repository.resolve(str(_argument(arguments, REVISION_NAMES) or "HEAD")))
    if command == "create_branch":
        name, base = _argument(arguments, BRANCH_NAMES), _argument(arguments, BASE_NAMES)
        repository.create_branch(str(name), base if isinstance(base, str) and base else None)
        values = {**text_arguments(arguments), "base": base if isinstance(base, str) and base else repository.branch}
        return fill(confirmed, values) if confirmed else None
    if command == "checkout":
        name = str(_argument(arguments, BRANCH_NAMES))
        repository.checkout(name)
        return fill(confirmed, text_arguments(arguments)) if confirmed else SWITCHED.format(name)
    if command == "branches":
        return branches(repository) if arguments.get("branch_type", "local") in ("local", "all") else None
    return _diff(repository, command, arguments, prefix)


def _diff(repository: Repository, command: str, arguments: dict[str, Any], prefix: str) -> str | None:
    if command == "diff_staged":
        return diff([(name, how) for how, name in repository.staged()], prefix)
    if command == "diff_unstaged":
        return diff([(name, "modified") for name in repository.unstaged()], prefix)
    if command == "diff":
        target = _argument(arguments, TARGET_NAMES)
        return diff([(name, "modified") for name in repository.differing(str(target or "HEAD"))], prefix)
    return None


def _argument(arguments: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((arguments[name] for name in names if arguments.get(name) is not None), None)


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value] if isinstance(value, list) else []
