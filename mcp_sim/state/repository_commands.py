"""Which tools of a server are git commands: `git_status`, `git_commit`, `git_create_branch` (or `status`,
`commit` ... on a server of git tools). A server is a repository's only when its names show the commands
that make one (status, add, commit and log, three of them at least); then each tool so named gets
`x-sim.state: {collection: repository, op: vcs, command: ...}`."""

from __future__ import annotations

from collections.abc import Iterable

from mcp_sim.state.naming import words

COLLECTION = "repository"
# A tool's name (its words after a leading "git") -> the command it runs.
NAMES = {"status": "status", "add": "add", "stage": "add", "reset": "reset", "unstage": "reset",
         "commit": "commit", "log": "log", "history": "log", "show": "show", "create_branch": "create_branch",
         "branch_create": "create_branch", "checkout": "checkout", "switch": "checkout", "switch_branch": "checkout",
         "branch": "branches", "branches": "branches", "list_branches": "branches", "diff": "diff",
         "diff_staged": "diff_staged", "diff_cached": "diff_staged", "diff_unstaged": "diff_unstaged"}
# The commands that say a server keeps a repository, and how many of them its names must show.
CORE = ("status", "add", "commit", "log")
ENOUGH = 3


def command(name: str) -> str | None:
    parts = words(name)
    if parts[:1] == ["git"]:
        parts = parts[1:]
    return NAMES.get("_".join(parts))


def repository_commands(names: Iterable[str]) -> dict[str, str]:
    """Tool name -> command, for a server whose names make a repository's; else empty."""
    found = {name: found for name in names if (found := command(name)) is not None}
    return found if len(set(CORE) & set(found.values())) >= ENOUGH else {}


def effect(command_name: str) -> dict[str, str]:
    """The `x-sim.state` a repository tool is given."""
    return {"collection": COLLECTION, "op": "vcs", "command": command_name}
