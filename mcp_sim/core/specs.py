"""Load tool spec files (JSON or YAML) and check them, reporting every problem at once."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mcp_sim.base.errors import SpecError, yaml_failure
from mcp_sim.base.schemas import (
    MAX_NESTING,
    MAX_VALUES,
    check_schema,
    deeper_than,
    expanded_size,
    too_deep,
    unresolvable_refs,
    validate_instance,
    validation_error,
)
from mcp_sim.core.capabilities import check_capabilities
from mcp_sim.core.interactions import INTERACTION_FIELDS, Interactions, parse_interactions
from mcp_sim.core.resources import SURFACE_FIELDS, Surface, check_unique_surface, parse_surface
from mcp_sim.core.scenarios import DEFAULT_SCENARIO, Scenario, merge_patch, parse_world
from mcp_sim.core.text_json import TextJson, json_object, parse_text_json
from mcp_sim.state.effect import StateEffect, parse_effect
from mcp_sim.state.field_rules import FieldRule, parse_rules
from mcp_sim.state.layout import properties
from mcp_sim.xsim.faults import FaultFileError, FaultRule, rules_from_spec
from mcp_sim.xsim.fixtures import Fixture, ToolShape, parse_fixtures

# Part of this module's API since before schemas.py: importers of validation_error find it here too.
__all__ = ["Catalog", "Example", "SpecSet", "ToolSpec", "load_catalog", "unresolvable_refs", "validation_error"]

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
# MCP's tool-name rule (SEP-986): 1-128 of letters, digits, '_', '-', '.'.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
TOOL_FIELDS = {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "_meta",
               "execution", "x-sim"}
ANNOTATION_FIELDS = {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
X_SIM_FIELDS = {"examples", "fixtures", "faults", "state", "rules", "read_only", "text_json", *INTERACTION_FIELDS}
FILE_FIELDS = {"tools", "world", "server", "nextCursor", "_meta", *SURFACE_FIELDS}


@dataclass(frozen=True)
class Example:
    arguments: dict[str, Any]
    result: Any  # an object for tools with an outputSchema, else a string
    is_error: bool = False
    # Shown only in worlds of this scenario (None: in every scenario).
    scenario: str | None = None


@dataclass
class ToolSpec:
    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    examples: list[Example] = field(default_factory=list)
    # Answers pinned in the spec (x-sim.fixtures), answered before anything else.
    fixtures: list[Fixture] = field(default_factory=list)
    source: str = ""  # the file it came from, for messages
    spec_set: SpecSet | None = field(default=None, repr=False)
    # Every MCP field as the spec wrote it (icons, _meta, execution included), without mcp-sim's x-sim.
    declared: dict[str, Any] = field(default_factory=dict, repr=False)
    faults: list[FaultRule] = field(default_factory=list)  # x-sim.faults: this tool's bad days
    # x-sim.state: how the tool touches its world's live data (None: inferred from its name, or nothing).
    state: StateEffect | None = None
    # x-sim content, notifications and requests to the client (mcp_sim.core.interactions).
    interactions: Interactions = field(default_factory=Interactions)
    # x-sim.rules: answer fields computed from the arguments and the world's history (state.field_rules).
    rules: list[FieldRule] = field(default_factory=list)
    # x-sim.read_only: `mcp-sim shadow` sends this tool's calls to the real server (true) or simulates them
    # (false), whatever its annotations say; None: the annotations decide.
    read_only: bool | None = None
    # x-sim.text_json: the tool answers a JSON object as text (mcp_sim.core.text_json). `output_schema` then
    # holds its schema, for answering; tools/list still advertises none.
    text_json: TextJson | None = None

    def definition(self) -> dict[str, Any]:
        """The MCP Tool object exactly as the spec declares it (what tools/list advertises)."""
        if self.declared:
            return dict(self.declared)
        # Built in code rather than loaded from a file: the fields it was given.
        tool: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description,
                                "inputSchema": self.input_schema, "outputSchema": self.output_schema,
                                "annotations": self.annotations}
        return {key: value for key, value in tool.items() if value is not None}


@dataclass
class SpecSet:
    """The tools of one spec file and the world they live in."""

    source: str
    tools: list[ToolSpec]
    world_description: str | None = None
    world_data: Any = None
    scenarios: dict[str, Scenario] = field(default_factory=dict)
    # The scenario a new world of this file starts from unless it asks for another.
    default_scenario: str = DEFAULT_SCENARIO
    # Its resources, resource templates and prompts (mcp_sim.core.resources).
    surface: Surface = field(default_factory=Surface)
    # How its tools go into prompts (mcp_sim.core.prompt_budget decides before serving): "full", every definition
    # in the system prompt; "index", one line per tool there and each call's own definition beside the call,
    # cut to `definition_chars` characters, the index to `index_chars` (0: no limit).
    prompt_layout: str = "full"
    definition_chars: int = 0
    index_chars: int = 0
    # server.capabilities as the file declares them (mcp_sim.core.capabilities); None: every feature.
    capabilities: dict[str, Any] | None = None

    def world_state(self, scenario: str) -> tuple[str | None, Any]:
        """The world's description and seed data in `scenario` (the default one when this file lacks it)."""
        chosen = self.scenarios.get(scenario)
        if chosen is None:
            return self.world_description, self.world_data
        description = "\n\n".join(part.strip() for part in (self.world_description, chosen.description) if part)
        data = self.world_data if chosen.data_patch is None else merge_patch(self.world_data, chosen.data_patch)
        return description or None, data


