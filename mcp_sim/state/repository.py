"""`op: vcs`: a version-control world. A git server's tools (status, add, commit, log, branch, checkout, show,
diff, reset) work on one repository held as plain data in `world.data.<collection>`: its branches, its
commits, and per path what the index and the working tree hold against the last commit.

The world never sees a file's content, only the names the calls and the examples give, so a path is three
flags (tracked by a commit, staged in the index, changed in the working tree) and a diff can name the
files it touches but not their lines. Nothing here runs git: these are the rules git follows, kept on data.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

HEAD = "HEAD"
_ANCESTOR = re.compile(r"^(.+?)~(\d+)$")  # HEAD~2, main~1
_HASH = re.compile(r"^[0-9a-f]{4,40}$")


class UnknownRef(Exception):
    """A branch, a commit or a revision the repository does not have."""

    def __init__(self, ref: str):
        super().__init__(ref)
        self.ref = ref


@dataclass
class PathState:
    tracked: bool = False  # the last commit has it
    staged: bool = False  # the index holds a change of it
    changed: bool = False  # the working tree differs from the index

    def to_json(self) -> dict[str, bool]:
        return {"tracked": self.tracked, "staged": self.staged, "changed": self.changed}


@dataclass
class Repository:
    branch: str = "main"
    branches: dict[str, str | None] = field(default_factory=dict)  # name -> its newest commit's hash
    commits: list[dict[str, Any]] = field(default_factory=list)  # hash, parent, message, author, date, files
    paths: dict[str, PathState] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Any) -> Repository:
        if not isinstance(raw, dict):
            return cls()
        paths = {str(name): PathState(**{k: bool(v) for k, v in flags.items() if k in ("tracked", "staged", "changed")})
                 for name, flags in (raw.get("paths") or {}).items() if isinstance(flags, dict)}
        branch = str(raw.get("branch") or "main")
        branches = {str(name): head for name, head in (raw.get("branches") or {}).items()}
        return cls(branch, branches or {branch: None}, [c for c in raw.get("commits") or [] if isinstance(c, dict)],
                   paths)

    def to_json(self) -> dict[str, Any]:
        return {"branch": self.branch, "branches": dict(self.branches), "commits": [dict(c) for c in self.commits],
                "paths": {name: flags.to_json() for name, flags in sorted(self.paths.items())}}

    # What the working tree and the index hold.
    def staged(self) -> list[tuple[str, str]]:
        """(how, path) of each staged change: "new file" or "modified"."""
        return [("modified" if flags.tracked else "new file", name)
                for name, flags in sorted(self.paths.items()) if flags.staged]

    def unstaged(self) -> list[str]:
        return [name for name, flags in sorted(self.paths.items()) if flags.tracked and flags.changed]

    def untracked(self) -> list[str]:
        return [name for name, flags in sorted(self.paths.items())
                if not flags.tracked and not flags.staged]

    # Writes.
    def add(self, names: list[str]) -> None:
        """Stage each path. A path the world has not seen is a new file: the caller knows its tree better."""
        for name in names:
            flags = self.paths.setdefault(name, PathState())
            if flags.changed or not flags.tracked:
                flags.staged, flags.changed = True, False

    def reset(self) -> None:
        """Unstage everything: a staged change stays in the working tree; a new file becomes untracked."""
        for flags in self.paths.values():
            if flags.staged:
                flags.staged, flags.changed = False, flags.tracked

    def commit(self, message: str, author: str | None, date: str | None, world: str) -> dict[str, Any]:
        """Record the index as a commit on the current branch. Its hash is a digest of what it holds, as
        git's is, so the same rehearsal gives the same hash."""
        files = [name for _, name in self.staged()]
        parent = self.branches.get(self.branch)
        digest = hashlib.sha1(f"{world}\0{parent}\0{message}\0{len(self.commits)}\0{files}".encode()).hexdigest()
        last = self.commits[-1] if self.commits else {}
        made = {"hash": digest, "parent": parent, "message": message, "author": author or last.get("author"),
                # The world has no clock (a rehearsal must repeat): a commit is as old as the history's newest.
                "date": date or last.get("date"), "files": files}
        self.commits.append(made)
        self.branches[self.branch] = digest
        for name in files:
            flags = self.paths[name]
            flags.tracked, flags.staged = True, False
        return made

    def create_branch(self, name: str, base: str | None = None) -> None:
        """A branch at BASE (a branch, a commit, HEAD~N; None: where the current branch is)."""
        if base is None or base in self.branches:
            self.branches[name] = self.branches.get(self.branch if base is None else base)
        else:
            self.branches[name] = self.resolve(base)["hash"]

    def checkout(self, name: str) -> None:
        if name not in self.branches:
            raise UnknownRef(name)
        self.branch = name

    def rename(self, old: str, new: str) -> None:
        """Give commit OLD the hash NEW (the one a real answer showed for it), wherever it is referred to."""
        for commit in self.commits:
            commit["hash"] = new if commit["hash"] == old else commit["hash"]
            commit["parent"] = new if commit.get("parent") == old else commit.get("parent")
        self.branches = {name: new if head == old else head for name, head in self.branches.items()}

    # Reads.
    def history(self, start: str | None = None) -> list[dict[str, Any]]:
        """The commits reachable from START (a commit's hash; None: the current branch), newest first."""
        by_hash = {commit["hash"]: commit for commit in self.commits}
        found: list[dict[str, Any]] = []
        at = self.branches.get(self.branch) if start is None else start
        while at is not None and at in by_hash and len(found) <= len(self.commits):
            found.append(by_hash[at])
            at = by_hash[at].get("parent")
        return found

    def resolve(self, revision: str) -> dict[str, Any]:
        """The commit REVISION names: HEAD, a branch, a hash or its prefix, each with an optional ~N."""
        ancestor = _ANCESTOR.match(revision)
        name, back = (ancestor.group(1), int(ancestor.group(2))) if ancestor else (revision, 0)
        if name == HEAD:
            start = self.branches.get(self.branch)
        elif name in self.branches:
            start = self.branches[name]
        else:
            start = next((c["hash"] for c in self.commits if _HASH.match(name) and c["hash"].startswith(name)), None)
        line = self.history(start) if start is not None else []
        if back >= len(line):
            raise UnknownRef(revision)
        return line[back]

    def differing(self, target: str) -> list[str]:
        """The paths the working tree differs in from TARGET: those committed on one side only, and those
        staged or changed since."""
        ours = self.history()
        theirs = {c["hash"] for c in self.history(self.resolve(target)["hash"])}
        committed = {name for commit in ours if commit["hash"] not in theirs for name in commit.get("files", [])}
        pending = {name for name, flags in self.paths.items() if flags.tracked and (flags.staged or flags.changed)}
        return sorted(committed | pending)
