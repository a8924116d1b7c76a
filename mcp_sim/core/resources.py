"""A spec file's MCP resources, resource templates and prompts: parsed and checked with pointers, then
served as written (prompts, resources with content, template reads a fixture answers) or left to the world
model (the other reads).

`x-sim` on a template or prompt (never advertised):
    x-sim:
      fixtures: [{match: {id: "123"}, text: '{"id": "{{id}}"}'}]   # template reads answered as written;
                                                                    # match: the variables that must be equal
      completions: {id: ["123", "456"]}                             # completion/complete values per variable
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from pydantic import AnyUrl, BaseModel, TypeAdapter, ValidationError

SURFACE_FIELDS = {"resources", "resourceTemplates", "prompts"}
RESOURCE_FIELDS = {"uri", "name", "title", "description", "mimeType", "size", "icons", "annotations", "_meta"}
CONTENT_FIELDS = {"text", "blob"}
TEMPLATE_FIELDS = {"uriTemplate", "name", "title", "description", "mimeType", "icons", "annotations", "_meta", "x-sim"}
PROMPT_FIELDS = {"name", "title", "description", "arguments", "icons", "_meta", "messages", "x-sim"}
TEMPLATE_X_SIM_FIELDS = {"fixtures", "completions"}
TEMPLATE_FIXTURE_FIELDS = {"match", "text", "blob", "mimeType"}
ARGUMENT_FIELDS = {"name", "title", "description", "required"}
# The simulator's own resource (--expose-world); a spec may not shadow it.
RESERVED_URIS = {"sim://world"}
# `{{name}}` in a prompt message, filled from the prompts/get arguments.
PLACEHOLDER_RE = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")
_URL = TypeAdapter(AnyUrl)


@dataclass
class ResourceSpec:
    uri: str
    declared: dict[str, Any]  # the Resource as resources/list advertises it (no content)
    text: str | None = None
    blob: str | None = None
    source: str = ""

    @property
    def has_content(self) -> bool:
        return self.text is not None or self.blob is not None

    @property
    def mime_type(self) -> str | None:
        return self.declared.get("mimeType")


@dataclass(frozen=True)
class TemplateFixture:
    """A read through a template answered as written: when the URI's variables include `match`."""

    match: dict[str, str]
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


@dataclass
class TemplateSpec:
    uri_template: str
    declared: dict[str, Any]
    matcher: UriTemplate = field(repr=False)
    source: str = ""
    fixtures: list[TemplateFixture] = field(default_factory=list)
    completions: dict[str, list[str]] = field(default_factory=dict)

    @property
    def mime_type(self) -> str | None:
        return self.declared.get("mimeType")

    def written(self, uri: str) -> types.TextResourceContents | types.BlobResourceContents | None:
        """The contents a fixture gives a read of URI ({{variable}} filled from it), or None."""
        variables = self.matcher.match(uri)
        if variables is None:
            return None
        values = {name: value if isinstance(value, str) else ",".join(value) for name, value in variables.items()}
        for fixture in self.fixtures:
            if all(values.get(name) == value for name, value in fixture.match.items()):
                mime_type = fixture.mime_type or self.mime_type
                if fixture.blob is not None:
                    return types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=fixture.blob)
                return types.TextResourceContents(uri=uri, mime_type=mime_type, text=_fill(fixture.text, values))
        return None


@dataclass
class PromptSpec:
    name: str
    declared: dict[str, Any]  # the Prompt as prompts/list advertises it (no messages)
    messages: list[dict[str, Any]]
    source: str = ""
    completions: dict[str, list[str]] = field(default_factory=dict)

    def required(self) -> list[str]:
        return [a["name"] for a in self.declared.get("arguments") or [] if a.get("required")]

    def render(self, arguments: Mapping[str, str]) -> list[dict[str, Any]]:
        """The messages with every `{{name}}` filled (an optional argument left out fills as empty text)."""
        return [_fill(message, arguments) for message in self.messages]


@dataclass
class Surface:
    """What one spec file offers besides tools."""

    resources: list[ResourceSpec] = field(default_factory=list)
    templates: list[TemplateSpec] = field(default_factory=list)
    prompts: list[PromptSpec] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.resources or self.templates or self.prompts)


