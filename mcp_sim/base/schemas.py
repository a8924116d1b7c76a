"""JSON Schema checks for specs and calls: metaschema validity, $refs that resolve offline, validating
instances with one readable message, and guards against documents too deep or too large to walk."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import referencing.jsonschema
from jsonschema.validators import validator_for
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing.exceptions import PointerToNowhere, Unresolvable

# Real specs stay under 20 levels; the schema checks and the simulator recurse once or more per level.
MAX_NESTING = 64
# Values once YAML aliases are expanded (as the prompt and json.dumps expand them): a few aliases nested
# 40 deep stand for 2**40 values, a "billion laughs" that would hang the loader.
MAX_VALUES = 1_000_000


def too_deep(path: Path) -> str:
    return f"{path}: nested deeper than {MAX_NESTING} levels; a tool spec needs far fewer (flatten it)"


def deeper_than(document: Any, limit: int) -> bool:
    """Whether containers nest more than `limit` levels; iterative, and each shared (YAML alias) node once."""
    deepest_seen: dict[int, int] = {}
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, (dict, list)) or deepest_seen.get(id(value), 0) >= depth:
            continue
        if depth > limit:
            return True
        deepest_seen[id(value)] = depth
        stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return False


def expanded_size(document: Any) -> int:
    """How many values `document` holds with every shared node counted at each use; linear in distinct nodes.

    Needs an acyclic document (the nesting check rejects a cycle first: its depth never ends).
    """
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        value, children_done = stack.pop()
        if not isinstance(value, (dict, list)) or (id(value) in sizes and not children_done):
            continue
        children = list(value.values()) if isinstance(value, dict) else value
        if children_done:
            sizes[id(value)] = 1 + sum(sizes.get(id(child), 1) for child in children)
        else:
            stack.append((value, True))
            stack.extend((child, False) for child in children)
    return sizes.get(id(document), 1)


def check_schema(schema: Any, where: str, problems: list[str], require_object: bool) -> bool:
    """Append the schema's problems; True when it is fit to validate examples against."""
    if not isinstance(schema, dict):
        problems.append(f"{where}: a JSON Schema must be a mapping, got {type(schema).__name__}")
        return False
    validator_cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    errors = sorted(validator_cls(validator_cls.META_SCHEMA).iter_errors(schema), key=str)
    for error in errors:
        pointer = "/" + "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}{pointer if pointer != '/' else ''}: invalid JSON Schema: {error.message}")
    if require_object and schema.get("type") != "object":
        problems.append(f"{where}: the root must have \"type\": \"object\" (MCP requires it), "
                        f"got {schema.get('type')!r}")
    if errors:
        return False  # the $ref walk below assumes a well-formed schema
    bad_refs = [f"{where}{pointer}/$ref: {message}" for pointer, message in unresolvable_refs(schema)]
    problems.extend(bad_refs)
    return not bad_refs


def unresolvable_refs(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """(JSON pointer, why) for every $ref in `schema` that does not resolve within it, used or not.

    The subschemas are found by `referencing`, jsonschema's own resolver, so a "$ref" key inside data
    (const, enum, examples) is not taken for a reference. Nothing is fetched: a ref to another file or
    a URL fails (only the JSON Schema metaschemas, bundled with jsonschema, resolve).
    """
    dialect = schema.get("$schema")
    specification = referencing.jsonschema.specification_with(
        dialect if isinstance(dialect, str) else "", default=referencing.jsonschema.DRAFT202012)
    root = specification.create_resource(schema)
    pointers = _pointers(schema)
    found: list[tuple[str, str]] = []
    stack = [(root, METASCHEMAS.with_resource(root.id() or "", root).crawl().resolver(root.id() or ""))]
    while stack:
        resource, resolver = stack.pop()
        ref = resource.contents.get("$ref") if isinstance(resource.contents, dict) else None
        if isinstance(ref, str):
            problem = _ref_problem(resolver, ref)
            if problem:
                found.append((pointers.get(id(resource.contents), ""), problem))
        stack.extend((sub, resolver.in_subresource(sub)) for sub in resource.subresources())
    return sorted(found)


def _ref_problem(resolver: Any, ref: str) -> str | None:
    try:
        resolver.lookup(ref)
    except PointerToNowhere:
        return f"{ref!r} points nowhere in this schema; define the target (e.g. under $defs) or fix the pointer"
    except Unresolvable:
        where = "a URL" if urlsplit(ref).scheme else "another file"
        return (f"{ref!r} names {where}, which mcp-sim never fetches (it runs offline); copy that schema under "
                "$defs and point at '#/$defs/NAME'")
    return None


def _pointers(document: Any) -> dict[int, str]:
    """The JSON pointer of every mapping in `document`, by identity."""
    pointers: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        value, pointer = stack.pop()
        if isinstance(value, dict):
            pointers.setdefault(id(value), pointer)
            items = [(str(key).replace("~", "~0").replace("/", "~1"), child) for key, child in value.items()]
        elif isinstance(value, list):
            items = [(str(index), child) for index, child in enumerate(value)]
        else:
            continue
        stack.extend((child, f"{pointer}/{key}") for key, child in items)
    return pointers


def validate_instance(instance: Any, schema: Any, where: str, problems: list[str]) -> None:
    if not isinstance(schema, dict):
        return
    message = validation_error(instance, schema)
    if message:
        problems.append(f"{where}: {message}")


def invalid_places(instance: Any, schema: dict[str, Any]) -> set[str]:
    """JSON pointers of the values of INSTANCE that break SCHEMA (missing properties aside)."""
    validator_cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator = validator_cls(schema, registry=METASCHEMAS, format_checker=validator_cls.FORMAT_CHECKER)
        errors = list(validator.iter_errors(instance))
    except (jsonschema.exceptions.SchemaError, Unresolvable):
        return set()
    places = set()
    for error in errors:
        for inner in [error, *(error.context or [])]:
            if inner.validator != "required":
                places.add("/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in inner.absolute_path))
    return places


def model_problems(exc: Any, where: str) -> list[str]:
    """A pydantic ValidationError as one problem per error, each at its JSON pointer under WHERE (pydantic's
    own `function-...` steps of a validator left out)."""
    problems = []
    for error in exc.errors():
        pointer = "".join(f"/{part}" for part in error["loc"] if not str(part).startswith("function-"))
        problems.append(f"{where}{pointer}: {error['msg']}")
    return problems


def validation_error(instance: Any, schema: dict[str, Any]) -> str | None:
    """The first validation problem as one readable line, or None when the instance is valid."""
    validator_cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        # The metaschemas and nothing else: jsonschema's default would fetch a remote $ref over the network.
        validator = validator_cls(schema, registry=METASCHEMAS, format_checker=validator_cls.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    except jsonschema.exceptions.SchemaError as exc:  # the schema was checked at load; be safe anyway
        return f"schema error: {exc.message}"
    except Unresolvable as exc:
        return f"schema reference cannot be resolved: {exc}"
    if not errors:
        return None
    lines = []
    for error in errors[:5]:
        pointer = "/" + "/".join(str(p) for p in error.absolute_path)
        lines.append(f"at {pointer}: {error.message}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(lines) + more
