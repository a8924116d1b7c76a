"""Words in tool and field names: the verb and noun of `create_ticket`, plurals, and the names that
usually mean a search, a limit or a page."""

from __future__ import annotations

import re

# Verbs that name an operation, longest first where one is a prefix of another.
VERBS = {
    "create": "create", "add": "create", "new": "create", "insert": "create", "post": "create",
    "write": "create", "put": "create", "save": "create", "store": "create", "upload": "create",
    "get": "read", "read": "read", "fetch": "read", "show": "read", "describe": "read", "retrieve": "read",
    "view": "read", "lookup": "read", "open": "read", "load": "read", "cat": "read",
    "list": "list", "search": "list", "find": "list", "query": "list", "browse": "list", "filter": "list",
    "update": "update", "set": "update", "edit": "update", "modify": "update", "patch": "update",
    "change": "update", "rename": "update", "complete": "update", "close": "update", "finish": "update",
    "assign": "update", "mark": "update",
    "delete": "delete", "remove": "delete", "drop": "delete", "destroy": "delete", "erase": "delete",
    "unlink": "delete",
}
QUERY_ARGUMENTS = ("query", "q", "search", "term", "text", "keyword", "keywords")
LIMIT_ARGUMENTS = ("limit", "max_results", "maxResults", "page_size", "pageSize", "per_page", "perPage", "top")
CURSOR_ARGUMENTS = ("cursor", "offset", "page_token", "pageToken", "next_token", "nextToken", "after")
PREFIX_ARGUMENTS = ("prefix", "path_prefix", "pathPrefix")
FOUND_FIELDS = ("found", "exists")
TOTAL_FIELDS = ("total", "count", "total_count", "totalCount")
LIST_FIELDS = ("results", "items", "data", "records", "entries", "list", "values")
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def words(name: str) -> list[str]:
    """`createSupportTicket`, `create_support_ticket` and `create-support-ticket` -> create, support, ticket."""
    return [word.lower() for word in _WORDS.findall(name)]


def verb_and_noun(name: str) -> tuple[str, str] | None:
    """The operation a tool's name names and its noun (`get_customer` -> read, customer), or None."""
    parts = words(name)
    if len(parts) < 2 or parts[0] not in VERBS:
        return None
    op = VERBS[parts[0]]
    if "by" in parts[2:]:  # find_pet_by_id: one pet, named by its id
        noun = parts[parts.index("by", 2) - 1]
        return ("read" if op == "list" and singular(noun) == noun else op), noun
    return op, parts[-1]


def plural(noun: str) -> str:
    if noun.endswith("s"):
        return noun
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return noun[:-1] + "ies"
    if noun.endswith(("x", "ch", "sh", "z")):
        return noun + "es"
    return noun + "s"


def singular(noun: str) -> str:
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if noun.endswith(("xes", "ches", "shes", "zes")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun[:-1]
    return noun


def same_noun(a: str, b: str) -> bool:
    """`tickets`, `ticket` and `Tickets` name the same thing."""
    return singular(a.lower()) == singular(b.lower())
