"""A repository's answers in git's own words, and in the server's around them.

git prints its status, branch list and diffs the same way under any server; what a server adds is learned
from its tool's examples: the line it puts before git's output ("Repository status:"), how it lays out a
log ("Commit: <hash>" / "Author:" / "Message:" blocks under "Commit history:"), the words that confirm a
write ("Changes committed successfully with hash <hash>"), and how it fails on a ref it cannot find. The
examples also seed the repository (`seed`): the tree the first status shows, the commits a log shows that
no example call made, the branches a branch list shows that no example call created.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_sim.state.effect import REPOSITORY_WRITES
from mcp_sim.state.repository import PathState, Repository

_MARK = "\x00"
_PLACE = re.compile(f"{_MARK}([^{_MARK}]+){_MARK}")
_HASH = re.compile(r"\b[0-9a-f]{7,40}\b")
_ON_BRANCH = re.compile(r"^On branch (\S+)$", re.MULTILINE)
_LABELED = re.compile(r"^([A-Z][A-Za-z ]*): ?(.*)$")
# The labels of a log block that carry each field of a commit (the first label carries its hash).
AUTHOR_LABELS = ("author",)
DATE_LABELS = ("date",)
MESSAGE_LABELS = ("message", "subject")
# Values shorter than this are too likely to occur by chance in the words around them.
MIN_VALUE_CHARS = 3


@dataclass(frozen=True)
class Case:
    """One example of a repository tool: the command it was, its arguments, its answer."""

    tool: str
    command: str
    arguments: dict[str, Any]
    text: str
    is_error: bool


@dataclass
class Voice:
    """What a repository server's examples teach about its answers."""

    seed: Repository = field(default_factory=Repository)
    prefixes: dict[str, str] = field(default_factory=dict)  # command -> the words before git's output
    log_labels: tuple[str, ...] | None = None  # the log's block labels, the hash's first
    confirmations: dict[str, str] = field(default_factory=dict)  # command -> its success words, with places
    missing_ref: str | None = None  # the failure on a ref the repository lacks, with {tool} and {ref} places


def learn_voice(cases: Sequence[Case]) -> Voice:
    voice = Voice()
    made = {value for case in cases if case.command in ("commit", "create_branch") and not case.is_error
            for value in text_arguments(case.arguments).values()}
    shown = next(((case, found) for case in cases if case.command == "status" and not case.is_error
                  if (found := _ON_BRANCH.search(case.text)) is not None), None)
    if shown is not None:
        case, found = shown
        voice.prefixes["status"] = case.text[:found.start()]
        voice.seed = seed_status(case.text)
    for case in cases:
        if case.command.startswith("diff") and not case.is_error and "diff --git" in case.text:
            voice.prefixes.setdefault(case.command, case.text[:case.text.index("diff --git")])
    logs = [parsed for case in cases if case.command == "log" and not case.is_error
            if (parsed := parse_log(case.text)) is not None]
    if logs:
        voice.prefixes["log"], voice.log_labels = logs[0][0], logs[0][1]
        older = max(([c for c in commits if c["message"] not in made] for _, _, commits in logs), key=len)
        _seed_history(voice.seed, older)
    for case in cases:
        if case.command == "branches" and not case.is_error:
            _, names = parse_branches(case.text)
            for name in names:
                if name not in made:
                    voice.seed.branches.setdefault(name, voice.seed.branches.get(voice.seed.branch))
    voice.confirmations = _confirmations(cases, voice.seed.branch)
    voice.missing_ref = next((words for case in cases if case.is_error
                              if (words := _missing_ref(case)) is not None), None)
    return voice


def seed_status(text: str) -> Repository:
    """The repository a status answer shows: its branch and the paths it lists."""
    found = _ON_BRANCH.search(text)
    branch = found.group(1) if found else "main"
    repository = Repository(branch, {branch: None})
    section = None
    for line in text.splitlines():
        if line.endswith(":") and not line.startswith("\t"):
            section = line[:-1]
        elif line.startswith("\t") and section is not None:
            how, _, name = line[1:].partition(":")
            name = name.strip() if name else how.strip()
            if section == "Changes to be committed":
                repository.paths[name] = PathState(tracked=how.strip() != "new file", staged=True)
            elif section == "Changes not staged for commit":
                flags = repository.paths.setdefault(name, PathState(tracked=True))
                flags.changed = True
            elif section == "Untracked files":
                repository.paths[name] = PathState()
    return repository


