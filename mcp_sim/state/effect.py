"""`x-sim.state`: how a tool touches its world's live state, read from the spec as plain data.

A tool declares the collection of `world.data` it works on and the operation (create, read, list, update,
delete, or none); everything else has a default worked out from the tool's schemas (mcp_sim.state.layout).
Parsing needs nothing of the runtime that applies an effect: it only checks the shape and reports problems
with pointers, like the rest of the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OPS = ("create", "read", "next", "list", "update", "delete", "move", "sql", "vcs", "none")
NEW_KEYS = ("pattern", "uuid", "int")
DIALECTS = ("sqlite", "duckdb")  # the SQL engines of op: sql (state.sql)
# The git commands of op: vcs (state.repository), and those that change the repository.
COMMANDS = ("status", "add", "reset", "commit", "log", "show", "create_branch", "checkout", "branches", "diff",
            "diff_staged", "diff_unstaged")
REPOSITORY_WRITES = ("add", "reset", "commit", "create_branch", "checkout")
# Each field and what it must be: "text" a string, "pointer" a JSON pointer ("" or "/..."), "map" a mapping
# of names, "values" a mapping of anything.
FIELDS = {"collection": "text", "op": "text", "key": "text", "argument": "text", "new_key": "text",
          "at": "pointer", "total": "pointer", "found": "pointer", "text": "text", "to": "text",
          "sql": "text", "readonly": "flag", "dialect": "text", "fields": "map",
          "filters": "map", "query": "text", "prefix": "text", "limit": "text", "cursor": "text",
          "values": "values", "set": "values", "fresh": "names", "command": "text"}


@dataclass(frozen=True)
class StateEffect:
    """One tool's effect; `None` fields are worked out from the schemas when the tool is served."""

    collection: str
    op: str
    key: str = "id"
    # The argument that names the record (read, update, delete, move; on create it makes the call a put).
    argument: str | None = None
    # move: the argument that names the record's new key (a file's destination, a key's new name).
    to: str | None = None
    new_key: str = "pattern"
    # JSON pointers into the output: where the record (or, for list, the array of records) sits, where a
    # count of matches goes, where a found flag goes.
    at: str | None = None
    total: str | None = None
    found: str | None = None
    # Tools without an outputSchema: the record field whose value is a read's whole answer.
    text: str | None = None
    # argument -> record field written by create and update (None: arguments named like record fields).
    fields: dict[str, str] | None = None
    # list: argument -> field for exact matches (None: arguments named like fields); the argument searched
    # as a substring of every string field; the argument matched as a prefix of the key; paging.
    filters: dict[str, str] | None = None
    query: str | None = None
    prefix: str | None = None
    limit: str | None = None
    cursor: str | None = None
    # Fields a create or update writes besides the arguments (status: open, done: true).
    values: dict[str, Any] = field(default_factory=dict)
    # Output pointer -> value on success (deleted: true).
    set: dict[str, Any] = field(default_factory=dict)
    # sql: a fixed statement with {argument} places, run instead of the statement argument
    # (`PRAGMA table_info({table_name})`); whether the tool only reads (None: a read_/list_ name says so).
    sql: str | None = None
    readonly: bool | None = None
    # sql: the engine that runs the statements, as the real server's (sqlite, or duckdb for DuckDB and
    # Postgres-flavoured servers); `mirror` writes it from the server's name, description and examples.
    dialect: str = "sqlite"
    # Fields an update writes anew, never kept from before (a restart's pid): the model writes them.
    fresh: tuple[str, ...] = ()
    # vcs: the git command the tool runs on the world's repository (status, commit, log ...).
    command: str | None = None
    # Worked out by mcp-sim from the tool's name rather than declared in the spec.
    inferred: bool = False

    @property
    def writes(self) -> bool:
        return self.op in ("create", "update", "delete", "move", "sql") or \
            (self.op == "vcs" and self.command in REPOSITORY_WRITES)


def parse_effect(raw: Any, where: str, problems: list[str]) -> StateEffect | None:
    """`x-sim.state`: a mapping, or the word `none` for a tool that touches nothing."""
    if raw == "none":
        return StateEffect("", "none")
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping like {{collection: tickets, op: create}} or the word none")
        return None
    before = len(problems)
    for key in sorted(set(raw) - set(FIELDS)):
        problems.append(f"{where}/{key}: unknown field (allowed: {', '.join(FIELDS)})")
    for key, kind in FIELDS.items():
        if key in raw:
            _check_field(raw[key], kind, f"{where}/{key}", problems)
    op = raw.get("op")
    if op not in OPS:
        problems.append(f"{where}/op: must be one of {', '.join(OPS)}, got {op!r}")
    if op != "none" and not isinstance(raw.get("collection"), str):
        problems.append(f"{where}/collection: name the key of world.data that holds this tool's records")
    if raw.get("dialect", "sqlite") not in DIALECTS:
        problems.append(f"{where}/dialect: must be one of {', '.join(DIALECTS)}, got {raw.get('dialect')!r}")
    if op == "vcs" and raw.get("command") not in COMMANDS:
        problems.append(f"{where}/command: op vcs runs one of {', '.join(COMMANDS)}, got {raw.get('command')!r}")
    if raw.get("new_key", "pattern") not in NEW_KEYS:
        problems.append(f"{where}/new_key: must be one of {', '.join(NEW_KEYS)}")
    if len(problems) > before:
        return None
    fields = {key: value for key, value in raw.items() if value is not None}
    if "fresh" in fields:
        fields["fresh"] = tuple(fields["fresh"])
    return StateEffect(**fields)


def _check_field(value: Any, kind: str, where: str, problems: list[str]) -> None:
    if kind == "text" and not isinstance(value, str):
        problems.append(f"{where}: must be text")
    elif kind == "pointer" and not (isinstance(value, str) and (value == "" or value.startswith("/"))):
        problems.append(f"{where}: must be a JSON pointer into the output, like /ticket (or \"\" for the whole)")
    elif kind == "map" and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
        problems.append(f"{where}: must map argument names to record field names")
    elif kind == "flag" and not isinstance(value, bool):
        problems.append(f"{where}: must be true or false")
    elif kind == "values" and not isinstance(value, dict):
        problems.append(f"{where}: must be a mapping")
    elif kind == "names" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        problems.append(f"{where}: must be a list of record field names")
