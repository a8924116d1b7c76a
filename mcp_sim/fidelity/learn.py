"""Teach a spec from real traces: recorded results become the tools' `x-sim.examples`, and the fields the
real tool computes (a count, a copy of an argument, a list that grows) become its `x-sim.rules`.

Per tool every distinct example that fits its budget (characters), ordered farthest first, so the
system prompt's first few show how the real tool answers different requests, and each call brings the rest
nearest to its own arguments (core.demonstrations). A rule is kept
only when it reproduces every recorded answer of its tool (state.field_rules); rules the spec already
declares are kept as written (they are the user's correction) unless --replace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.likeness import distance, features
from mcp_sim.core.specs import validation_error
from mcp_sim.core.text_json import json_object
from mcp_sim.fidelity.learn_text_json import learn_text_json
from mcp_sim.rehearsal.traces import TraceRecord
from mcp_sim.state.field_rules import Past, learn_rules, rules_to_spec
from mcp_sim.state.naming import statement_argument, words
from mcp_sim.state.repository_commands import effect as repository_effect
from mcp_sim.state.repository_commands import repository_commands
from mcp_sim.state.sql import run
from mcp_sim.state.sql_catalog import CatalogCase, candidates, reproduces

DEFAULT_MAX_CHARS = 1500  # one example; longer ones are skipped


@dataclass
class LearnReport:
    added: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # why some records could not become examples
    rules: dict[str, list[str]] = field(default_factory=dict)  # per tool, the rules learned (described)
    catalog: dict[str, str] = field(default_factory=dict)  # catalog tools: the statement each became
    text_json: dict[str, str] = field(default_factory=dict)  # text tools that answer JSON: their shape, in words
    repository: dict[str, str] = field(default_factory=dict)  # git tools: the command each runs


def learn(document: dict[str, Any], records: Sequence[TraceRecord], max_per_tool: int | None = None,
          max_chars: int = DEFAULT_MAX_CHARS, replace: bool = False,
          tool_chars: int = defaults.LEARN_TOOL_CHARS) -> LearnReport:
    """Add examples from `records` to the spec `document` (a mapping with `tools`), in place: per tool at most
    MAX_PER_TOOL (None: no limit, existing ones count) of at most TOOL_CHARS characters in all."""
    report = LearnReport()
    tools = {tool.get("name"): tool for tool in document.get("tools", []) if isinstance(tool, dict)}
    if replace:
        for tool in tools.values():
            tool.get("x-sim", {}).pop("examples", None)
            tool.get("x-sim", {}).pop("rules", None)
            tool.get("x-sim", {}).pop("text_json", None)
            if tool.get("x-sim") == {}:
                del tool["x-sim"]
    candidates: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        definition = tools.get(record.tool)
        if definition is None:
            report.skipped.append(f"{record.session}#{record.step}: the spec has no tool {record.tool!r}")
            continue
        example, reason = example_from_record(record, definition, max_chars)
        if example is None:
            report.skipped.append(f"{record.session}#{record.step} ({record.tool}): {reason}")
        else:
            candidates.setdefault(record.tool, []).append(example)
    for name, found in candidates.items():
        sim = tools[name].setdefault("x-sim", {})
        existing = list(sim.get("examples") or [])
        room = len(found) if max_per_tool is None else max_per_tool - len(existing)
        budget = tool_chars - sum(_size(example) for example in existing)
        chosen = pick_diverse(found, existing, room, budget)
        if chosen:
            sim["examples"] = existing + chosen
        elif not sim:
            del tools[name]["x-sim"]  # made empty just above
        report.added[name] = len(chosen)
    report.text_json = learn_text_json(tools, records)
    _learn_rules(tools, records, report)
    _learn_catalog(tools, records, report)
    _learn_repository(tools, report)
    return report


def _learn_repository(tools: dict[Any, dict[str, Any]], report: LearnReport) -> None:
    """A git server's tools become commands on one repository (state.repository), in place of the
    collections their names suggest (git_create_branch's `branches`)."""
    report.repository = repository_commands(str(name) for name in tools)
    for name, command in report.repository.items():
        tools[name].setdefault("x-sim", {})["state"] = repository_effect(command)


# Words of a tool that reads a SQL database's catalog rather than its rows.
CATALOG_WORDS = {"table", "tables", "schema", "schemas", "column", "columns"}


def _learn_catalog(tools: dict[Any, dict[str, Any]], records: Sequence[TraceRecord], report: LearnReport) -> None:
    """A SQL server's catalog tools (list_tables, describe_table) become statements on the world's database
    when one reproduces every recorded answer (state.sql_catalog), in place of the list or read of a
    `tables` collection their names suggest."""
    statements: dict[Any, str] = {}
    for name, tool in tools.items():
        argument = statement_argument(tool)
        if argument is not None and _effect(tool).get("op") == "sql" and "sql" not in _effect(tool):
            statements[name] = argument
    if not statements:
        return
    effect = _effect(tools[next(iter(statements))])
    dialect = effect.get("dialect", "sqlite")
    catalog = {name for name, tool in tools.items() if name not in statements and _effect(tool).get("op") != "sql"
               and CATALOG_WORDS & set(words(str(name)))}
    cases: dict[Any, list[CatalogCase]] = {}
    for session in _sessions(records).values():
        database: list[str] = []
        for record in session:
            if record.tool in statements:
                sql = record.arguments.get(statements[record.tool])
                done = run(database, sql, dialect) if isinstance(sql, str) else None
                database = done.dump if done is not None and done.dump is not None else database
            elif record.tool in catalog:
                cases.setdefault(record.tool, []).append(
                    CatalogCase(list(database), record.arguments, record.text, record.is_error))
    for name, found in cases.items():
        for template in candidates(dialect, tools[name].get("inputSchema") or {}):
            if reproduces(template, dialect, found):
                learned = {"collection": effect["collection"], "op": "sql", "sql": template,
                           **({"dialect": dialect} if dialect != "sqlite" else {})}
                tools[name].setdefault("x-sim", {})["state"] = learned
                report.catalog[str(name)] = template
                break


def _effect(tool: dict[str, Any]) -> dict[str, Any]:
    effect = (tool.get("x-sim") or {}).get("state")
    return effect if isinstance(effect, dict) else {}


def _sessions(records: Sequence[TraceRecord]) -> dict[str, list[TraceRecord]]:
    """The records of each session in order, protocol errors left out (they answered nothing)."""
    sessions: dict[str, list[TraceRecord]] = {}
    for record in records:
        if record.protocol_error is None:
            sessions.setdefault(record.session, []).append(record)
    return {name: sorted(found, key=lambda r: r.step) for name, found in sessions.items()}


def _learn_rules(tools: dict[Any, dict[str, Any]], records: Sequence[TraceRecord], report: LearnReport) -> None:
    """x-sim.rules for each structured tool whose recorded answers some rule explains, from the records'
    sessions in order (a count needs the calls before each answer)."""
    history = [[Past(record.tool, record.arguments, _answer(record)) for record in found]
               for found in _sessions(records).values()]
    for name, tool in tools.items():
        sim = tool.get("x-sim") or {}
        output_schema = tool.get("outputSchema") or (sim.get("text_json") or {}).get("schema")
        if not isinstance(output_schema, dict) or sim.get("rules"):
            continue
        rules = learn_rules(str(name), tool.get("inputSchema") or {}, output_schema, history)
        if rules:
            tool.setdefault("x-sim", {})["rules"] = rules_to_spec(rules)
            report.rules[str(name)] = [rule.describe() for rule in rules]


def _answer(record: TraceRecord) -> dict[str, Any] | None:
    """The recorded answer as an object: its structuredContent, else the JSON object its text holds."""
    if record.is_error:
        return None
    structured = record.structured
    return structured if isinstance(structured, dict) else json_object(record.text)


def example_from_record(record: TraceRecord, tool: dict[str, Any], max_chars: int
                        ) -> tuple[dict[str, Any] | None, str | None]:
    """The spec example for one recorded call, or None and why it cannot be one."""
    if record.protocol_error is not None:
        return None, "the server answered with a protocol error, not a tool result"
    problem = validation_error(record.arguments, tool.get("inputSchema") or {})
    if problem:
        return None, f"the arguments do not fit the inputSchema: {problem}"
    example: dict[str, Any] = {"arguments": record.arguments}
    output_schema = tool.get("outputSchema")
    if record.is_error:
        example.update(result=record.text, isError=True)
    elif output_schema is not None:
        structured = record.structured
        if structured is None:
            return None, "the tool has an outputSchema but the result has no structuredContent"
        problem = validation_error(structured, output_schema)
        if problem:
            return None, f"the structuredContent does not fit the outputSchema: {problem}"
        example["result"] = structured
    else:
        example["result"] = record.text
    size = len(json.dumps(example, ensure_ascii=False))
    if size > max_chars:
        return None, f"{size} characters, over the {max_chars} allowed per example (--max-chars)"
    return example, None


def pick_diverse(candidates: Sequence[dict[str, Any]], existing: Sequence[dict[str, Any]], count: int,
                 budget: int | None = None) -> list[dict[str, Any]]:
    """Up to `count` candidates of at most `budget` characters in all, each as unlike the examples already
    chosen as possible.

    Distance is 1 - Jaccard similarity of the arguments' leaf `path=value` pairs (plus the error
    flag); repeated arguments are dropped. At most one failure (flagged, or a result that reads "...
    error: ...") is taken, and when there is room for two or more examples it comes second, among the
    examples the system prompt shows: otherwise successes fill those places and the model never sees how the
    real tool fails. Ties keep recorded order.
    """
    chosen: list[dict[str, Any]] = []
    seen = {_key(e) for e in existing}
    pool = []
    for candidate in candidates:
        if _key(candidate) not in seen:
            seen.add(_key(candidate))
            pool.append(candidate)
    errors_taken = sum(1 for e in existing if _fails(e))
    # One place for an error, if the spec has none yet, the traces hold one and a success still fits too.
    reserved = errors_taken == 0 and count >= 2 and any(_fails(c) for c in pool)
    error_place = min(count, defaults.SHOWN_EXAMPLES) - 1  # the last place the system prompt shows
    room = budget
    while pool and len(chosen) < max(0, count):
        pool = [c for c in pool if room is None or _size(c) <= room]
        successes = [c for c in pool if not _fails(c)]
        errors = [c for c in pool if _fails(c)] if errors_taken == 0 else []
        if reserved and len(chosen) >= error_place and errors:
            options = errors
        else:
            options = successes or errors
        if not options:
            break
        picked = max(options, key=lambda c: _distance(c, [*existing, *chosen]))
        pool.remove(picked)
        chosen.append(picked)
        errors_taken += bool(_fails(picked))
        room = None if room is None else room - _size(picked)
    return chosen


def _size(example: dict[str, Any]) -> int:
    return len(json.dumps(example, ensure_ascii=False))


def _key(example: dict[str, Any]) -> str:
    return json.dumps(example["arguments"], sort_keys=True)


# A result that reads as a failure although the server did not flag it ("Database error: ...").
_FAILURE_TEXT = re.compile(r"^\s*(\w+\s)?error\b", re.IGNORECASE)


def _fails(example: dict[str, Any]) -> bool:
    result = example.get("result")
    return bool(example.get("isError")) or (isinstance(result, str) and _FAILURE_TEXT.match(result) is not None)


def _features(example: dict[str, Any]) -> set[str]:
    return features(example["arguments"], bool(example.get("isError")))


def _distance(example: dict[str, Any], others: Sequence[dict[str, Any]]) -> float:
    """Distance to the nearest of `others` (1.0 when there are none)."""
    return distance(_features(example), [_features(other) for other in others])
