"""Turn OpenAPI schema objects (Swagger 2.0, OpenAPI 3.0 and 3.1) into self-contained JSON Schema 2020-12.

Every `$ref` is inlined, so a tool's schema stands alone. A reference met again inside its own expansion
(a recursive schema), or nested deeper than MAX_REF_DEPTH, becomes a permissive schema that says so.
Only JSON Schema keywords are kept, each checked for the shape the 2020-12 metaschema wants: OpenAPI's
own (`nullable`, `example`, `discriminator`, `xml`, `x-*`) are translated or dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urljoin

from mcp_sim.sources.openapi_refs import RefResolver, escape

MAX_REF_DEPTH = 16
JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
NUMBERS = {"multipleOf", "maximum", "minimum"}
COUNTS = {"maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties", "maxContains",
          "minContains"}
TEXTS = {"title", "description", "format", "contentEncoding", "contentMediaType", "$comment"}
FLAGS = {"uniqueItems", "deprecated", "readOnly", "writeOnly"}
ANY_VALUE = {"default", "const"}
SCHEMA_MAPS = {"properties", "patternProperties", "dependentSchemas"}
SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
SCHEMA_ONES = {"additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
               "unevaluatedItems", "unevaluatedProperties"}


@dataclass(frozen=True)
class Walk:
    """Where the converter is: the document (base URI), the JSON pointer, the $refs being expanded."""

    base: str
    pointer: str
    direction: str  # "request" drops readOnly properties, "response" drops writeOnly ones
    refs: tuple[str, ...] = ()

    def child(self, *parts: str | int) -> Walk:
        return replace(self, pointer=self.pointer + "".join("/" + escape(p) for p in parts))


class SchemaConverter:
    """Converts the schemas of one document; `legacy` is True for Swagger 2.0 and OpenAPI 3.0."""

    def __init__(self, refs: RefResolver, legacy: bool):
        self.refs = refs
        self.legacy = legacy

    def convert(self, schema: Any, walk: Walk) -> Any:
        """A JSON Schema 2020-12 equivalent of `schema` (a dict, or True/False), with every $ref inlined."""
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            return {}  # malformed: the structural check names it; the tool stays usable
        if isinstance(schema.get("$ref"), str):
            return self._ref(schema, walk)
        out: dict[str, Any] = {}
        for key, value in schema.items():
            self._keyword(out, key, value, schema, walk)
        self._drop_one_way_properties(out, walk.direction)
        if self.legacy and (schema.get("nullable") is True or schema.get("x-nullable") is True):
            return nullable(out)
        return out

    def _ref(self, schema: dict[str, Any], walk: Walk) -> Any:
        ref = schema["$ref"]
        uri = urljoin(walk.base, ref)
        target, base, pointer = self.refs.lookup(ref, walk.base, self.refs.shown(walk.base, walk.pointer))
        if uri in walk.refs or len(walk.refs) >= MAX_REF_DEPTH:
            converted = permissive(target, ref)
        else:
            converted = self.convert(target, Walk(base, pointer, walk.direction, (*walk.refs, uri)))
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        return self._with_siblings(converted, siblings, walk) if siblings else converted

    def _with_siblings(self, converted: Any, siblings: dict[str, Any], walk: Walk) -> Any:
        """Annotations beside a $ref (common, though 3.0 ignores them) apply; in 3.1 other keywords do too."""
        extra = self.convert({k: v for k, v in siblings.items() if k not in ("nullable", "x-nullable")}, walk)
        if not self.legacy and set(extra) - TEXTS - FLAGS - {"default", "examples"}:
            merged: Any = {"allOf": [converted], **extra}
        elif isinstance(converted, dict):
            merged = {**converted, **extra}
        else:
            merged = converted
        if self.legacy and (siblings.get("nullable") is True or siblings.get("x-nullable") is True):
            merged = nullable(merged if isinstance(merged, dict) else {})
        return merged

    def _keyword(self, out: dict[str, Any], key: str, value: Any, schema: dict[str, Any], walk: Walk) -> None:
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: self.convert(sub, walk.child(key, name)) for name, sub in value.items()
                        if key != "patternProperties" or valid_regex(name)}
        elif key in SCHEMA_LISTS and isinstance(value, list):
            out[key] = [self.convert(sub, walk.child(key, index)) for index, sub in enumerate(value)]
        elif key in SCHEMA_ONES and isinstance(value, (dict, bool)):
            out[key] = self.convert(value, walk.child(key))
        elif key == "items":
            self._items(out, value, walk)
        elif key == "type":
            _type(out, value)
        elif key in ("exclusiveMaximum", "exclusiveMinimum"):
            _exclusive(out, key, value, schema)
        else:
            _plain_keyword(out, key, value, schema)

    def _items(self, out: dict[str, Any], value: Any, walk: Walk) -> None:
        if isinstance(value, list):  # draft 4 tuple form
            out["prefixItems"] = [self.convert(sub, walk.child("items", i)) for i, sub in enumerate(value)]
        elif isinstance(value, (dict, bool)):
            out["items"] = self.convert(value, walk.child("items"))

    @staticmethod
    def _drop_one_way_properties(out: dict[str, Any], direction: str) -> None:
        """readOnly properties are never sent, writeOnly ones never returned (OpenAPI's meaning of both)."""
        properties = out.get("properties")
        if not isinstance(properties, dict):
            return
        flag = "readOnly" if direction == "request" else "writeOnly"
        dropped = {name for name, sub in properties.items() if isinstance(sub, dict) and sub.get(flag) is True}
        if dropped:
            out["properties"] = {name: sub for name, sub in properties.items() if name not in dropped}
            if isinstance(out.get("required"), list):
                out["required"] = [name for name in out["required"] if name not in dropped]


def _type(out: dict[str, Any], value: Any) -> None:
    if value == "file":  # Swagger 2.0 uploads
        out["type"], out["format"] = "string", "binary"
    elif isinstance(value, str) and value in JSON_TYPES:
        out["type"] = value
    elif isinstance(value, list) and value and all(isinstance(t, str) and t in JSON_TYPES for t in value):
        out["type"] = list(dict.fromkeys(value))


def _exclusive(out: dict[str, Any], key: str, value: Any, schema: dict[str, Any]) -> None:
    bound = "maximum" if key == "exclusiveMaximum" else "minimum"
    if _is_number(value):
        out[key] = value
    elif value is True and _is_number(schema.get(bound)):  # draft 4: a flag on maximum/minimum
        out[key] = schema[bound]


def _plain_keyword(out: dict[str, Any], key: str, value: Any, schema: dict[str, Any]) -> None:
    if key in NUMBERS and _is_number(value) and (key != "multipleOf" or value > 0):
        if schema.get(f"exclusive{key.capitalize()}") is not True:  # else _exclusive turns it exclusive
            out[key] = value
    elif key in COUNTS and _is_number(value) and value >= 0 and float(value).is_integer():
        out[key] = int(value)
    elif (key in TEXTS and isinstance(value, str)) or (key in FLAGS and isinstance(value, bool)):
        out[key] = value
    elif key == "pattern" and isinstance(value, str) and valid_regex(value):
        out[key] = value
    elif key in ANY_VALUE or (key in ("enum", "examples") and isinstance(value, list)):
        out[key] = value
    elif key == "example" and "examples" not in schema:
        out["examples"] = [value]
    elif key == "required" and isinstance(value, list):
        out[key] = list(dict.fromkeys(name for name in value if isinstance(name, str)))
    elif key == "dependentRequired" and isinstance(value, dict):
        out[key] = {k: list(dict.fromkeys(n for n in v if isinstance(n, str))) for k, v in value.items()
                    if isinstance(v, list)}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def valid_regex(pattern: str) -> bool:
    """Patterns Python cannot compile would make every validation of the tool fail, so they are dropped."""
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0's `nullable: true` as JSON Schema: null joins the type (and the enum, if any)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list):
        schema["type"] = kind if "null" in kind else [*kind, "null"]
    else:
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def permissive(target: Any, ref: str) -> dict[str, Any]:
    """Stands in for a schema not expanded again: any value of the target's type."""
    cut: dict[str, Any] = {"description": f"{ref.rsplit('/', 1)[-1]} (recursive; not expanded further)"}
    kind = target.get("type") if isinstance(target, dict) else None
    if isinstance(kind, str) and kind in JSON_TYPES:
        cut["type"] = kind
    return cut