@dataclass
class Catalog:
    """Every loaded tool, by name."""

    spec_sets: list[SpecSet]

    @property
    def tools(self) -> dict[str, ToolSpec]:
        return {tool.name: tool for spec_set in self.spec_sets for tool in spec_set.tools}

    def scenarios(self) -> set[str]:
        """Every scenario a world may start from: the default one and those any spec file names."""
        return {DEFAULT_SCENARIO, *(name for spec_set in self.spec_sets for name in spec_set.scenarios)}

    @property
    def default_scenario(self) -> str:
        """The scenario the spec files name as their default (the first that names one), else `default`."""
        named = [s.default_scenario for s in self.spec_sets if s.default_scenario != DEFAULT_SCENARIO]
        return named[0] if named else DEFAULT_SCENARIO


def load_catalog(paths: list[str | Path]) -> Catalog:
    """Load every spec file named (directories are searched for spec files); raise SpecError listing all problems."""
    problems: list[str] = []
    spec_sets: list[SpecSet] = []
    files = _expand(paths, problems)
    if not files and not problems:
        problems.append(f"no spec files ({', '.join(SPEC_SUFFIXES)}) found in {', '.join(map(str, paths))}")
    for path in files:
        spec_set = _load_file(path, problems)
        if spec_set is not None:
            spec_sets.append(spec_set)
    _check_unique_names(spec_sets, problems)
    check_unique_surface([spec_set.surface for spec_set in spec_sets], problems)
    if problems:
        raise SpecError(problems)
    return Catalog(spec_sets)