def parse_surface(document: Mapping[str, Any], source: str, problems: list[str]) -> Surface:
    """The resources, resourceTemplates and prompts of a spec document; problems named with file#pointer."""
    surface = Surface()
    for index, raw in _entries(document, "resources", source, problems):
        resource = _parse_resource(raw, f"{source}#/resources/{index}", problems)
        if resource is not None:
            resource.source = source
            surface.resources.append(resource)
    for index, raw in _entries(document, "resourceTemplates", source, problems):
        template = _parse_template(raw, f"{source}#/resourceTemplates/{index}", problems)
        if template is not None:
            template.source = source
            surface.templates.append(template)
    for index, raw in _entries(document, "prompts", source, problems):
        prompt = _parse_prompt(raw, f"{source}#/prompts/{index}", problems)
        if prompt is not None:
            prompt.source = source
            surface.prompts.append(prompt)
    return surface


def _entries(document: Mapping[str, Any], key: str, source: str, problems: list[str]) -> list[tuple[int, Any]]:
    raw = document.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f"{source}#/{key}: must be a list")
        return []
    return list(enumerate(raw))


def _parse_resource(raw: Any, where: str, problems: list[str]) -> ResourceSpec | None:
    before = len(problems)
    declared = _declared(raw, where, RESOURCE_FIELDS | CONTENT_FIELDS, "resource", problems)
    if declared is None:
        return None
    content = {key: declared.pop(key) for key in CONTENT_FIELDS & set(declared)}
    _check_model(types.Resource, declared, where, problems)
    uri = declared.get("uri")
    if isinstance(uri, str):
        _check_uri(uri, f"{where}/uri", problems)
    text, blob = content.get("text"), content.get("blob")
    _check_content(text, blob, where, problems)
    if len(problems) > before:
        return None
    return ResourceSpec(str(uri), declared, text, blob)


def _check_content(text: Any, blob: Any, where: str, problems: list[str]) -> None:
    if text is not None and blob is not None:
        problems.append(f"{where}: give 'text' or 'blob', not both")
    if text is not None and not isinstance(text, str):
        problems.append(f"{where}/text: must be text")
    if blob is not None:
        try:
            base64.b64decode(str(blob), validate=True)
        except (binascii.Error, ValueError):
            problems.append(f"{where}/blob: must be base64 (the resource's bytes, encoded)")


def _parse_template(raw: Any, where: str, problems: list[str]) -> TemplateSpec | None:
    before = len(problems)
    declared = _declared(raw, where, TEMPLATE_FIELDS, "resource template", problems)
    if declared is None:
        return None
    x_sim = declared.pop("x-sim", None)
    _check_model(types.ResourceTemplate, declared, where, problems)
    matcher = _parse_uri_template(declared.get("uriTemplate"), f"{where}/uriTemplate", problems)
    if len(problems) > before or matcher is None:
        return None
    names = set(matcher.variable_names)
    fixtures, completions = _template_x_sim(x_sim, names, f"{where}/x-sim", problems)
    if len(problems) > before:
        return None
    return TemplateSpec(str(declared["uriTemplate"]), declared, matcher, fixtures=fixtures, completions=completions)


def _template_x_sim(raw: Any, names: set[str], where: str,
                    problems: list[str]) -> tuple[list[TemplateFixture], dict[str, list[str]]]:
    if raw is None:
        return [], {}
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping with any of {', '.join(sorted(TEMPLATE_X_SIM_FIELDS))}")
        return [], {}
    for key in sorted(set(raw) - TEMPLATE_X_SIM_FIELDS):
        problems.append(f"{where}/{key}: unknown field (allowed: {', '.join(sorted(TEMPLATE_X_SIM_FIELDS))})")
    fixtures = []
    raw_fixtures = raw.get("fixtures") or []
    if not isinstance(raw_fixtures, list):
        problems.append(f"{where}/fixtures: must be a list of {{match, text | blob, mimeType?}}")
        raw_fixtures = []
    for index, item in enumerate(raw_fixtures):
        here = f"{where}/fixtures/{index}"
        if not isinstance(item, dict) or not isinstance(item.get("match", {}), dict):
            problems.append(f"{here}: must be {{match: {{VARIABLE: VALUE}}, text | blob}}")
            continue
        for key in sorted(set(item) - TEMPLATE_FIXTURE_FIELDS):
            problems.append(f"{here}/{key}: unknown field (allowed: {', '.join(sorted(TEMPLATE_FIXTURE_FIELDS))})")
        match = item.get("match", {})
        for name in sorted(set(match) - names):
            problems.append(f"{here}/match/{name}: the template has no variable {name!r} "
                            f"(it has: {', '.join(sorted(names))})")
        if (item.get("text") is None) == (item.get("blob") is None):
            problems.append(f"{here}: give 'text' or 'blob'")
        _check_content(item.get("text"), item.get("blob"), here, problems)
        for name in sorted(set(PLACEHOLDER_RE.findall(str(item.get("text") or ""))) - names):
            problems.append(f"{here}/text: placeholder {{{{{name}}}}} names no variable of the template")
        fixtures.append(TemplateFixture({k: str(v) for k, v in match.items()}, item.get("text"), item.get("blob"),
                                        item.get("mimeType")))
    return fixtures, _completions(raw.get("completions"), names, f"{where}/completions", problems)