def learn_answer(repository: Repository, command: str, text: str) -> None:
    """What an answer says of the repository, where it came from elsewhere (a recording, the real server
    under teacher forcing, the model): a status's branch and paths, a commit's hash, a log's hashes. An
    answer the repository wrote itself says nothing new, so this changes nothing then."""
    if command == "status" and _ON_BRANCH.search(text):
        shown = seed_status(text)
        for name, flags in list(repository.paths.items()):
            if name in shown.paths:
                continue
            if flags.tracked or flags.staged:  # not listed: committed and unchanged
                repository.paths[name] = PathState(tracked=True)
            else:
                del repository.paths[name]
        for name, flags in shown.paths.items():
            known = repository.paths.get(name)
            repository.paths[name] = PathState(flags.tracked or bool(known and known.tracked), flags.staged,
                                               flags.changed)
        repository.branches.setdefault(shown.branch, repository.branches.get(repository.branch))
        repository.branch = shown.branch
    elif command == "commit" and repository.commits and (hashes := _HASH.findall(text)):
        repository.rename(repository.commits[-1]["hash"], hashes[0])
    elif command == "log" and (parsed := parse_log(text)) is not None:
        for ours, theirs in zip(repository.history(), parsed[2], strict=False):
            if ours.get("message") != theirs.get("message"):
                break
            repository.rename(ours["hash"], theirs["hash"])


def parse_log(text: str) -> tuple[str, tuple[str, ...], list[dict[str, Any]]] | None:
    """A log laid out as labeled blocks: the words before them, the labels, and the commits, newest first."""
    lines = text.split("\n")
    start = next((index for index, line in enumerate(lines)
                  if (match := _LABELED.match(line)) and _HASH.fullmatch(match.group(2))), None)
    if start is None:
        return None
    first = _LABELED.match(lines[start]).group(1)  # type: ignore[union-attr]
    labels: list[str] = []
    commits: list[dict[str, Any]] = []
    blank: list[int] = []  # per commit, the empty lines after its block
    for line in lines[start:]:
        match = _LABELED.match(line)
        if match and match.group(1) == first:
            commits.append({"hash": match.group(2)})
            blank.append(0)
        if match and commits:
            label, value = match.groups()
            if len(commits) == 1 and label not in labels:
                labels.append(label)
            commits[-1].setdefault(_field(label, first), value)
        elif not line and commits:
            blank[-1] += 1
    if not commits or not all("message" in commit for commit in commits):
        return None
    # One empty line parts two blocks (and the text's last newline makes one more); any other is the end
    # of a message that ends in a newline, as one `git commit -m` made does.
    for index, commit in enumerate(commits):
        commit["message"] += "\n" * max(blank[index] - 1, 0)
    return "\n".join(lines[:start]) + ("\n" if start else ""), tuple(labels), commits


def parse_branches(text: str) -> tuple[str | None, list[str]]:
    """git's branch list: the current branch (starred) and every name."""
    current, names = None, []
    for line in text.splitlines():
        if line.startswith("* "):
            current = line[2:].strip()
            names.append(current)
        elif line.startswith("  ") and line.strip():
            names.append(line.strip())
    return current, names


def status(repository: Repository, prefix: str = "") -> str:
    """`git status`, long format, as git prints it."""
    parts = [f"On branch {repository.branch}"]
    if repository.staged():
        parts.append("Changes to be committed:\n  (use \"git restore --staged <file>...\" to unstage)\n"
                     + "\n".join(f"\t{how + ':':<12}{name}" for how, name in repository.staged()) + "\n")
    if repository.unstaged():
        parts.append("Changes not staged for commit:\n  (use \"git add <file>...\" to update what will be committed)\n"
                     "  (use \"git restore <file>...\" to discard changes in working directory)\n"
                     + "\n".join(f"\tmodified:   {name}" for name in repository.unstaged()) + "\n")
    if repository.untracked():
        parts.append("Untracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n"
                     + "\n".join(f"\t{name}" for name in repository.untracked()) + "\n")
    if repository.staged():
        footer = ""
    elif repository.unstaged():
        footer = "no changes added to commit (use \"git add\" and/or \"git commit -a\")"
    elif repository.untracked():
        footer = "nothing added to commit but untracked files present (use \"git add\" to track)"
    else:
        footer = "nothing to commit, working tree clean"
    return prefix + "\n".join([*parts, footer] if footer else parts).rstrip("\n")


