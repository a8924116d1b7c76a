"""The JSON shaping the after-model fault kinds use (mcp_sim/xsim/fault_kinds.py): the least value a
schema allows, the ways to break one that clients reject, a string field that can carry an injection, and
the shipped injection corpus. Each keeps the answer valid where the fault says it should be and breaks it
where it should break, checked with jsonschema.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

from mcp_sim.base.schemas import validation_error

MALFORMED_KEY = "mcp-sim-malformed"
INJECTION_KEY = "notice"


def smallest_valid(value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    root = copy.deepcopy(value)

    def shrink(node: Any) -> None:
        if isinstance(node, dict):
            order = list(node)
            for key in order:
                removed = node.pop(key)
                if validation_error(root, schema) is not None:
                    node[key] = removed
                    shrink(removed)
            kept = {key: node.pop(key) for key in order if key in node}  # restore the original key order
            node.update(kept)
        elif isinstance(node, list):
            items = node[:]
            node.clear()
            if validation_error(root, schema) is not None:
                node.extend(items)
                for item in node:
                    shrink(item)

    shrink(root)
    return root


def rejected_by_clients(value: dict[str, Any], schema: dict[str, Any]) -> bool:
    # The mcp clients validate without a format checker, so a format-only breakage would slip through them.
    validator_cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    return not validator_cls(schema).is_valid(value)


def breakages(value: dict[str, Any], schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Candidate ways to break VALUE, in order; the caller keeps the first the schema really rejects."""
    for name in schema.get("required", []):
        if name in value:
            yield f"dropped the required property {name!r}", {k: v for k, v in value.items() if k != name}
    for key, current in value.items():
        wrongs: tuple[Any, ...] = (123456789, "malformed", None, [], {})
        for wrong in wrongs:
            if type(wrong) is not type(current):
                yield f"set {key!r} to {json.dumps(wrong)}", {**value, key: wrong}
    yield f"added the property {MALFORMED_KEY!r}", {**value, MALFORMED_KEY: True}


def place_injection(value: dict[str, Any], schema: dict[str, Any], corpus: list[str],
                     token: int) -> tuple[dict[str, Any], str, str] | None:
    """VALUE with one string field carrying an injection, still valid under SCHEMA; its pointer and text."""
    leaves = list(_string_paths(value))
    shortest = min(corpus, key=len)
    for path in rotated(leaves, token):
        original = _get(value, path)
        if validation_error(_set(value, path, shortest), schema) is not None:
            continue  # enum, format, pattern or a short maxLength: no injection fits here
        for text in corpus:
            for candidate in (f"{original} {text}", text):
                changed = _set(value, path, candidate)
                if validation_error(changed, schema) is None:
                    return changed, "".join(f"/{part}" for part in path), text
    added = {**value, INJECTION_KEY: corpus[0]}
    if validation_error(added, schema) is None:  # no string field fits, but the schema admits a new property
        return added, f"/{INJECTION_KEY}", corpus[0]
    return None


def _string_paths(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(node, str):
        yield path
    elif isinstance(node, dict):
        for key, child in node.items():
            yield from _string_paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _string_paths(child, (*path, index))


def _get(node: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(value: dict[str, Any], path: tuple[str | int, ...], new: Any) -> dict[str, Any]:
    changed = copy.deepcopy(value)
    _get(changed, path[:-1])[path[-1]] = new
    return changed


def rotated(items: list[Any], token: int) -> list[Any]:
    start = token % len(items) if items else 0
    return items[start:] + items[:start]


@lru_cache(maxsize=1)
def _corpus() -> tuple[str, ...]:
    text = resources.files("mcp_sim.xsim").joinpath("injections.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def injections() -> list[str]:
    """The shipped corpus of test prompt-injection strings (mcp_sim/xsim/injections.txt)."""
    return list(_corpus())