def _completions(raw: Any, names: set[str], where: str, problems: list[str]) -> dict[str, list[str]]:
    """`x-sim.completions`: {NAME: [values]} for completion/complete, NAME a variable or argument."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        problems.append(f"{where}: must map each name to a list of values")
        return {}
    for name in sorted(set(raw) - names):
        problems.append(f"{where}/{name}: names nothing completable here (names: {', '.join(sorted(names))})")
    return {str(name): [str(value) for value in values] for name, values in raw.items()}


def _parse_uri_template(raw: Any, where: str, problems: list[str]) -> UriTemplate | None:
    if not isinstance(raw, str):
        return None  # the model check named it
    try:
        matcher = UriTemplate.parse(raw)
    except InvalidUriTemplate as exc:
        problems.append(f"{where}: not an RFC 6570 URI template mcp-sim can match: {exc}")
        return None
    if not matcher.variables:
        problems.append(f"{where}: {raw!r} has no {{variable}}; declare a fixed URI under 'resources'")
        return None
    # A template is a URI once its variables are filled: check one expansion.
    _check_uri(matcher.expand({name: "x" for name in matcher.variable_names}), where, problems)
    return matcher


def _parse_prompt(raw: Any, where: str, problems: list[str]) -> PromptSpec | None:
    before = len(problems)
    declared = _declared(raw, where, PROMPT_FIELDS, "prompt", problems)
    if declared is None:
        return None
    raw_messages = declared.pop("messages", None)
    x_sim = declared.pop("x-sim", None)
    _check_model(types.Prompt, declared, where, problems)
    names = _argument_names(declared.get("arguments"), f"{where}/arguments", problems)
    messages = _parse_messages(raw_messages, names, f"{where}/messages", problems)
    completions: dict[str, list[str]] = {}
    if x_sim is not None:
        if not isinstance(x_sim, dict) or set(x_sim) - {"completions"}:
            problems.append(f"{where}/x-sim: must be a mapping with 'completions'")
        else:
            completions = _completions(x_sim.get("completions"), names, f"{where}/x-sim/completions", problems)
    if len(problems) > before:
        return None
    return PromptSpec(str(declared["name"]), declared, messages, completions=completions)


def _argument_names(raw: Any, where: str, problems: list[str]) -> set[str]:
    names: set[str] = set()
    for index, argument in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(argument, dict):
            continue  # the model check named it
        for key in sorted(set(argument) - ARGUMENT_FIELDS):
            problems.append(f"{where}/{index}: unknown field {key!r} (allowed: {', '.join(sorted(ARGUMENT_FIELDS))})")
        name = argument.get("name")
        if not isinstance(name, str) or not PLACEHOLDER_RE.fullmatch("{{" + name + "}}"):
            problems.append(f"{where}/{index}/name: {name!r} must be a name without spaces or braces")
        elif name in names:
            problems.append(f"{where}/{index}/name: argument {name!r} is declared twice")
        else:
            names.add(name)
    return names


def _parse_messages(raw: Any, arguments: set[str], where: str, problems: list[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        problems.append(f"{where}: a prompt needs 'messages', a list of {{role: user|assistant, content: ...}} "
                        "(content as text, or an MCP content block)")
        return []
    messages = []
    for index, item in enumerate(raw):
        message = _parse_message(item, arguments, f"{where}/{index}", problems)
        if message is not None:
            messages.append(message)
    return messages


def _parse_message(raw: Any, arguments: set[str], where: str, problems: list[str]) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping {{role, content}}")
        return None
    message = dict(raw)
    if isinstance(message.get("content"), str):  # shorthand for one text block
        message["content"] = {"type": "text", "text": message["content"]}
    if not _check_model(types.PromptMessage, message, where, problems):
        return None
    for name in sorted(set(PLACEHOLDER_RE.findall(json.dumps(message))) - arguments):
        problems.append(f"{where}: placeholder {{{{{name}}}}} names no argument of this prompt "
                        f"(declare it under 'arguments', or write it as text without double braces)")
    return message


def _declared(raw: Any, where: str, allowed: set[str], kind: str, problems: list[str]) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a {kind} must be a mapping, got {type(raw).__name__}")
        return None
    for key in sorted(set(raw) - allowed):
        problems.append(f"{where}: unknown field {key!r} (allowed: {', '.join(sorted(allowed))})")
    return {key: value for key, value in raw.items() if key in allowed}


def _check_model(model: type[BaseModel], value: dict[str, Any], where: str, problems: list[str]) -> bool:
    """Check `value` against the MCP type the server will build from it; every problem with its pointer."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        for error in exc.errors():
            pointer = "".join(f"/{part}" for part in error["loc"] if not str(part).startswith("function-"))
            problems.append(f"{where}{_camel_pointer(pointer)}: {error['msg']}")
        return False
    return True


