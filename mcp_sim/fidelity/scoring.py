"""Score a simulated tool result against the real one: pure functions, no model, no MCP.

Every score is a fraction in [0, 1], or None where it does not apply; reports show them as 0-100.

- schema_valid: the simulated result validates against the tool's outputSchema. Applies when the tool
  has one and the simulated result is not an error (MCP's outputSchema governs only successes).
- error_agreement: 1 when the real and the simulated result agree on isError, else 0. Always applies.
- structure: same shape. Objects score the mean over the union of keys (a missing or extra key is 0,
  a shared key scores its values' structure); arrays score the mean of "same length" and each pair of
  items up to the shorter length; scalars score 1 for the same JSON type (integers and floats are both
  numbers). 0 when the error flags disagree; None for two plain texts or two errors.
- value: the real result's facts found in the simulated one. Each leaf of the real result is looked up
  at the same path in the simulated one (missing = 0): booleans and null exactly; numbers within a
  relative tolerance (default 10 %); strings without inner whitespace (ids, names, timestamps) exactly
  after normalization (Unicode NFC, trimmed, case-folded); strings with whitespace (prose, file
  contents, messages) by token-overlap F1. Plain texts, and the messages of two errors, score their
  token F1. 0 when the error flags disagree.
- state: of the strings the session wrote earlier (arguments of earlier calls that succeeded on the
  real server, at least 3 characters, not repeated in this call's arguments) that the real result
  reads back, the fraction the simulated result reads back too. None when the real result reads back
  nothing written earlier.
- fidelity, the headline: 0 when the error flags disagree, else value, times schema_valid where that
  applies (a result a client would reject is worth nothing).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mcp_sim.base import defaults
from mcp_sim.core.specs import validation_error
from mcp_sim.rehearsal.traces import result_text

METRICS = ("schema_valid", "error_agreement", "structure", "value", "state", "fidelity")
MIN_STATE_CHARS = 3
BOOTSTRAP_RESAMPLES = 2000
_TOKEN = re.compile(r"\w+", re.UNICODE)
_MISSING = object()


@dataclass(frozen=True)
class Observation:
    """One tool result, real or simulated, reduced to what scoring compares."""

    text: str
    structured: Any = None
    is_error: bool = False

    @classmethod
    def from_wire(cls, result: dict[str, Any]) -> Observation:
        """From a CallToolResult as on the wire (a trace's `result`)."""
        return cls(result_text(result), result.get("structuredContent"), bool(result.get("isError")))

    def payload(self) -> Any:
        """The structured result, else the text when it is a JSON object or array, else None."""
        if self.structured is not None:
            return self.structured
        try:
            parsed = json.loads(self.text)
        except (json.JSONDecodeError, TypeError):
            return None
        return parsed if isinstance(parsed, dict | list) else None


@dataclass
class StepScores:
    schema_valid: float | None
    error_agreement: float
    structure: float | None
    value: float | None
    state: float | None
    fidelity: float
    # An LLM judge's five dimensions, each 0-1, when a judge ran.
    judge: dict[str, float] | None = field(default=None)

    def metric(self, name: str) -> float | None:
        if name.startswith("judge_"):
            return None if self.judge is None else self.judge.get(name.removeprefix("judge_"))
        value: float | None = getattr(self, name)
        return value


def score_step(real: Observation, simulated: Observation, output_schema: dict[str, Any] | None = None,
               earlier_arguments: Sequence[dict[str, Any]] = (), arguments: dict[str, Any] | None = None,
               rel_tol: float = defaults.REL_TOL) -> StepScores:
    """Every score for one call; see the module docstring for what each means."""
    schema = schema_validity(simulated, output_schema)
    agree = error_agreement(real, simulated)
    if not agree:
        structure: float | None = 0.0
        value: float = 0.0
    elif real.is_error:
        structure, value = None, text_f1(real.text, simulated.text)
    else:
        structure, value = content_match(real, simulated, rel_tol)
    state = state_consistency(real, simulated, earlier_arguments, arguments or {})
    fidelity = agree * value * (schema if schema is not None else 1.0)
    return StepScores(schema, agree, structure, value, state, fidelity)


def schema_validity(simulated: Observation, output_schema: dict[str, Any] | None) -> float | None:
    if output_schema is None or simulated.is_error:
        return None
    if simulated.structured is None:
        return 0.0
    return 0.0 if validation_error(simulated.structured, output_schema) else 1.0


def error_agreement(real: Observation, simulated: Observation) -> float:
    return 1.0 if real.is_error == simulated.is_error else 0.0


def content_match(real: Observation, simulated: Observation, rel_tol: float = defaults.REL_TOL
                  ) -> tuple[float | None, float]:
    """(structure, value) of two successful results."""
    real_payload, simulated_payload = real.payload(), simulated.payload()
    if real_payload is not None and simulated_payload is not None:
        return structure_match(real_payload, simulated_payload), value_match(real_payload, simulated_payload,
                                                                             rel_tol)
    structure = None if real_payload is None and simulated_payload is None else 0.0
    return structure, text_f1(real.text, simulated.text)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else "string"


def structure_match(real: Any, simulated: Any) -> float:
    if _kind(real) != _kind(simulated):
        return 0.0
    if isinstance(real, dict):
        keys = real.keys() | simulated.keys()
        if not keys:
            return 1.0
        return _mean(structure_match(real[k], simulated[k]) if k in real and k in simulated else 0.0
                     for k in keys)
    if isinstance(real, list):
        if not real and not simulated:
            return 1.0
        parts = [1.0 if len(real) == len(simulated) else 0.0]
        parts.extend(structure_match(r, s) for r, s in zip(real, simulated, strict=False))
        return _mean(parts)
    return 1.0


def value_match(real: Any, simulated: Any, rel_tol: float = defaults.REL_TOL) -> float:
    return _mean(leaf_match(leaf, _lookup(simulated, path), rel_tol) for path, leaf in _leaves(real))


def leaf_match(real: Any, simulated: Any, rel_tol: float = defaults.REL_TOL) -> float:
    if simulated is _MISSING or _kind(real) != _kind(simulated):
        return 0.0
    if isinstance(real, dict | list):  # an empty object or array: the fact is its emptiness
        return 0.0 if simulated else 1.0
    if isinstance(real, bool) or real is None:
        return 1.0 if real == simulated else 0.0
    if isinstance(real, int | float):
        if not (math.isfinite(real) and math.isfinite(simulated)):
            return 1.0 if real == simulated else 0.0
        return 1.0 if abs(simulated - real) <= rel_tol * abs(real) else 0.0
    if any(ch.isspace() for ch in real.strip()):
        return text_f1(real, simulated)
    return 1.0 if normalize(real) == normalize(simulated) else 0.0


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split()).casefold()


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(normalize(text))


