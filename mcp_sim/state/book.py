"""Every tool's effect, made concrete once for a catalog, and the live data of each world it plans against.

The book knows tools only by the few fields it reads (the `Tool` protocol), so the spec layer above can
hand it its own objects without this package importing it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol

from mcp_sim.state.batch import Batch, BatchPlan, Seen, swap_noun
from mcp_sim.state.batch import commit as commit_batch
from mcp_sim.state.batch import plan as plan_batch
from mcp_sim.state.batch_infer import infer_batches
from mcp_sim.state.diffs import diff_template
from mcp_sim.state.effect import StateEffect
from mcp_sim.state.infer import infer_effects
from mcp_sim.state.layout import Layout, describe, resolve
from mcp_sim.state.live import LiveData
from mcp_sim.state.naming import singular, verb_and_noun
from mcp_sim.state.next_read import plan_next
from mcp_sim.state.pins import get_pointer
from mcp_sim.state.plan import StateChange, StatePlan, Template, commit, plan
from mcp_sim.state.repository_plan import RepositoryPlan, commit_repository, plan_repository
from mcp_sim.state.repository_text import Case, Voice, learn_voice
from mcp_sim.state.sql import Style, learn_style
from mcp_sim.state.templates import list_template, write_template


class Example(Protocol):
    arguments: dict[str, Any]
    result: Any
    is_error: bool


class Tool(Protocol):
    name: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    state: StateEffect | None
    examples: list[Any]


class ToolGroup(Protocol):
    """One spec file: its tools and its seed data."""

    source: str
    world_data: Any

    @property
    def tools(self) -> list[Any]: ...


class StateBook:
    def __init__(self, groups: Iterable[ToolGroup]):
        self._layouts: dict[str, Layout] = {}
        self._tools: dict[str, Tool] = {}
        self._sources: dict[str, str] = {}  # tool -> the spec file it belongs to
        # Tools that touch many records per call (state.batch), and the answer each one's examples all give.
        self._batches: dict[str, Batch] = {}
        self._constants: dict[str, Any] = {}
        for group in groups:
            batches = infer_batches([(tool.name, tool.input_schema, tool.output_schema)
                                     for tool in group.tools if tool.state is None])
            for tool in group.tools:
                if tool.name in batches:
                    self._batches[tool.name], self._tools[tool.name] = batches[tool.name], tool
                    self._sources[tool.name] = group.source
                    self._constants[tool.name] = _constant_answer(tool, batches[tool.name])
            undeclared = [(tool.name, tool.output_schema) for tool in group.tools
                          if tool.state is None and tool.name not in batches]
            declared = [tool.state.collection for tool in group.tools if tool.state is not None]
            declared += [name for batch in batches.values() if batch.kind == "create"
                         for name in (batch.collection, *(batch.parent or ())[:1])]
            inferred = infer_effects(undeclared, group.world_data, declared)
            effects = {tool.name: tool.state or inferred.get(tool.name) for tool in group.tools
                       if tool.name not in batches}
            keys: dict[str, str] = {}  # collection -> its key, as the tools that name a record by an argument show it
            for rounds in range(2):
                for tool in group.tools:
                    effect = effects.get(tool.name)
                    if effect is None or effect.op == "none":
                        continue
                    # A list names no record, so its declared effect seldom says the key: its siblings do.
                    if rounds and (tool.state is None or effect.op == "list") and effect.collection in keys:
                        effect = replace(effect, key=keys[effect.collection])
                    if effect.op == "sql" and effect.readonly is None:  # read_query only reads
                        effect = replace(effect, readonly=(verb_and_noun(tool.name) or ("", ""))[0] in ("read", "list"))
                    records = LiveData(group.world_data).records(effect.collection, effect.key)
                    layout = resolve(effect, tool.input_schema, tool.output_schema, records)
                    if layout.argument is not None:
                        keys.setdefault(effect.collection, layout.key)
                    self._layouts[tool.name] = layout
                    self._tools[tool.name] = tool
                    self._sources[tool.name] = group.source
        self._templates = {name: template for name in self._layouts
                           if (template := self._template(name)) is not None}
        self._share_sql_failures()
        self._share_confirmations()
        self._voices = self._repository_voices()

    def layout(self, tool: str) -> Layout | None:
        """The tool's effect on one record as it is applied: its collection, op, and the arguments naming the
        record (None for a tool without one, and for one that touches many records per call)."""
        return self._layouts.get(tool)

    def effect(self, tool: str) -> StateEffect | None:
        if tool in self._batches:
            return self._batches[tool].effect()
        layout = self._layouts.get(tool)
        return None if layout is None else layout.effect

    def effects(self) -> dict[str, StateEffect]:
        return {**{name: layout.effect for name, layout in self._layouts.items()},
                **{name: batch.effect() for name, batch in self._batches.items()}}

    def describe(self) -> dict[str, str]:
        """Each tool's effect as it is applied, in words."""
        return {**{name: describe(layout) for name, layout in self._layouts.items()},
                **{name: batch.describe() for name, batch in self._batches.items()}}

    def plan(self, tool: str, arguments: dict[str, Any], live: LiveData, world: str) -> StatePlan | None:
        """What LIVE says about this call (None: the tool has no effect, or the state has nothing to say)."""
        if tool in self._batches:
            batch, spec = self._batches[tool], self._tools[tool]
            failures = tuple((_named(batch, e.arguments), str(e.result)) for e in spec.examples if e.is_error)
            return plan_batch(batch, live, arguments, spec.output_schema, self._constants.get(tool), failures,
                              _seen(batch, spec.examples), world)
        layout = self._layouts.get(tool)
        if layout is None:
            return None
        spec = self._tools[tool]
        if layout.effect.op == "next":
            return plan_next(layout, live, arguments, spec.output_schema)
        if layout.effect.op == "vcs":
            return plan_repository(layout, live, tool, arguments, self._voices[self._sources[tool]],
                                   spec.output_schema, world)
        errors = [(e.arguments, str(e.result)) for e in spec.examples if e.is_error]
        seen = [_example_key(layout, e) for e in spec.examples if not e.is_error]
        return plan(layout, live, arguments, spec.output_schema, error_texts=errors,
                    seen_keys=[key for key in seen if key is not None], world=world,
                    template=self._templates.get(tool))

    def _repository_voices(self) -> dict[str, Voice]:
        """Per spec file, what the examples of all its repository tools teach (one repository, one voice)."""
        cases: dict[str, list[Case]] = {}
        for name, layout in self._layouts.items():
            if layout.effect.op == "vcs":
                cases.setdefault(self._sources[name], []).extend(
                    Case(name, layout.effect.command or "", e.arguments, str(e.result), e.is_error)
                    for e in self._tools[name].examples)
        return {source: learn_voice(found) for source, found in cases.items()}

    def _share_sql_failures(self) -> None:
        """A database fails in one voice: an SQL tool whose examples show no failure takes a sibling's."""
        styles = {name: style for name, style in self._templates.items() if isinstance(style, Style)}
        for name, style in styles.items():
            if style.error_prefix is not None:
                continue
            collection = self._layouts[name].effect.collection
            voice = next((other for sibling, other in styles.items() if other.error_prefix is not None
                          and self._layouts[sibling].effect.collection == collection
                          and self._sources[sibling] == self._sources[name]), None)
            if voice is not None:
                self._templates[name] = replace(style, error_prefix=voice.error_prefix, error_flag=voice.error_flag)

    def _share_confirmations(self) -> None:
        """A server confirms in one voice: a batch delete whose examples show no answer takes a sibling's
        ("Observations deleted successfully" -> "Relations deleted successfully"), its noun swapped."""
        for name, batch in self._batches.items():
            if batch.kind not in ("delete", "discard") or self._constants.get(name) is not None:
                continue
            for sibling, answer in list(self._constants.items()):
                if answer is None or self._sources[sibling] != self._sources[name]:
                    continue
                swapped = swap_noun(answer, _noun(sibling), _noun(name))
                if swapped is not None:
                    self._constants[name] = swapped
                    break

    def _template(self, name: str) -> Template | None:
        """The answer TOOL's success examples spell out (see templates), if they do."""
        layout, tool = self._layouts[name], self._tools[name]
        if layout.effect.op == "vcs":  # the file's repository voice answers it (_repository_voices)
            return None
        if layout.effect.op == "sql":  # its failures teach as much as its successes
            return learn_style(((e.arguments, e.result, e.is_error) for e in tool.examples), layout.argument,
                               layout.effect.sql, layout.effect.dialect)
        successes = [e for e in tool.examples if not e.is_error]
        if not successes:
            return None
        if layout.effect.op == "update":  # an edit's answer may be its diff
            return write_template((e.arguments, e.result) for e in successes) or \
                diff_template(((e.arguments, e.result) for e in successes), layout.argument)
        if layout.effect.writes:
            return write_template((e.arguments, e.result) for e in successes)
        if layout.effect.op != "list" or tool.output_schema is not None:
            return None
        # The keys the collection's other tools named in their examples: what a list example may show.
        keys = {str(e.arguments[other.argument]) for sibling, other in self._layouts.items()
                if other.effect.collection == layout.effect.collection and other.argument is not None
                and self._sources[sibling] == self._sources[name]
                for e in self._tools[sibling].examples if isinstance(e.arguments.get(other.argument), str | int)}
        return list_template([e.result for e in successes if isinstance(e.result, str)], keys)

    def known_keys(self, argument: str, live: Callable[[str], LiveData]) -> list[str]:
        """The keys of every collection whose records ARGUMENT names (a tool's key argument, or `ticket_id` for
        tickets by id), as LIVE (the
        world's live data of a spec file) holds them: what a completion of that argument may offer."""
        keys: list[str] = []
        for name, layout in self._layouts.items():
            one = singular(layout.effect.collection)
            if argument in (layout.argument, f"{one}_{layout.key}", f"{one}{layout.key.capitalize()}"):
                records = live(self._sources[name]).records(layout.effect.collection, layout.key)
                keys += [str(record[layout.key]) for record in records if record.get(layout.key) is not None]
        return list(dict.fromkeys(keys))

    @staticmethod
    def commit(step: StatePlan, live: LiveData, structured: Any, text: str, is_error: bool) -> StateChange | None:
        if isinstance(step, BatchPlan):
            return commit_batch(step, live, is_error)
        if isinstance(step, RepositoryPlan):
            return commit_repository(step, live, text, is_error)
        return commit(step, live, structured, text, is_error)


