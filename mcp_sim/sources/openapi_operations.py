"""One MCP tool per OpenAPI operation: its name, its inputSchema from the parameters and request body, its
outputSchema from the success response, and annotations from the HTTP method."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mcp_sim.sources.openapi_refs import RefResolver, UnconvertibleError, escape
from mcp_sim.sources.openapi_schema import SchemaConverter, Walk

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
LOCATIONS = ("path", "query", "header", "cookie", "body", "formData")
# OpenAPI 3: "If in is header and name is Accept, Content-Type or Authorization, the parameter SHALL be ignored."
IGNORED_HEADERS = {"accept", "content-type", "authorization"}
INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]+")
MAX_REF_HOPS = 32
# Keywords that keep a request body from being merged into the tool's top-level arguments.
UNFLATTENABLE = {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "patternProperties", "dependentSchemas",
                 "dependentRequired", "unevaluatedProperties", "minProperties", "maxProperties", "propertyNames"}


@dataclass(frozen=True)
class Operation:
    path: str
    method: str
    operation: dict[str, Any]
    path_item: dict[str, Any]
    base: str  # the file the path item was read from (a $ref'd path item lives in another)
    item_pointer: str  # where the path item is in that file

    @property
    def pointer(self) -> str:
        """Where the operation is listed in the root document."""
        return f"/paths/{escape(self.path)}/{self.method}"

    @property
    def local_pointer(self) -> str:
        """Where the operation is in the file it was read from."""
        return f"{self.item_pointer}/{self.method}"

    @property
    def tags(self) -> list[str]:
        tags = self.operation.get("tags")
        return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


class ToolBuilder:
    """Builds the tools of one document; `swagger` is True for Swagger 2.0 (body and formData parameters)."""

    def __init__(self, refs: RefResolver, converter: SchemaConverter, document: dict[str, Any], swagger: bool):
        self.refs = refs
        self.converter = converter
        self.document = document
        self.swagger = swagger

    def build(self, op: Operation, name: str) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": name}
        summary, description = op.operation.get("summary"), op.operation.get("description")
        if isinstance(summary, str) and summary.strip():
            tool["title"] = summary.strip()
        text = description if isinstance(description, str) and description.strip() else summary
        tool["description"] = text.strip() if isinstance(text, str) and text.strip() else \
            f"{op.method.upper()} {op.path}"
        tool["inputSchema"] = self.input_schema(op)
        output = self.output_schema(op)
        if output is not None:
            tool["outputSchema"] = output
        if op.method in ("get", "head"):
            tool["annotations"] = {"readOnlyHint": True}
        elif op.method == "delete":
            tool["annotations"] = {"destructiveHint": True}
        return tool

    # Inputs ---------------------------------------------------------------------------------------------

    def input_schema(self, op: Operation) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        body = None
        for param, walk in self._parameters(op):
            location, name = param["in"], param["name"]
            if location == "body":
                body = (self.converter.convert(param.get("schema", {}), _request(walk.child("schema"))),
                        param.get("required") is True, param.get("description"))
                continue
            if location == "header" and name.lower() in IGNORED_HEADERS:
                continue
            key = name if name not in properties else f"{location}_{name}"
            properties[key] = self._parameter_schema(param, walk)
            if param.get("required") is True or location == "path":
                required.append(key)
        if not self.swagger:
            body = self._request_body(op)
        if body is not None:
            _add_body(properties, required, *body)
        return {"type": "object", "properties": properties, **({"required": required} if required else {})}

    def _parameters(self, op: Operation) -> list[tuple[dict[str, Any], Walk]]:
        """Path-level parameters, overridden by the operation's own of the same name and location."""
        merged: dict[tuple[str, str], tuple[dict[str, Any], Walk]] = {}
        for owner, pointer in ((op.path_item, op.item_pointer), (op.operation, op.local_pointer)):
            params = owner.get("parameters") or []
            if not isinstance(params, list):
                raise UnconvertibleError(f"{self.refs.shown(op.base, pointer)}/parameters: must be a list")
            for index, raw in enumerate(params):
                param, walk = self.deref(raw, Walk(op.base, f"{pointer}/parameters/{index}", "request"))
                if not isinstance(param.get("name"), str) or param.get("in") not in LOCATIONS:
                    raise UnconvertibleError(f"{self._at(walk)}: a parameter needs a 'name' and an 'in' "
                                             f"({', '.join(LOCATIONS)})")
                merged[(param["name"], param["in"])] = (param, walk)
        return list(merged.values())

    def _parameter_schema(self, param: dict[str, Any], walk: Walk) -> Any:
        if "schema" in param:
            schema = self.converter.convert(param["schema"], walk.child("schema"))
        elif isinstance(param.get("content"), dict) and param["content"]:
            media_type, media = next(iter(param["content"].items()))
            raw = media.get("schema", {}) if isinstance(media, dict) else {}
            schema = self.converter.convert(raw, walk.child("content", media_type, "schema"))
        else:  # Swagger 2.0: the parameter carries its own type, format, items, enum...
            schema = self.converter.convert(param, walk)
        schema = schema if isinstance(schema, dict) else {}
        for key in ("description", "deprecated"):
            if key in param and isinstance(param[key], (str, bool)):
                schema[key] = param[key]
        if "example" in param and "examples" not in schema:
            schema["examples"] = [param["example"]]
        return schema

    def _request_body(self, op: Operation) -> tuple[Any, bool, Any] | None:
        raw = op.operation.get("requestBody")
        if raw is None:
            return None
        body, walk = self.deref(raw, Walk(op.base, f"{op.local_pointer}/requestBody", "request"))
        content = body.get("content")
        if not isinstance(content, dict):
            return None
        media_type = _pick_media_type(content, for_request=True)
        if media_type is None:
            return None
        media = content[media_type] if isinstance(content[media_type], dict) else {}
        if "schema" in media:
            schema = self.converter.convert(media["schema"], _request(walk.child("content", media_type, "schema")))
        else:
            schema = {"type": "string", "description": f"the {media_type} content"}
        return schema, body.get("required") is True, body.get("description")

    # Outputs --------------------------------------------------------------------------------------------

    def output_schema(self, op: Operation) -> dict[str, Any] | None:
        """The JSON schema of the first success response that has one (else `default`), as an object."""
        responses = op.operation.get("responses")
        if not isinstance(responses, dict):
            return None
        for code in _success_codes(responses):
            where = Walk(op.base, f"{op.local_pointer}/responses/{code}", "response")
            response, walk = self.deref(responses[code], where)
            found = self._response_schema(op, response, walk)
            if found is not None:
                return as_object(self.converter.convert(*found))
        return None

    def _response_schema(self, op: Operation, response: dict[str, Any], walk: Walk) -> tuple[Any, Walk] | None:
        if self.swagger:
            produces = op.operation.get("produces", self.document.get("produces"))
            declared = dict.fromkeys(p for p in produces if isinstance(p, str)) if isinstance(produces, list) else {}
            if "schema" not in response or (declared and _pick_media_type(declared, False) is None):
                return None
            return response["schema"], walk.child("schema")
        content = response.get("content")
        if not isinstance(content, dict):
            return None
        media_type = _pick_media_type(content, for_request=False)
        media = content[media_type] if media_type is not None else None
        if media_type is None or not isinstance(media, dict) or "schema" not in media:
            return None
        return media["schema"], walk.child("content", media_type, "schema")

    # References -----------------------------------------------------------------------------------------

    def deref(self, node: Any, walk: Walk) -> tuple[dict[str, Any], Walk]:
        """Follow a parameter's, body's or response's `$ref` (a chain of them, too) to the object itself."""
        for _ in range(MAX_REF_HOPS):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                break
            node, base, pointer = self.refs.lookup(node["$ref"], walk.base, self._at(walk))
            walk = Walk(base, pointer, walk.direction)
        if not isinstance(node, dict):
            raise UnconvertibleError(f"{self._at(walk)}: expected an object, got {type(node).__name__}")
        if "$ref" in node:
            raise UnconvertibleError(f"{self._at(walk)}: the $ref chain does not end (a loop?)")
        return node, walk

    def _at(self, walk: Walk) -> str:
        return self.refs.shown(walk.base, walk.pointer)