def _camel_pointer(pointer: str) -> str:
    # Pydantic names the snake_case attribute; the spec is written in MCP's camelCase.
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), pointer)


def _check_uri(uri: str, where: str, problems: list[str]) -> None:
    try:
        _URL.validate_python(uri)
    except ValidationError as exc:
        problems.append(f"{where}: {uri!r} is not an absolute URI ({exc.errors()[0]['msg']}); "
                        "write it with a scheme, e.g. file:///notes.txt or docs://guide")


def check_unique_surface(surfaces: Sequence[Surface], problems: list[str]) -> None:
    """Resource URIs, template URIs and prompt names must be unique across every loaded file."""
    seen: dict[tuple[str, str], str] = {}
    for surface in surfaces:
        keys = [("resource URI", r.uri, r.source) for r in surface.resources]
        keys += [("resource template", t.uri_template, t.source) for t in surface.templates]
        keys += [("prompt name", p.name, p.source) for p in surface.prompts]
        for kind, key, source in keys:
            if kind == "resource URI" and key in RESERVED_URIS:
                problems.append(f"{source}: resource URI {key!r} is the simulator's own (--expose-world); "
                                "pick another")
            elif (kind, key) in seen:
                problems.append(f"{source}: {kind} {key!r} is already defined in {seen[kind, key]}")
            else:
                seen[kind, key] = source


def find_resource(surfaces: Sequence[Surface], uri: str) -> ResourceSpec | TemplateSpec | None:
    """What answers a read of `uri`: a declared resource first, else the first template that matches it."""
    for surface in surfaces:
        for resource in surface.resources:
            if resource.uri == uri:
                return resource
    for surface in surfaces:
        for template in surface.templates:
            if template.matcher.match(uri) is not None:
                return template
    return None


def find_prompt(surfaces: Sequence[Surface], name: str) -> PromptSpec | None:
    return next((p for surface in surfaces for p in surface.prompts if p.name == name), None)


def prompt_problem(prompt: PromptSpec, arguments: Mapping[str, str]) -> str | None:
    """Why a prompts/get cannot be served (a required argument missing), or None."""
    missing = [name for name in prompt.required() if not arguments.get(name)]
    if missing:
        return f"prompt {prompt.name!r} needs the argument(s) {', '.join(missing)}"
    return None


def surface_summary(surface: Surface) -> str:
    """One line for `mcp-sim check`: how many resources (with content), templates and prompts."""
    written = sum(resource.has_content for resource in surface.resources)
    return (f"{len(surface.resources)} resource(s) ({written} with content), {len(surface.templates)} "
            f"template(s), {len(surface.prompts)} prompt(s)")


def surface_prompt(surface: Surface) -> str | None:
    """What the world model is told about the reads it answers: every resource without content, every template."""
    entries = [r.declared for r in surface.resources if not r.has_content] + [t.declared for t in surface.templates]
    if not entries:
        return None
    lines = [json.dumps(entry, ensure_ascii=False, separators=(",", ":")) for entry in entries]
    return ("# Resources\nThe server also serves these resources. A call "
            "{\"name\": \"resources/read\", \"arguments\": {\"uri\": ...}} returns the content of the resource at "
            "that URI as the real server would, as plain text, consistent with the world and earlier calls.\n"
            + "\n".join(lines))


def _fill(value: Any, arguments: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return PLACEHOLDER_RE.sub(lambda m: str(arguments.get(m.group(1), "")), value)
    if isinstance(value, dict):
        return {key: _fill(item, arguments) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, arguments) for item in value]
    return value
