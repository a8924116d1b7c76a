"""Words in tool and field names: the verb and noun of `create_ticket`, plurals, and the names that
usually mean a search, a limit or a page."""

from __future__ import annotations

import re
from typing import Any

# Verbs that name an operation, longest first where one is a prefix of another.
VERBS = {
    "create": "create", "add": "create", "new": "create", "insert": "create", "post": "create",
    "write": "create", "put": "create", "save": "create", "store": "create", "upload": "create",
    "get": "read", "read": "read", "fetch": "read", "show": "read", "describe": "read", "retrieve": "read",
    "view": "read", "lookup": "read", "open": "read", "load": "read", "cat": "read",
    "list": "list", "search": "list", "find": "list", "query": "list", "browse": "list", "filter": "list",
    "update": "update", "set": "update", "edit": "update", "modify": "update", "patch": "update",
    "change": "update", "rename": "update", "complete": "update", "close": "update", "finish": "update",
    "assign": "update", "mark": "update", "approve": "update",
    "delete": "delete", "remove": "delete", "drop": "delete", "destroy": "delete", "erase": "delete",
    "unlink": "delete",
    "move": "move", "mv": "move", "relocate": "move",
}
# Argument and output field names that usually mean a search, a page size, a page, a key prefix; a found
# flag, a count of matches, the array of a list.
QUERY_NAMES = ("query", "q", "search", "keyword", "keywords", "term", "text", "pattern", "filter")
LIMIT_NAMES = ("limit", "max_results", "maxResults", "page_size", "pageSize", "per_page", "perPage", "max_count",
               "maxCount", "top", "size", "count")
CURSOR_NAMES = ("cursor", "page_token", "pageToken", "next_token", "nextToken", "after", "starting_after",
                "offset", "page")
PREFIX_NAMES = ("prefix", "path_prefix", "pathPrefix")
# Arguments that name one record when it has no `id`, in order of preference.
KEY_NAMES = ("key", "name", "path", "uri", "slug", "username", "email")
# A move's arguments: the record's key now, and the key it takes.
SOURCE_NAMES = ("source", "src", "from", "from_path", "old_path", "oldPath", "old_key", "old_name", "oldName")
DESTINATION_NAMES = ("destination", "dest", "to", "target", "to_path", "new_path", "newPath", "new_key",
                     "new_name", "newName")
# Arguments that carry an SQL statement, in order of preference.
STATEMENT_NAMES = ("query", "sql", "statement")
FOUND_NAMES = ("found", "exists")
TOTAL_NAMES = ("total", "total_count", "totalCount", "count")
LIST_NAMES = ("items", "results", "data", "records", "entries", "result")
# Words after a tool's noun that name an aspect or a state of the record, not another thing:
# `open_task_details`, `mark_task_done` and `approve_task_completion` are about tasks.
ASPECT_WORDS = ("details", "detail", "info", "information", "summary", "status", "completion", "done",
                "completed", "finished", "closed", "approved")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+")


def statement_argument(tool: dict[str, Any]) -> str | None:
    """The required argument of an MCP tool definition that carries a statement (query, sql, statement)."""
    schema = tool.get("inputSchema")
    required = (schema.get("required") if isinstance(schema, dict) else None) or []
    return next((name for name in required if name in STATEMENT_NAMES), None)


def words(name: str) -> list[str]:
    """`getTaskById`, `get_task_by_id` and `get-task-by-id` alike: ["get", "task", "by", "id"]."""
    return [w.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for w in _WORD.findall(part)]


def verb_and_noun(name: str) -> tuple[str, str] | None:
    """The operation a tool's name names and its noun (`get_customer` -> read, customer), or None."""
    parts = words(name)
    if len(parts) < 2 or parts[0] not in VERBS:
        return None
    op = VERBS[parts[0]]
    if "by" in parts[2:]:  # find_pet_by_id: one pet, named by its id
        noun = parts[parts.index("by", 2) - 1]
        return ("read" if op == "list" and singular(noun) == noun else op), noun
    nouns = parts[1:]
    while len(nouns) > 1 and nouns[-1] in ASPECT_WORDS:
        nouns = nouns[:-1]
    return op, nouns[-1]


def writes(name: str, annotations: dict[str, Any] | None) -> bool:
    """Whether a tool changes something: its annotations say it does not only read (readOnlyHint false),
    or, where they are silent, a word of its name is a writing verb (`git_add`, `createTask`)."""
    said = (annotations or {}).get("readOnlyHint")
    if isinstance(said, bool):
        return not said
    return any(VERBS.get(word) in ("create", "update", "delete", "move") for word in words(name))


def plural(noun: str) -> str:
    if noun.endswith(("s", "data", "info", "information")):
        return noun
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def singular(noun: str) -> str:
    if noun.endswith("ies") and len(noun) > 3:
        return noun[:-3] + "y"
    if noun.endswith(("xes", "zes", "ches", "shes", "sses")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun[:-1]
    return noun


def same_noun(a: str, b: str) -> bool:
    """`tickets`, `ticket` and `Tickets` name the same thing."""
    return singular(a.lower()) == singular(b.lower())
