"""Infer a tool's effect on its world's live state (`x-sim.state`) from what its source says.

Pure functions over a tool definition (name, inputSchema, outputSchema) and, for an imported REST
operation, its method and path; nothing here knows MCP or the runtime. The result is the `x-sim.state`
mapping (collection, op, and only the fields that differ from their defaults), or None when the source
does not say enough: a wrong effect is worse than none, since a tool without one is answered by the
model alone. The author reads the inference in `mcp-sim check` and corrects it.

- By name: the verb (create_/add_/new_, write_/put_/save_ with a key argument; get_/read_/fetch_/show_/
  describe_; list_/search_/find_/query_; update_/set_/edit_/modify_/complete_/close_; delete_/remove_/
  drop_), after at most one prefix word (`git_create_branch`); the collection is the noun after the verb,
  plural (`create_task` -> tasks); a tool with no noun (`get`, `set`) works on `items`.
- By REST: POST /things creates, GET /things/{id} reads, GET /things lists, PUT/PATCH (and POST) on
  /things/{id} update, DELETE /things/{id} deletes; the key argument is the path parameter.
- A read, update or delete needs a key argument; a create needs one (a put) or an output that carries the
  new record's key; a bulk argument (`entities: [...]`) is not one record, so it says nothing.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_sim.state.naming import (
    CURSOR_NAMES,
    FOUND_NAMES,
    KEY_NAMES,
    LIMIT_NAMES,
    LIST_NAMES,
    QUERY_NAMES,
    TOTAL_NAMES,
    plural,
    singular,
    statement_argument,
    words,
)

VERBS = {
    **dict.fromkeys(("create", "add", "new", "insert", "register"), "create"),
    **dict.fromkeys(("write", "put", "save", "upsert"), "put"),
    **dict.fromkeys(("get", "read", "fetch", "show", "describe", "retrieve", "view"), "read"),
    **dict.fromkeys(("list", "search", "find", "query", "browse"), "list"),
    **dict.fromkeys(("update", "set", "edit", "modify", "complete", "close", "patch", "rename"), "update"),
    **dict.fromkeys(("delete", "remove", "drop", "destroy", "cancel"), "delete"),
}
# Words that end the noun after the verb: `list_directory_with_sizes` is about directories.
STOP_WORDS = {"with", "by", "for", "from", "in", "of", "to", "as", "on", "and", "or", "at", "into"}
# Argument names that identify a record, after `<singular>_id`, `<singular>Id` and `id`.
CREATE_KEY_NAMES = ("key", "path", "uri", "slug")
DELETED_NAMES = ("deleted", "removed", "success", "ok")
DEFAULT_COLLECTION = "items"
# A tool named for SQL whose one required argument is a statement runs it on the world's database.
SQL_WORDS = {"query", "sql", "execute", "exec", "statement"}
SQL_COLLECTION = "database"
_PARAM = re.compile(r"^\{(.+)\}$")


# Words of a server that speaks DuckDB's SQL, or Postgres's (DuckDB reads most of it: SHOW TABLES, DESCRIBE).
DUCKDB_WORDS = ("duckdb", "postgres", "postgresql", "motherduck")


def sql_dialect(*texts: str | None) -> str:
    """The SQL dialect a server's name, instructions and tool descriptions name (state.sql's engines)."""
    said = " ".join(text for text in texts if text).lower()
    return "duckdb" if re.search(rf"\b({'|'.join(DUCKDB_WORDS)})\b", said) else "sqlite"


def infer_state(tool: dict[str, Any], method: str | None = None, path: str | None = None) -> dict[str, Any] | None:
    """The tool's `x-sim.state`, from its REST method and path when given (else its name), or None."""
    rest = _from_rest(method, path) if method and path else None
    if rest is None and _takes_sql(tool):
        return {"collection": SQL_COLLECTION, "op": "sql"}
    found = rest or _from_name(str(tool.get("name", "")))
    if found is None:
        return None
    op, collection, path_key = found
    return _effect(tool, op, collection, path_key, rest=rest is not None)


# Where the operation and the collection come from --------------------------------------------------------

