"""Fault injection: rules (from a file or a spec's x-sim) and a seeded plan that decides which calls go wrong.

Pure logic: nothing here awaits, sleeps or speaks MCP. The kinds, their parameters and what each does live in
fault_kinds.py; the fault hook asks `FaultPlan.decide` before a call and lets each fired kind act in its
phase. Every applied fault is named by `label` in `_meta["mcp-sim/simulation"]["faults"]`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import random
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mcp_sim.base.errors import ProblemsError
from mcp_sim.base.result import SimulationResult
from mcp_sim.xsim.fault_kind import Details
from mcp_sim.xsim.fault_kinds import FAULT_KINDS

logger = logging.getLogger(__name__)

# Kinds that act before any answer is made (a protocol error ends the call there too), and after it.
BEFORE_MODEL = frozenset(name for name, kind in FAULT_KINDS.items() if kind.phase in ("before", "protocol"))
AFTER_MODEL = frozenset(name for name, kind in FAULT_KINDS.items() if kind.phase == "after")
WHEN = ("probability", "nth", "after")
# The parameters each kind takes; any other parameter on a rule is a mistake worth reporting.
PARAMETERS: dict[str, frozenset[str]] = {name: frozenset(kind.parameters) for name, kind in FAULT_KINDS.items()}
ALL_PARAMETERS = frozenset().union(*PARAMETERS.values())


def _known_kind(kind: str) -> str:
    if kind not in FAULT_KINDS:
        names = [repr(name) for name in FAULT_KINDS]
        expected = f"{', '.join(names[:-1])} or {names[-1]}"  # as pydantic words a Literal
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
    return kind


Kind = Annotated[str, AfterValidator(_known_kind)]


class FaultFileError(ProblemsError):
    """A fault rule file (or a spec's x-sim.faults) is invalid; every problem is listed with its pointer."""

    subject = "the fault rules"


class FaultRule(BaseModel):
    """One rule: which tool (a name or an fnmatch glob), when (exactly one of probability, nth, after), what."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    tool: str = Field(min_length=1)
    kind: Kind
    probability: float | None = Field(default=None, ge=0.0, le=1.0)
    nth: int | None = Field(default=None, ge=1)
    after: int | None = Field(default=None, ge=0)
    message: str | None = Field(default=None, min_length=1)
    ms: int | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=1)
    retry_after: int | None = Field(default=None, ge=0)
    code: int | None = None
    text: str | None = Field(default=None, min_length=1)
    _where: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _one_when_and_fitting_parameters(self) -> FaultRule:
        problems = _shape_problems(self.model_dump(exclude_none=True))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def where(self) -> str:
        """Where the rule was written: file#/faults/N, for labels and messages."""
        return self._where

    def matches(self, tool: str) -> bool:
        return fnmatch.fnmatchcase(tool, self.tool)

    def fires(self, call: int, draw: float) -> bool:
        """Whether the CALL-th matching call (1-based) fails, given a uniform DRAW in [0, 1)."""
        if self.probability is not None:
            return draw < self.probability
        if self.nth is not None:
            return call == self.nth
        assert self.after is not None  # the validator guarantees one "when"
        return call > self.after

    def parameter(self, name: str) -> Any:
        """The rule's value for NAME, or its kind's default for it (None where there is none)."""
        value = getattr(self, name)
        return FAULT_KINDS[self.kind].parameters.get(name) if value is None else value


def _shape_problems(raw: dict[str, Any]) -> list[str]:
    """What pydantic's field checks cannot say: one "when", and parameters that fit the kind."""
    problems = []
    given = [name for name in WHEN if raw.get(name) is not None]
    if len(given) != 1:
        problems.append(f"give exactly one of probability, nth or after (got {', '.join(given) or 'none'})")
    kind = raw.get("kind")
    if isinstance(kind, str) and kind in PARAMETERS:
        stray = sorted(name for name in ALL_PARAMETERS - PARAMETERS[kind] if raw.get(name) is not None)
        if stray:
            takes = ", ".join(sorted(PARAMETERS[kind])) or "no parameters"
            problems.append(f"{', '.join(stray)} does not apply to kind {kind!r} (it takes {takes})")
    return problems


class _FaultFile(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    faults: list[FaultRule]


_RULES = TypeAdapter(list[FaultRule])


# --- parsing ---------------------------------------------------------------------------------------------------

def load_faults(path: str | Path) -> list[FaultRule]:
    """The rules of a fault file (YAML or JSON: `faults: [...]`); raise FaultFileError listing every problem."""
    source = str(path)
    document = _read(Path(path))
    if not isinstance(document, dict):
        raise FaultFileError([f"{source}: expected a mapping like 'faults: [{{tool: ..., kind: ..., "
                              f"probability: ...}}]', got {type(document).__name__}"])
    try:
        rules = _FaultFile.model_validate(document).faults
    except ValidationError as exc:
        raw = document.get("faults")
        raise FaultFileError(_problems(exc, f"{source}#", raw, f"{source}#/faults")) from None
    return _located(rules, f"{source}#/faults")


def rules_from_spec(tool_name: str, raw_list: Any, where: str) -> list[FaultRule]:
    """The rules of a spec's `x-sim.faults` for TOOL_NAME (`tool` may be omitted there).

    WHERE is the JSON pointer of the list, e.g. "tool_specs/ops.yaml#/tools/2/x-sim/faults"; problems name
    `WHERE/INDEX/FIELD`. Raises FaultFileError; its `.problems` can join the spec loader's list.
    """
    if not isinstance(raw_list, list):
        raise FaultFileError([f"{where}: must be a list of fault rules like {{kind: error, probability: 0.5}}"])
    problems = [f"{where}/{index}/tool: {item['tool']!r} does not name this tool ({tool_name!r}); "
                "omit 'tool' in x-sim" for index, item in enumerate(raw_list)
                if isinstance(item, dict) and isinstance(item.get("tool"), str)
                and not fnmatch.fnmatchcase(tool_name, item["tool"])]
    items = [{"tool": tool_name, **item} if isinstance(item, dict) else item for item in raw_list]
    try:
        rules = _RULES.validate_python(items)
    except ValidationError as exc:
        problems.extend(_problems(exc, where, items, where))
    if problems:
        raise FaultFileError(problems)
    return _located(rules, where)


def unmatched(rules: Sequence[FaultRule], tool_names: Sequence[str]) -> list[str]:
    """Problems for rules whose `tool` matches none of TOOL_NAMES (a typo would otherwise never fire)."""
    known = ", ".join(sorted(tool_names)) or "none"
    return [f"{rule.where}/tool: {rule.tool!r} matches no tool (tools: {known})"
            for rule in rules if not any(rule.matches(name) for name in tool_names)]


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: a UTF-8 BOM is dropped
    except (OSError, UnicodeDecodeError) as exc:
        raise FaultFileError([f"{path}: cannot read the fault file: {exc}"]) from None
    try:
        return yaml.safe_load(text)  # YAML is a superset of JSON: one parser reads both
    except RecursionError:
        raise FaultFileError([f"{path}: nested too deeply; a fault file is a flat list of rules"]) from None
    except ValueError as exc:  # an integer past Python's 4300-digit limit
        raise FaultFileError([f"{path}: {exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise FaultFileError([f"{path}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}"]) from None


def _problems(exc: ValidationError, prefix: str, raw_rules: Any, where: str) -> list[str]:
    """Pydantic's field errors as `pointer: message` lines, plus every rule's shape problems."""
    problems = _field_problems(exc, prefix)
    for index, raw in enumerate(raw_rules if isinstance(raw_rules, list) else []):
        if isinstance(raw, dict):
            problems.extend(f"{where}/{index}: {problem}" for problem in _shape_problems(raw))
    return problems


def _field_problems(exc: ValidationError, prefix: str) -> list[str]:
    problems = []
    for error in exc.errors():
        if error["type"] == "value_error":
            continue  # the model validator's shape problems; _shape_problems reports them for every rule
        pointer = "".join(f"/{part}" for part in error["loc"])
        message = "required field missing" if error["type"] == "missing" else error["msg"]
        if error["type"] == "extra_forbidden":
            message = f"unknown field (a rule takes tool, kind, one of {', '.join(WHEN)}, and " \
                      f"{', '.join(sorted(ALL_PARAMETERS))})"
        problems.append(f"{prefix}{pointer}: {message}")
    return problems


def _located(rules: list[FaultRule], where: str) -> list[FaultRule]:
    for index, rule in enumerate(rules):
        rule._where = f"{where}/{index}"
    return rules


# --- deciding --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fault:
    """A rule that fired on one call."""

    rule: FaultRule
    index: int  # the rule's position in the plan
    tool: str
    world: str
    call: int  # which matching call of this rule in this world (1-based)
    token: int  # a seeded number for the fault's own choices (which injection, which field)

    @property
    def kind(self) -> str:
        return self.rule.kind

    def parameter(self, name: str) -> Any:
        return self.rule.parameter(name)

    def label(self, details: Details | None = None) -> Details:
        return label(self, details)


class FaultPlan:
    """Decides, deterministically under a seed, which faults each call gets. Thread-safe."""

    def __init__(self, rules: Sequence[FaultRule], seed: int = 0):
        self.rules = list(rules)
        self.seed = seed
        self._calls: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds this plan can inject (e.g. keep a ResultMemory only when "stale" is among them)."""
        return frozenset(rule.kind for rule in self.rules)

    def decide(self, world: str, tool: str) -> list[Fault]:
        """The faults of this call of TOOL in WORLD, in rule order (count it against every matching rule)."""
        faults = []
        for index, rule in enumerate(self.rules):
            if not rule.matches(tool):
                continue
            call = self._count(world, index)
            rng = random.Random(_stable_seed(self.seed, world, index, call))
            draw, token = rng.random(), rng.getrandbits(32)
            if rule.fires(call, draw):
                logger.info("fault %s (rule %d, %s) on %s, call %d in world %s",
                            rule.kind, index, rule.where or "-", tool, call, world)
                faults.append(Fault(rule, index, tool, world, call, token))
        return faults

    def _count(self, world: str, index: int) -> int:
        with self._lock:
            call = self._calls[(world, index)] = self._calls.get((world, index), 0) + 1
        return call


def _stable_seed(*parts: Any) -> int:
    # hash() is salted per process; the same seed must give the same faults in every run and process.
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).digest()
    return int.from_bytes(digest[:8], "big")


class ResultMemory:
    """The last few successful results per (world, tool): the `earlier` that `stale` repeats. Thread-safe."""

    def __init__(self, keep: int = 8):
        self._results: dict[tuple[str, str], deque[SimulationResult]] = {}
        self._keep = keep
        self._lock = threading.Lock()

    def earlier(self, world: str, tool: str) -> list[SimulationResult]:
        with self._lock:
            return list(self._results.get((world, tool), ()))

    def remember(self, world: str, tool: str, result: SimulationResult) -> None:
        if result.is_error:
            return
        with self._lock:
            self._results.setdefault((world, tool), deque(maxlen=self._keep)).append(result)


# --- labels ----------------------------------------------------------------------------------------------------

def label(fault: Fault, details: Details | None = None) -> Details:
    """What names an applied fault in the result's _meta and in the log: kind, rule, tool, call, parameters."""
    entry: Details = {"kind": fault.kind, "rule": fault.index, "tool": fault.tool, "call": fault.call}
    if fault.rule.where:
        entry["source"] = fault.rule.where
    kind = FAULT_KINDS[fault.kind]
    for name in sorted(PARAMETERS[fault.kind] - kind.unlabelled):
        if fault.rule.parameter(name) is not None:
            entry[name] = fault.rule.parameter(name)
    return {**entry, **(details or {})}