def _expand(paths: list[str | Path], problems: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SPEC_SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            problems.append(f"{path}: no such file or directory")
    return files


# libyaml's parser when PyYAML has it: the same safe subset, many times faster on imported specs of megabytes.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(path: Path, problems: list[str]) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: a UTF-8 BOM (.NET writes one) is dropped
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot read: {exc}")
        return None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        # libyaml stops a deep document itself, before Python's recursion limit would.
        deep = "exceeded maximum nesting depth" in str(exc)
        problems.append(too_deep(path) if deep else f"{path}: not valid YAML: {yaml_failure(exc)}")
        return None
    except ValueError as exc:  # bad JSON, and integers past 4300 digits
        problems.append(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}")
        return None
    except RecursionError:
        problems.append(too_deep(path))
        return None


def _load_file(path: Path, problems: list[str]) -> SpecSet | None:
    """Accepts a tools/list result ({"tools": [...]}), a list of Tools, or one Tool."""
    reported = len(problems)
    document = _parse(path, problems)
    if document is None:
        if len(problems) == reported:
            problems.append(f"{path}: the file is empty; expected a tools/list result, a list of tools or one tool")
        return None
    if deeper_than(document, MAX_NESTING):
        problems.append(too_deep(path))
        return None
    if expanded_size(document) > MAX_VALUES:
        problems.append(f"{path}: expands to more than {MAX_VALUES:,} values once its YAML aliases (*name) are "
                        "expanded; write the data out or cut it down")
        return None
    source = str(path)
    world: tuple[str | None, Any, dict[str, Scenario], str] = (None, None, {}, DEFAULT_SCENARIO)
    capabilities = None
    if isinstance(document, dict) and ("tools" in document or SURFACE_FIELDS & set(document)):
        for key in sorted(set(document) - FILE_FIELDS):
            problems.append(f"{source}: unknown top-level field {key!r} (allowed: {', '.join(sorted(FILE_FIELDS))})")
        world = parse_world(document.get("world"), source, problems)
        capabilities = _check_server(document.get("server"), source, problems)
        raw_tools = document.get("tools", [])
        pointer = "/tools"
    elif isinstance(document, list):
        raw_tools, pointer = document, ""
    elif isinstance(document, dict) and "name" in document:
        raw_tools, pointer = [document], None
    else:
        problems.append(f"{source}: expected a mapping with 'tools', a list of tools, or one tool with a 'name'")
        return None
    if not isinstance(raw_tools, list):
        problems.append(f"{source}#{pointer}: 'tools' must be a list")
        return None
    spec_set = SpecSet(source, [], *world, capabilities=capabilities)
    if isinstance(document, dict):
        spec_set.surface = parse_surface(document, source, problems)
    for index, raw in enumerate(raw_tools):
        where = f"{source}#{pointer}/{index}" if pointer is not None else f"{source}#"
        tool = _parse_tool(raw, where, problems)
        if tool is not None:
            tool.source = source
            tool.spec_set = spec_set
            spec_set.tools.append(tool)
    return spec_set


def _check_server(raw: Any, source: str, problems: list[str]) -> dict[str, Any] | None:
    """`server` records where a mirrored spec came from, and may declare its capabilities (returned)."""
    if raw is None:
        return None
    if isinstance(raw, dict) and isinstance(raw.get("name", ""), str):
        return check_capabilities(raw.get("capabilities"), f"{source}#/server/capabilities", problems)
    problems.append(f"{source}#/server: must be a mapping like {{name: ..., version: ...}}")
    return None


def _parse_tool(raw: Any, where: str, problems: list[str]) -> ToolSpec | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a tool must be a mapping, got {type(raw).__name__}")
        return None
    before = len(problems)
    name = raw.get("name")
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        problems.append(f"{where}/name: {name!r} is not a valid MCP tool name "
                        "(1-128 characters of letters, digits, '_', '-', '.')")
        name = str(name)
    label = f"{where} (tool {name!r})"
    for key in sorted(set(raw) - TOOL_FIELDS):
        hint = " (did you mean 'inputSchema'?)" if key in ("input_schema", "parameters") else ""
        hint = hint or (" (did you mean 'outputSchema'?)" if key == "output_schema" else "")
        problems.append(f"{label}: unknown field {key!r}{hint}")
    for text_field in ("title", "description"):
        if text_field in raw and not isinstance(raw[text_field], str):
            problems.append(f"{label}/{text_field}: must be text")
    input_schema = raw.get("inputSchema")
    input_ok = False
    if input_schema is None:
        problems.append(f"{label}: missing 'inputSchema' (use {{type: object, properties: {{}}}} for no arguments)")
    else:
        input_ok = check_schema(input_schema, f"{label}/inputSchema", problems, require_object=True)
    output_schema = raw.get("outputSchema")
    output_ok = output_schema is None or check_schema(output_schema, f"{label}/outputSchema", problems,
                                                       require_object=True)
    x_sim = raw.get("x-sim")
    text_json = parse_text_json(x_sim.get("text_json") if isinstance(x_sim, dict) else None,
                                f"{label}/x-sim/text_json", output_schema is not None, problems)
    if text_json is not None and isinstance(x_sim, dict):  # answered as if the schema were its outputSchema
        output_schema = text_json.schema
        x_sim = {**x_sim, "examples": _parsed_text_examples(x_sim.get("examples"))}
    annotations = raw.get("annotations")
    if annotations is not None:
        _check_annotations(annotations, f"{label}/annotations", problems)
    # A broken schema is reported once, not again for every example checked against it ({} accepts anything).
    examples = _parse_examples(x_sim, label, input_schema if input_ok else {},
                               output_schema if output_ok else {}, problems)
    fixtures = _parse_fixtures(x_sim, ToolShape(name, input_schema, output_schema), label, problems)
    faults = _parse_faults(x_sim, name, f"{where}/x-sim/faults", problems)
    state = _parse_state(x_sim, f"{label}/x-sim/state", problems)
    rules = _parse_rules(x_sim, input_schema if input_ok else {}, output_schema, f"{label}/x-sim/rules", problems)
    interactions = parse_interactions(x_sim, label, problems) if isinstance(x_sim, dict) else Interactions()
    read_only = x_sim.get("read_only") if isinstance(x_sim, dict) else None
    if read_only is not None and not isinstance(read_only, bool):
        problems.append(f"{label}/x-sim/read_only: must be true or false, got {read_only!r}")
    if len(problems) > before:
        return None
    assert isinstance(input_schema, dict)  # checked above
    return ToolSpec(name=name, input_schema=input_schema, description=raw.get("description"),
                    title=raw.get("title"), output_schema=output_schema, annotations=annotations,
                    examples=examples, fixtures=fixtures, faults=faults, state=state, interactions=interactions,
                    rules=rules, read_only=read_only, text_json=text_json,
                    declared={k: v for k, v in raw.items() if k != "x-sim"})


def _parsed_text_examples(raw: Any) -> Any:
    """A text_json tool's examples with each successful answer's JSON text as the object it holds (checked
    against the schema as any structured example); failures stay text."""
    if not isinstance(raw, list):
        return raw
    parsed = []
    for example in raw:
        if isinstance(example, dict) and not example.get("isError") and isinstance(example.get("result"), str):
            value = json_object(example["result"])
            example = {**example, "result": value} if value is not None else example
        parsed.append(example)
    return parsed


def _check_annotations(annotations: Any, where: str, problems: list[str]) -> None:
    if not isinstance(annotations, dict):
        problems.append(f"{where}: must be a mapping")
        return
    for key, value in annotations.items():
        if key not in ANNOTATION_FIELDS:
            problems.append(f"{where}/{key}: unknown annotation (allowed: {', '.join(sorted(ANNOTATION_FIELDS))})")
        elif key == "title" and not isinstance(value, str):
            problems.append(f"{where}/title: must be text")
        elif key != "title" and not isinstance(value, bool):
            problems.append(f"{where}/{key}: must be true or false, got {value!r}")


def _parse_examples(raw: Any, label: str, input_schema: Any, output_schema: Any,
                    problems: list[str]) -> list[Example]:
    if raw is None:
        return []
    if not isinstance(raw, dict) or set(raw) - X_SIM_FIELDS:
        problems.append(f"{label}/x-sim: must be a mapping with any of {', '.join(sorted(X_SIM_FIELDS))}")
        return []
    raw_examples = raw.get("examples") or []
    if not isinstance(raw_examples, list):
        problems.append(f"{label}/x-sim/examples: must be a list of {{arguments, result}}")
        return []
    examples: list[Example] = []
    for index, item in enumerate(raw_examples):
        where = f"{label}/x-sim/examples/{index}"
        if not isinstance(item, dict) or "arguments" not in item or "result" not in item:
            problems.append(f"{where}: each example needs 'arguments' and 'result'")
            continue
        scenario = item.get("scenario")
        if scenario is not None and not isinstance(scenario, str):
            problems.append(f"{where}/scenario: must be a scenario name")
        is_error = bool(item.get("isError", False))
        validate_instance(item["arguments"], input_schema, f"{where}/arguments", problems)
        if is_error:
            if not isinstance(item["result"], str):
                problems.append(f"{where}/result: an error example's result must be its error text")
        elif isinstance(output_schema, dict):
            validate_instance(item["result"], output_schema, f"{where}/result", problems)
        elif not isinstance(item["result"], str):
            problems.append(f"{where}/result: this tool has no outputSchema, so its result must be text")
        examples.append(Example(item["arguments"], item["result"], is_error, scenario))
    return examples


def _parse_fixtures(raw: Any, tool: ToolShape, label: str, problems: list[str]) -> list[Fixture]:
    """`x-sim.fixtures`: answers pinned per call, checked here against the tool's schemas."""
    if not isinstance(raw, dict):  # _parse_examples reports a malformed x-sim
        return []
    fixtures, found = parse_fixtures(raw.get("fixtures"), tool, f"{label}/x-sim/fixtures")
    problems.extend(found)
    return fixtures


def _parse_state(raw: Any, where: str, problems: list[str]) -> StateEffect | None:
    if not isinstance(raw, dict) or "state" not in raw:
        return None
    return parse_effect(raw["state"], where, problems)


def _parse_rules(raw: Any, input_schema: Any, output_schema: Any, where: str,
                 problems: list[str]) -> list[FieldRule]:
    if not isinstance(raw, dict) or raw.get("rules") is None:
        return []
    if output_schema is None:
        problems.append(f"{where}: rules fix fields of a structured answer; the tool has no outputSchema")
        return []
    rules = parse_rules(raw["rules"], where, problems)
    known = set(properties(input_schema))
    for rule in rules:
        if rule.argument is not None and rule.argument not in known:
            problems.append(f"{where}/{rule.pointer.lstrip('/')}: no argument {rule.argument!r} in the inputSchema "
                            f"(it has: {', '.join(sorted(known)) or 'none'})")
    return rules


def _parse_faults(raw: Any, name: str, where: str, problems: list[str]) -> list[FaultRule]:
    if not isinstance(raw, dict) or "faults" not in raw:
        return []
    try:
        return rules_from_spec(name, raw["faults"], where)
    except FaultFileError as exc:
        problems.extend(exc.problems)
        return []


def _check_unique_names(spec_sets: list[SpecSet], problems: list[str]) -> None:
    seen: dict[str, str] = {}
    for spec_set in spec_sets:
        for tool in spec_set.tools:
            if tool.name in seen:
                problems.append(f"{spec_set.source}: tool name {tool.name!r} is already defined in {seen[tool.name]}")
            else:
                seen[tool.name] = spec_set.source