def _request(walk: Walk) -> Walk:
    return Walk(walk.base, walk.pointer, "request", walk.refs)


def _add_body(properties: dict[str, Any], required: list[str], schema: Any, body_required: bool,
              description: Any) -> None:
    """An object body's fields become top-level arguments (as agents expect); any other body is one `body`."""
    fields = schema.get("properties") if isinstance(schema, dict) and schema.get("type") == "object" else None
    if (isinstance(fields, dict) and fields and not UNFLATTENABLE & set(schema)
            and not isinstance(schema.get("additionalProperties"), dict) and not set(fields) & set(properties)):
        properties.update(fields)
        if body_required:
            required.extend(name for name in schema.get("required", []) if name in fields)
        return
    key = "body" if "body" not in properties else "requestBody"
    if isinstance(description, str) and isinstance(schema, dict) and "description" not in schema:
        schema = {**schema, "description": description}
    properties[key] = schema
    if body_required:
        required.append(key)


def _pick_media_type(content: dict[str, Any], for_request: bool) -> str | None:
    """JSON first; a request may also be a form or anything else; a response only JSON (or */*)."""
    kinds = {media_type: _media_kind(media_type) for media_type in content if isinstance(media_type, str)}
    order = ["json", "json-like", "any", "form", "other"] if for_request else ["json", "json-like", "any"]
    for kind in order:
        for media_type, found in kinds.items():
            if found == kind:
                return media_type
    return None