def _takes_sql(tool: dict[str, Any]) -> bool:
    """`read_query(query)`, `execute_sql(sql)`, `create_table(query)` (a table is made by a statement)."""
    schema = tool.get("inputSchema")
    required = (schema.get("required") if isinstance(schema, dict) else None) or []
    name = words(str(tool.get("name", "")))
    return (len(required) == 1 and statement_argument(tool) is not None
            and bool(SQL_WORDS & set(name) or name[-2:] == ["create", "table"]))


def _from_name(name: str) -> tuple[str, str, None] | None:
    parts = words(name)
    for index in range(min(2, len(parts))):  # the verb, after at most one prefix word (git_create_branch)
        op = VERBS.get(parts[index])
        if op is None:
            continue
        noun: list[str] = []
        for word in parts[index + 1:]:
            if word in STOP_WORDS:
                break
            noun.append(word)
        # The head noun of a compound (`read_text_file` -> files), `items` when the tool names none.
        return op, plural(noun[-1]) if noun else DEFAULT_COLLECTION, None
    return None


def _from_rest(method: str, path: str) -> tuple[str, str, str | None] | None:
    segments = [s for s in path.strip("/").split("/") if s]
    method = method.lower()
    if not segments:
        return None
    last = _PARAM.match(segments[-1])
    literals = [s for s in segments if not _PARAM.match(s)]
    if last:  # /things/{id}: one record
        op = {"get": "read", "put": "update", "patch": "update", "post": "update", "delete": "delete"}.get(method)
        return (op, _collection(literals[-1]), last.group(1)) if op and literals else None
    after_record = len(segments) > 1 and _PARAM.match(segments[-2]) is not None
    action = _from_name(segments[-1])
    if action is not None and len(segments) > 1:  # /pets/findByStatus, /orders/{id}/cancel: an action
        if action[0] == "list" and not after_record:
            return "list", _collection(literals[-2]), None
        return None
    if after_record:  # /users/{id}/orders: a collection inside a record
        op = {"get": "list", "post": "create"}.get(method)
    else:
        op = {"get": "list", "post": "create", "put": "update", "patch": "update"}.get(method)
    return (op, _collection(segments[-1]), None) if op else None


def _collection(segment: str) -> str:
    parts = words(segment)
    if parts and parts[-1] in STOP_WORDS:  # `blocked_by`: no noun to make plural
        return segment
    return plural(parts[-1]) if parts else DEFAULT_COLLECTION


# The effect's fields ---------------------------------------------------------------------------------

def _effect(tool: dict[str, Any], op: str, collection: str, path_key: str | None,
            rest: bool) -> dict[str, Any] | None:
    """`rest`: the operation came from a REST path, whose parameters alone name a record (a body's `id` or
    `name` is a field of the new record) and whose lists must say where their array is."""
    inputs = _properties(tool.get("inputSchema"))
    output = tool.get("outputSchema") if isinstance(tool.get("outputSchema"), dict) else None
    one = singular(collection)
    if _is_bulk(inputs, collection):
        return None
    if rest:
        argument = path_key if path_key in inputs else ("id" if op == "update" and "id" in inputs else None)
    else:
        argument = _key_argument(inputs, one, for_create=op in ("create", "put"))
    if op == "list":
        return None if rest and output is None else _list_effect(collection, inputs, output)
    record, at = _record_schema(output, one)
    key = _key_field(argument, one)
    if op == "put":
        if argument is None:
            return None
        op = "create"
    if op in ("read", "update", "delete") and argument is None:
        return None
    if op == "create" and argument is None and (record is None or key not in _properties(record)):
        return None  # neither a key given nor one handed back: not a record
    effect: dict[str, Any] = {"collection": collection, "op": op}
    if key != "id":
        effect["key"] = key
    if argument is not None and argument != _default_argument(inputs, key, one):
        effect["argument"] = argument
    if at is not None and op != "delete":
        effect["at"] = at
    output_fields = _properties(output)
    if op == "read":
        flag = next((n for n in FOUND_NAMES if _type(output_fields.get(n)) == "boolean"), None)
        if flag:
            effect["found"] = f"/{flag}"
    if op == "delete":
        flag = next((n for n in DELETED_NAMES if _type(output_fields.get(n)) == "boolean"), None)
        if flag:
            effect["set"] = {f"/{flag}": True}
    return effect