def _named(batch: Batch, arguments: dict[str, Any]) -> Any:
    """The record a batch call's first item names (the entity an add_observations example was about)."""
    items = arguments.get(batch.argument) if batch.argument else None
    first = items[0] if isinstance(items, list) and items else None
    return first.get(batch.ref) if isinstance(first, dict) and batch.ref else None


def _seen(batch: Batch, examples: list[Any]) -> Seen:
    """The keys a minted create's success examples gave its items and their parent."""
    if not batch.minted:
        return Seen()
    answers = [e.result for e in examples if not e.is_error and isinstance(e.result, dict)]
    items = [item.get(batch.key or "") for answer in answers for item in answer.get(batch.argument or "") or []
             if isinstance(item, dict)]
    parents = [answer.get(batch.parent[1]) for answer in answers] if batch.parent else []
    return Seen(tuple(key for key in items if key is not None), tuple(key for key in parents if key is not None))


def _noun(tool: str) -> str:
    return (verb_and_noun(tool) or ("", ""))[1]


def _constant_answer(tool: Tool, batch: Batch) -> Any:
    """The structured answer every success example of a batch delete gives alike, naming nothing its
    arguments said ({"success": true, "message": "Observations deleted successfully"}), or None."""
    if batch.kind not in ("delete", "discard") or tool.output_schema is None:
        return None
    successes = [e for e in tool.examples if not e.is_error]
    answers = {json.dumps(e.result, sort_keys=True) for e in successes}
    if len(answers) != 1:
        return None
    text = answers.pop()
    if any(leaf in text for e in successes for leaf in _texts(e.arguments)):
        return None
    answer = json.loads(text)
    return answer if isinstance(answer, dict) else None


def _texts(value: Any) -> list[str]:
    """The strings of VALUE, however deep (those long enough to mean something when found elsewhere)."""
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return [value] if isinstance(value, str) and len(value) >= 3 else []


def _example_key(layout: Layout, example: Example) -> Any:
    """The key a demonstration's answer shows, so a collection that starts empty continues its pattern."""
    result = example.result
    if not isinstance(result, dict) or layout.record_at is None:
        return None
    record = get_pointer(result, layout.record_at)
    return record.get(layout.key) if isinstance(record, dict) else None