def _media_kind(media_type: str) -> str:
    essence = media_type.split(";", 1)[0].strip().lower()
    if essence == "application/json":
        return "json"
    if essence.endswith(("+json", "/json")) or essence == "application/x-ndjson":
        return "json-like"
    if essence in ("*/*", "application/*"):
        return "any"
    if essence in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return "form"
    return "other"


def _success_codes(responses: dict[str, Any]) -> list[str]:
    codes = sorted(code for code in responses if re.fullmatch(r"2\d\d", str(code)))
    codes += [code for code in responses if str(code).upper() == "2XX"]
    return codes or [code for code in responses if code == "default"]


def as_object(schema: Any) -> dict[str, Any]:
    """MCP wants an object at the root of an outputSchema: anything else is wrapped as {result: ...}."""
    if isinstance(schema, dict) and schema.get("type") == "object":
        return schema
    if isinstance(schema, dict) and "type" not in schema and _object_like(schema):
        return {"type": "object", **schema}
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def _object_like(schema: dict[str, Any]) -> bool:
    if "properties" in schema:
        return True
    branches = [b for key in ("allOf", "anyOf", "oneOf") for b in schema.get(key, [])]
    return bool(branches) and all(isinstance(b, dict) and b.get("type") == "object" for b in branches)


def tool_name(op: Operation, taken: set[str]) -> str:
    """A valid, unique MCP tool name: the operationId, or method and path, with other characters as '_'."""
    operation_id = op.operation.get("operationId")
    if isinstance(operation_id, str) and operation_id.strip():
        name = INVALID_NAME_CHARS.sub("_", operation_id.strip()).strip("_")
    else:
        name = re.sub(r"_+", "_", INVALID_NAME_CHARS.sub("_", f"{op.method}_{op.path}")).strip("_")
    name = (name or op.method)[:128]
    unique, number = name, 2
    while unique in taken:
        suffix = f"_{number}"
        unique, number = name[:128 - len(suffix)] + suffix, number + 1
    return unique