def log(commits: Iterable[dict[str, Any]], prefix: str = "", labels: tuple[str, ...] | None = None) -> str:
    """The commits, newest first, in the examples' blocks (or git's own layout)."""
    if labels is None:
        return prefix + "\n".join(show(commit, files=False) for commit in commits)
    first = labels[0]
    blocks = ["\n".join(f"{label}: {commit.get(_field(label, first)) or ''}" for label in labels) + "\n"
              for commit in commits]
    return prefix + "\n".join(blocks)


def show(commit: dict[str, Any], files: bool = True) -> str:
    """`git show` of a commit: its header and message, then the files it touched (their lines the world
    never saw)."""
    text = (f"commit {commit['hash']}\nAuthor: {commit.get('author') or ''}\nDate:   {commit.get('date') or ''}\n\n"
            f"    {commit.get('message', '')}\n")
    if files and commit.get("files"):
        text += "\n" + diff([(name, "modified") for name in commit["files"]])
    return text


def diff(paths: Iterable[tuple[str, str]], prefix: str = "") -> str:
    """The head of each path's diff (how: "new file" or "modified")."""
    heads = []
    for name, how in paths:
        if how == "new file":
            heads.append(f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}")
        else:
            heads.append(f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}")
    return prefix + "\n".join(heads)


def branches(repository: Repository) -> str:
    return "\n".join(("* " if name == repository.branch else "  ") + name for name in sorted(repository.branches))


def text_arguments(arguments: dict[str, Any]) -> dict[str, str]:
    """The arguments that are text: the values a confirmation or a failure may show."""
    return {name: value for name, value in arguments.items() if isinstance(value, str)}


def fill(template: str, values: dict[str, Any]) -> str | None:
    """TEMPLATE with each place filled from VALUES; None when one is missing."""
    missing = [name for name in _PLACE.findall(template) if not isinstance(values.get(name), str)]
    return None if missing else _PLACE.sub(lambda match: values[match.group(1)], template)


def _field(label: str, first: str) -> str:
    lowered = label.lower()
    if label == first:
        return "hash"
    if lowered in AUTHOR_LABELS:
        return "author"
    if lowered in DATE_LABELS:
        return "date"
    return "message" if lowered in MESSAGE_LABELS else lowered


def _seed_history(repository: Repository, newest_first: list[dict[str, Any]]) -> None:
    parent = None
    for commit in reversed(newest_first):
        repository.commits.append({**commit, "parent": parent, "files": []})
        parent = commit["hash"]
    repository.branches[repository.branch] = parent


def _confirmations(cases: Sequence[Case], base: str) -> dict[str, str]:
    """Per write command, the words every success example agrees on, with the call's values marked."""
    found: dict[str, set[str]] = {}
    for case in cases:
        if case.is_error or case.command not in REPOSITORY_WRITES:
            continue
        values = text_arguments(case.arguments)
        hashes = _HASH.findall(case.text)
        found.setdefault(case.command, set()).add(_marked(case.text, {**values, "base": base,
                                                                       **({"hash": hashes[0]} if hashes else {})}))
    return {command: texts.pop() for command, texts in found.items() if len(texts) == 1}


def _missing_ref(case: Case) -> str | None:
    refs = {name: value for name, value in text_arguments(case.arguments).items() if f"'{value}'" in case.text}
    if len(refs) != 1:
        return None
    marked = _marked(case.text, {"ref": next(iter(refs.values())), "tool": case.tool})
    return marked if f"{_MARK}ref{_MARK}" in marked else None


def _marked(text: str, values: dict[str, str]) -> str:
    # Longest first: a branch named "main" must not cut into "maintenance".
    for name, value in sorted(values.items(), key=lambda item: -len(item[1])):
        if len(value) >= MIN_VALUE_CHARS and _MARK not in value:
            text = text.replace(value, f"{_MARK}{name}{_MARK}")
    return text
