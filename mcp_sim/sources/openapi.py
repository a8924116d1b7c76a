"""Import an OpenAPI document (Swagger 2.0, OpenAPI 3.0 or 3.1; JSON or YAML; a local file) as a tool spec.

`openapi-spec-validator`'s schemas check the document's structure (every problem comes with its JSON
path); `referencing` resolves the `$ref`s (see openapi_refs). The result always passes the spec loader:
a tool the loader would reject is dropped with a warning.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema.exceptions import best_match

from mcp_sim.base import defaults
from mcp_sim.base.errors import SpecError
from mcp_sim.core.specs import load_catalog
from mcp_sim.sources.openapi_operations import METHODS, Operation, ToolBuilder, tool_name
from mcp_sim.sources.openapi_refs import OpenAPIImportError, RefResolver, UnconvertibleError, escape, read_document
from mcp_sim.sources.openapi_schema import SchemaConverter
from mcp_sim.sources.state_inference import infer_state

__all__ = ["ImportResult", "OpenAPIImportError", "import_openapi", "write_spec"]

MAX_LISTED = 20


@dataclass
class ImportResult:
    """The spec document (as tool_specs/*.yaml hold), why operations were skipped, and how many were selected."""

    document: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    operations: int = 0

    @property
    def skipped(self) -> int:
        return self.operations - len(self.document["tools"])


def import_openapi(path: Path, *, tags: Sequence[str] = (), paths: Sequence[str] = (),
                   name: str | None = None) -> ImportResult:
    """One tool per selected operation (by tag and/or path glob; all when neither is given)."""
    shown = str(path)
    document = read_document(path)
    version = detect_version(document, shown)
    refs = RefResolver(path, document)
    operations = select_operations(document, refs, tags, paths, shown)
    broken = structure_problems(_imported_part(document, operations), version, shown)
    builder = ToolBuilder(refs, SchemaConverter(refs, legacy=version in ("2.0", "3.0")), document, version == "2.0")
    tools, warnings = _build_tools(builder, operations, broken, shown)
    spec = {"server": _server(document, name), "world": {"description": world_description(document)},
            "tools": tools}
    warnings += drop_unloadable(spec, shown)
    if not spec["tools"]:
        listed = "\n".join(f"  - {w}" for w in warnings[:MAX_LISTED])
        raise OpenAPIImportError(f"{shown}: none of the {len(operations)} selected operation(s) could be "
                                 f"converted:\n{listed}")
    return ImportResult(spec, warnings, len(operations))


def detect_version(document: Any, shown: str) -> str:
    """'2.0', '3.0', '3.1' or '3.2' from the `swagger` or `openapi` field."""
    if not isinstance(document, dict):
        raise OpenAPIImportError(f"{shown}#: expected an OpenAPI document (a mapping with 'openapi' or "
                                 f"'swagger'), got {type(document).__name__}")
    if "swagger" in document:
        if str(document["swagger"]) == "2.0":
            return "2.0"
        raise OpenAPIImportError(f"{shown}#/swagger: {document['swagger']!r} is not supported; expected \"2.0\"")
    found = re.match(r"^3\.([0-2])\.\d+", str(document.get("openapi", "")))
    if found is None:
        raise OpenAPIImportError(f"{shown}#/openapi: {document.get('openapi')!r} is not a supported version; "
                                 "expected 3.0.x, 3.1.x or swagger: \"2.0\"")
    return f"3.{found.group(1)}"


def _imported_part(document: dict[str, Any], operations: list[Operation]) -> dict[str, Any]:
    """The document with only the selected paths and without its reusable sections (components, 2.0's
    definitions): those are checked where operations use them, by the converter and the spec loader.
    Checking all of GitHub's components takes seconds; one tag's paths, a fraction of one."""
    reusable = {"components", "definitions", "parameters", "responses"}
    selected = {op.path for op in operations}
    kept = {key: value for key, value in document.items() if key not in reusable}
    kept["paths"] = {path: item for path, item in document["paths"].items() if path in selected}
    return kept


def structure_problems(document: dict[str, Any], version: str, shown: str) -> dict[str, str]:
    """Check the document against its version's OpenAPI schema. Problems inside an operation (or its path)
    are returned by the operation's pointer, to be reported with it; any other problem rejects the document."""
    from openapi_spec_validator import schemas

    validator = {"2.0": schemas.openapi_v2_schema_validator, "3.0": schemas.openapi_v30_schema_validator,
                 "3.1": schemas.openapi_v31_schema_validator,
                 "3.2": getattr(schemas, "openapi_v32_schema_validator", schemas.openapi_v31_schema_validator)}
    broken: dict[str, str] = {}
    problems: list[str] = []
    for error in validator[version].iter_errors(document):
        leaf = best_match([error]) or error
        parts = list(leaf.absolute_path)
        where = "".join("/" + escape(p) for p in parts)
        scope = _operation_scope(parts)
        if scope is None:
            problems.append(f"{shown}#{where}: {_short(leaf.message)}")
        else:
            broken.setdefault(scope, f"#{where}: {_short(leaf.message)}")
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems[:MAX_LISTED])
        more = f"\n  (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        raise OpenAPIImportError(f"{shown} is not a valid OpenAPI {version} document:\n{listed}{more}")
    return broken


def _operation_scope(parts: list[Any]) -> str | None:
    if len(parts) < 2 or parts[0] != "paths":
        return None
    if len(parts) >= 3 and parts[2] in METHODS:
        return f"/paths/{escape(parts[1])}/{parts[2]}"
    return f"/paths/{escape(parts[1])}"


def _short(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[:limit] + "..."


def select_operations(document: dict[str, Any], refs: RefResolver, tags: Sequence[str], globs: Sequence[str],
                      shown: str) -> list[Operation]:
    """The operations with any of the tags and a path matching any of the globs, in document order."""
    everything = list(_operations(document, refs, shown))
    patterns = [glob_pattern(glob) for glob in globs]
    selected = [op for op in everything if (not tags or set(tags) & set(op.tags))
                and (not patterns or any(pattern.fullmatch(op.path) for pattern in patterns))]
    if not selected:
        raise OpenAPIImportError(_nothing_selected(document, everything, tags, globs, shown))
    return selected


def glob_pattern(glob: str) -> re.Pattern[str]:
    """A path glob: `*` matches within one segment, `**` across segments, `?` one character."""
    pieces = re.split(r"(\*\*|\*|\?)", glob)
    return re.compile("".join({"**": ".*", "*": "[^/]*", "?": "[^/]"}.get(p, re.escape(p)) for p in pieces))


def _operations(document: dict[str, Any], refs: RefResolver, shown: str) -> list[Operation]:
    found = []
    items = document.get("paths") or {}
    for path, item in items.items() if isinstance(items, dict) else ():
        base, pointer = refs.root_uri, f"/paths/{escape(path)}"
        if isinstance(item, dict) and isinstance(item.get("$ref"), str):
            try:
                item, base, pointer = refs.lookup(item["$ref"], base, f"{shown}#{pointer}")
            except UnconvertibleError as exc:
                raise OpenAPIImportError(str(exc)) from None
        if isinstance(item, dict):
            found += [Operation(path, method, item[method], item, base, pointer)
                      for method in METHODS if isinstance(item.get(method), dict)]
    return found


def _nothing_selected(document: dict[str, Any], everything: list[Operation], tags: Sequence[str],
                      globs: Sequence[str], shown: str) -> str:
    if not everything:
        webhooks = " (webhooks are not imported: nobody calls them)" if document.get("webhooks") else ""
        return f"{shown}#/paths: the document has no operations{webhooks}"
    known = sorted({tag for op in everything for tag in op.tags})
    wanted = ", ".join([*(f"--tag {t}" for t in tags), *(f"--path {g}" for g in globs)])
    return (f"{shown}: no operation matches {wanted} (of {len(everything)}); its tags are: "
            f"{', '.join(known) or 'none'}; path globs look like '/pets/*' or '/repos/**'")


def _build_tools(builder: ToolBuilder, operations: list[Operation], broken: dict[str, str],
                 shown: str) -> tuple[list[dict[str, Any]], list[str]]:
    tools: list[dict[str, Any]] = []
    warnings: list[str] = []
    taken: set[str] = set()
    for op in operations:
        label = f"skipped {op.method.upper()} {op.path}"
        problem = broken.get(op.pointer) or broken.get(op.pointer.rsplit("/", 1)[0])
        if problem is not None:  # tried anyway: the converter and the spec loader decide whether it is usable
            warnings.append(f"{shown}{problem} (the operation is converted as far as it can be)")
        try:
            tool = builder.build(op, tool_name(op, taken))
        except UnconvertibleError as exc:
            warnings.append(f"{label}: {exc}")
            continue
        except RecursionError:
            warnings.append(f"{label}: {shown}#{op.pointer}: its schemas nest too deeply to convert")
            continue
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a shape the checks above let through
            warnings.append(f"{label}: {shown}#{op.pointer}: cannot be converted ({type(exc).__name__}: {exc})")
            continue
        effect = infer_state(tool, op.method, op.path)
        if effect is not None:  # the REST shape says how the call touches the world's state
            tool["x-sim"] = {"state": effect}
        taken.add(tool["name"])
        tools.append(tool)
    return tools, warnings


def _server(document: dict[str, Any], name: str | None) -> dict[str, Any]:
    info = _info(document)
    server: dict[str, Any] = {"name": name or str(info.get("title") or "openapi")}
    if info.get("version") is not None:
        server["version"] = str(info["version"])
    return server


def _info(document: dict[str, Any]) -> dict[str, Any]:
    info = document.get("info")
    return info if isinstance(info, dict) else {}


def world_description(document: dict[str, Any]) -> str:
    """The API's title, description and base URL: what the world model knows of the world it simulates."""
    info = _info(document)
    parts = [str(info["title"]).strip()] if info.get("title") else []
    if info.get("description"):
        parts.append(first_paragraphs(str(info["description"]).strip(), defaults.IMPORT_DESCRIPTION_CHARS))
    base_url = _base_url(document)
    if base_url:
        parts.append(f"Base URL: {base_url}")
    return "\n\n".join(parts) or "An HTTP API described by an OpenAPI document."


def first_paragraphs(text: str, budget: int) -> str:
    """TEXT's leading paragraphs that fit in BUDGET characters (at least the start of the first), and a line
    saying how much was left out: a spec's world description must fit the model's context."""
    if len(text) <= budget:
        return text
    kept: list[str] = []
    size = 0
    for paragraph in re.split(r"\n\s*\n", text):
        if size + len(paragraph) > budget:
            break
        kept.append(paragraph)
        size += len(paragraph) + 2
    shown = "\n\n".join(kept) if kept else text[:budget].rsplit(" ", 1)[0]
    left = len(text) - len(shown)
    return f"{shown}\n\n(The rest of the API's description, {left:,} characters, is left out.)"


def _base_url(document: dict[str, Any]) -> str | None:
    servers = document.get("servers")
    if isinstance(servers, list) and servers and isinstance(servers[0], dict) and servers[0].get("url"):
        return str(servers[0]["url"])
    if document.get("host"):
        schemes = document.get("schemes")
        scheme = schemes[0] if isinstance(schemes, list) and schemes else "https"
        return f"{scheme}://{document['host']}{document.get('basePath', '')}"
    return None


def drop_unloadable(spec: dict[str, Any], shown: str) -> list[str]:
    """Check the spec with the spec loader; drop (with a warning) every tool it rejects."""
    warnings: list[str] = []
    for _ in range(3):  # a second round only confirms that the rest loads
        rejected = _loader_problems(spec)
        if not rejected:
            return warnings
        for index in sorted(rejected, reverse=True):
            tool = spec["tools"].pop(index)
            warnings.append(f"{shown}: dropped tool {tool['name']!r}, which the spec loader rejects: "
                            f"{'; '.join(rejected[index][:3])}")
    raise OpenAPIImportError(f"{shown}: the converted spec still does not load; please report this")


def _loader_problems(spec: dict[str, Any]) -> dict[int, list[str]]:
    if not spec["tools"]:
        return {}
    with tempfile.TemporaryDirectory(prefix="mcp-sim-openapi-") as scratch:
        checked = Path(scratch) / "spec.json"
        checked.write_text(json.dumps(spec), encoding="utf-8")
        try:
            load_catalog([checked])
        except SpecError as exc:
            return _by_tool(exc.problems)
    return {}


def _by_tool(problems: list[str]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for problem in problems:
        match = re.search(r"#/tools/(\d+)(?: \(tool '[^']*'\))?(.*)$", problem, re.DOTALL)
        if match is None:
            raise OpenAPIImportError(f"the converted spec does not load ({problem}); please report this")
        found.setdefault(int(match.group(1)), []).append(match.group(2).lstrip("/: ") or problem)
    return found


_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):
    """Writes shared values in full: the same enum reached from two tools needs no YAML alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def write_spec(spec: dict[str, Any], out: Path) -> None:
    """Write the spec as YAML, or JSON for a .json path."""
    if out.suffix.lower() == ".json":
        text = json.dumps(spec, indent=2, ensure_ascii=False) + "\n"
    else:
        text = yaml.dump(spec, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