def text_f1(real: str, simulated: str) -> float:
    """Token-overlap F1 (SQuAD style, counting repeats); two empty texts match fully."""
    real_tokens, simulated_tokens = Counter(tokens(real)), Counter(tokens(simulated))
    if not real_tokens or not simulated_tokens:
        return 1.0 if not real_tokens and not simulated_tokens else 0.0
    common = sum((real_tokens & simulated_tokens).values())
    if common == 0:
        return 0.0
    precision = common / sum(simulated_tokens.values())
    recall = common / sum(real_tokens.values())
    return 2 * precision * recall / (precision + recall)


def state_consistency(real: Observation, simulated: Observation, earlier_arguments: Sequence[dict[str, Any]],
                      arguments: dict[str, Any]) -> float | None:
    echoed = set(_strings(arguments))
    written = {s for args in earlier_arguments for s in _strings(args)
               if len(s.strip()) >= MIN_STATE_CHARS and s not in echoed}
    real_text = _haystack(real)
    read_back = [s for s in sorted(written) if s in real_text]
    if not read_back:
        return None
    simulated_text = _haystack(simulated)
    return _mean(1.0 if s in simulated_text else 0.0 for s in read_back)


def _haystack(observation: Observation) -> str:
    # Raw strings of the structure as well as the text: a JSON-escaped copy would hide newlines.
    return "\n".join([*_strings(observation.payload()), observation.text])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Scalars and empty containers, each with its path."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def _lookup(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        if isinstance(key, int) and isinstance(value, list) and key < len(value):
            value = value[key]
        elif isinstance(key, str) and isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return _MISSING
    return value


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def aggregate(scores: Iterable[StepScores], metrics: Sequence[str] = METRICS, intervals: bool = False
              ) -> dict[str, Any]:
    """Each metric's mean over the steps where it applies, as 0-100 (None when it never applied).

    With `intervals`, also `ci95`: each metric's bootstrap 95 % interval (see `bootstrap_interval`).
    """
    items = list(scores)
    summary: dict[str, Any] = {"steps": len(items)}
    bounds: dict[str, list[float] | None] = {}
    for name in metrics:
        values = [v for v in (s.metric(name) for s in items) if v is not None]
        summary[name] = round(100 * sum(values) / len(values), 1) if values else None
        if intervals:
            bounds[name] = bootstrap_interval(values)
    if intervals:
        summary["ci95"] = bounds
    return summary


def bootstrap_interval(values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                       level: float = 0.95) -> list[float] | None:
    """The percentile bootstrap interval of the mean of `values` (fractions), as 0-100; None when empty.

    Steps are resampled with replacement (a fixed seed: the same steps give the same interval). Steps of
    one session are not independent, so read it as the spread these steps allow, not a guarantee.
    """
    if not values:
        return None
    data = np.asarray(values, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    means = data[picks].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return [round(100 * float(low), 1), round(100 * float(high), 1)]
