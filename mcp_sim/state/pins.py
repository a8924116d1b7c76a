"""Pins: values the live state fixes in an answer, as JSON pointer -> value.

`pin_schema` narrows a grammar schema so the model can only write the pinned values (a `const`, or for a
list of records an array of exactly those records) while it writes the rest; `apply_pins` writes them
into an answer afterwards too, so an engine that cannot enforce a grammar gives the same values.
"""

from __future__ import annotations

import copy
from typing import Any

from mcp_sim.base.schemas import invalid_places
from mcp_sim.state.layout import merge_all_of, object_branch, split_pointer

Pins = dict[str, Any]


def get_pointer(value: Any, pointer: str) -> Any:
    """The value at POINTER, or None where the path does not exist."""
    for part in split_pointer(pointer):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def apply_pins(value: Any, pins: Pins) -> Any:
    """VALUE with every pin written in (objects made on the way); arrays of records merge by position."""
    result = copy.deepcopy(value) if value is not None else {}
    for pointer, pinned in pins.items():
        parts = split_pointer(pointer)
        if not parts:
            result = _merge(result, pinned)
            continue
        parent = result
        for part in parts[:-1]:
            if not isinstance(parent.get(part), dict):
                parent[part] = {}
            parent = parent[part]
        parent[parts[-1]] = _merge(parent.get(parts[-1]), pinned)
    return result


def fitting(pins: Pins, output_schema: dict[str, Any]) -> Pins:
    """The pins whose value the output's schema admits where it goes: one that does not (seed data that
    breaks the schema, an argument given as text for a boolean field) is left to the model rather than
    make every answer fail."""
    broken = invalid_places(apply_pins({}, pins), output_schema)
    return {pointer: value for pointer, value in pins.items() if (pointer or "/") not in broken}


def _merge(current: Any, pinned: Any) -> Any:
    if isinstance(pinned, list) and all(isinstance(item, dict) for item in pinned):
        written = current if isinstance(current, list) else []
        return [{**(written[i] if i < len(written) and isinstance(written[i], dict) else {}), **item}
                for i, item in enumerate(pinned)]
    if isinstance(pinned, dict) and isinstance(current, dict):
        return {**current, **pinned}
    return copy.deepcopy(pinned)


def pin_schema(schema: dict[str, Any], pins: Pins) -> dict[str, Any]:
    """A copy of the grammar SCHEMA in which each pinned place admits only its pinned value (allOf members
    merged first, so a pin lands in the one object the answer is)."""
    pinned = merge_all_of(copy.deepcopy(schema))
    for pointer, value in pins.items():
        parts = split_pointer(pointer)
        if not parts:
            continue
        parent = pinned
        for part in parts[:-1]:
            parent = _require(object_branch(parent) or parent, part)
        shape = object_branch(parent) or parent
        _require(shape, parts[-1], replace=_pinned_node(shape.get("properties", {}).get(parts[-1]), value))
    result: dict[str, Any] = pinned
    return result


def _require(parent: dict[str, Any], name: str, replace: Any = None) -> Any:
    """The property NAME of PARENT, made required (a pin cannot be skipped), replaced when asked."""
    props = parent.setdefault("properties", {})
    if replace is not None:
        props[name] = replace
    elif not isinstance(props.get(name), dict):
        props[name] = {"type": "object", "properties": {}}
    required = parent.setdefault("required", [])
    if name not in required:
        required.append(name)
    return props[name]


def _pinned_node(node: Any, value: Any) -> dict[str, Any]:
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        items = node.get("items") if isinstance(node, dict) else None
        return {"type": "array", "prefixItems": [_pinned_record(items, item) for item in value],
                "minItems": len(value), "maxItems": len(value)}
    if isinstance(value, dict) and isinstance(node, dict) and object_branch(node):
        return _pinned_record(node, value)
    return {"const": value}


def _pinned_record(node: Any, record: dict[str, Any]) -> dict[str, Any]:
    """An object schema whose known fields are constants; the fields the record lacks stay free."""
    shape = copy.deepcopy(object_branch(node)) if isinstance(node, dict) else {}
    props = shape.setdefault("properties", {})
    for name, value in record.items():
        if name in props or shape.get("additionalProperties") is not False:
            props[name] = {"const": value}
    shape["type"] = "object"
    shape["required"] = [name for name in props if name in record or name in shape.get("required", [])]
    return shape