def _list_effect(collection: str, inputs: dict[str, Any], output: dict[str, Any] | None) -> dict[str, Any] | None:
    effect: dict[str, Any] = {"collection": collection, "op": "list"}
    fields = _properties(output)
    arrays = [name for name, schema in fields.items() if _type(schema) == "array"]
    at = next((n for n in (collection, *LIST_NAMES) if n in arrays), arrays[0] if len(arrays) == 1 else None)
    if output is not None and at is None:
        return None  # an output with no array of records (a map, a count) is not a list of this collection
    if at is not None:
        effect["at"] = f"/{at}"
    total = next((n for n in TOTAL_NAMES if n in fields and _type(fields[n]) in ("integer", "number")), None)
    if total is not None:
        effect["total"] = f"/{total}"
    for option, names in (("query", QUERY_NAMES), ("limit", LIMIT_NAMES), ("cursor", CURSOR_NAMES)):
        found = next((n for n in names if n in inputs), None)
        if found is not None:
            effect[option] = found
    return effect


def _properties(schema: Any) -> dict[str, Any]:
    found = schema.get("properties") if isinstance(schema, dict) else None
    return found if isinstance(found, dict) else {}


def _type(schema: Any) -> str | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def _is_bulk(inputs: dict[str, Any], collection: str) -> bool:
    """An argument that is an array named like the collection (`entities: [...]`): many records at once."""
    return any(_type(schema) == "array" and plural(name.lower()) == collection for name, schema in inputs.items())


def _key_argument(inputs: dict[str, Any], one: str, for_create: bool) -> str | None:
    # A create's `name` or `email` is a field of the new record, not the key of an existing one.
    names = CREATE_KEY_NAMES if for_create else KEY_NAMES
    for name in (f"{one}_id", f"{one}Id", "id", f"{one}_name", f"{one}Name", *names):
        if _type(inputs.get(name)) in ("string", "integer", "number", None) and name in inputs:
            return str(name)
    return None


def _key_field(argument: str | None, one: str) -> str:
    """The record field the key argument names: `task_id`, `taskId`, `petId` and `id` name `id`; the
    thing's own name drops off the others (`issue_number` -> number, `branch_name` -> name)."""
    if argument is None or argument in (f"{one}_id", f"{one}Id", "id") or re.search(r"(_id|[a-z]Id)$", argument):
        return "id"
    if argument.startswith(f"{one}_") and len(argument) > len(one) + 1:
        return argument[len(one) + 1:]
    if argument.startswith(one) and argument[len(one):len(one) + 1].isupper():
        rest = argument[len(one):]
        return rest[0].lower() + rest[1:]
    return argument


def _default_argument(inputs: dict[str, Any], key: str, one: str) -> str | None:
    """The argument the format picks by itself: one named like the key field, or <singular>_id, or id."""
    return next((name for name in (key, f"{one}_id", "id") if name in inputs), None)


def _record_schema(output: dict[str, Any] | None, one: str) -> tuple[dict[str, Any] | None, str | None]:
    """The record's schema and where it sits in the output: under the singular noun, or the output itself."""
    if output is None:
        return None, None
    nested = _resolve(_properties(output).get(one), output)
    if _type(nested) == "object":
        return nested, f"/{one}"
    return output, ""


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    """A local `$ref` (`#/$defs/Ticket`) followed within `root`; a nullable `anyOf` taken as its other branch."""
    for _ in range(8):  # a few hops; a loop of refs is left unresolved
        if not isinstance(schema, dict):
            return schema
        branches = [b for b in schema.get("anyOf") or schema.get("oneOf") or [] if _type(b) != "null"]
        if len(branches) == 1 and "type" not in schema:
            schema = branches[0]
            continue
        ref = schema.get("$ref")
        if not (isinstance(ref, str) and ref.startswith("#/")):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        schema = target
    return schema
