"""What each fault does to a call: the answers that replace the model's (error, rate_limit), the protocol
error, delays and timeouts, and the after-model changes (empty, oversized, malformed, injection, stale).

Each transform keeps the answer valid where the fault says it should be (an injection fits the outputSchema;
an empty result still satisfies it) and breaks it where it should break (malformed), checked with jsonschema.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

from mcp_sim.prompt import parse_error
from mcp_sim.rehearsal.faults import (
    AFTER_MODEL,
    INJECTION_KEY,
    MALFORMED_KEY,
    PADDING_LINE,
    Fault,
    label,
    with_label,
)
from mcp_sim.result import META_KEY, SimulationResult
from mcp_sim.specs import ToolSpec, validation_error

Details = dict[str, Any]
Transform = Callable[["Fault", SimulationResult, ToolSpec, Sequence[SimulationResult]],
                     tuple[SimulationResult, Details]]


# --- before the model ------------------------------------------------------------------------------------------

def immediate_result(fault: Fault, tool: ToolSpec) -> SimulationResult | None:
    """The isError result that replaces the call for `error` with a message and `rate_limit`; else None."""
    if fault.kind == "rate_limit":
        return error_result(fault, f"Rate limit exceeded for tool '{tool.name}': "
                                   f"retry after {fault.rule.parameter('retry_after')} s")
    if fault.kind == "error" and fault.rule.message is not None:
        return error_result(fault, fault.rule.message)
    return None


def error_result(fault: Fault, message: str) -> SimulationResult:
    """An isError result with MESSAGE, labelled with FAULT (also for a message the world model wrote)."""
    meta = {META_KEY: {"simulated": True, "stage": "fault"}}
    return with_label(SimulationResult(message, is_error=True, meta=meta), label(fault))


def protocol_error(fault: Fault) -> tuple[int, str]:
    """The JSON-RPC error code and message the server raises (as MCPError) for `protocol_error`."""
    return int(fault.rule.parameter("code")), str(fault.rule.parameter("message"))


def delay_seconds(fault: Fault) -> float | None:
    """How long to wait before answering, for `latency`; None for other kinds."""
    return fault.rule.parameter("ms") / 1000 if fault.kind == "latency" else None


def is_timeout(fault: Fault) -> bool:
    """`timeout`: never answer; wait until the client cancels or gives up."""
    return fault.kind == "timeout"


def needs_model_error(fault: Fault) -> bool:
    """`error` without a message: the world model writes a failure that fits the world and the call."""
    return fault.kind == "error" and fault.rule.message is None


def model_error_instruction(tool: ToolSpec) -> str:
    """Text to add after the call's action so the world model answers with a failure instead of a result.

    Decode the answer under `mcp_sim.prompt.error_schema(...)` for every tool (text tools too): the grammar gives
    the shape, so the words here only steer the content. Measured with SmolLM2-135M: naming a "<message>"
    placeholder or a reply format made it copy the placeholder; this wording gave fitting messages.
    """
    return (f"This call of {tool.name} fails in the world. Answer with the error object the tool returns, saying "
            "what went wrong for these arguments (for example a lock, a full disk, a lost connection or a "
            "missing item).")


def error_from_model(answer: str, tool: ToolSpec) -> str | None:
    """The failure message in the model's {"error": ...} ANSWER, as TOOL reports it; None when there is none.

    A text tool's failure reads as its error line ("Error: ..."), as `--simulate-errors` answers it.
    """
    try:
        message = parse_error(json.loads(answer, strict=False), structured=True)
    except json.JSONDecodeError:
        return None
    if message is None or tool.output_schema is not None or message.startswith("Error:"):
        return message
    return f"Error: {message}"


# --- after the model -----------------------------------------------------------------------------------------

def transform(fault: Fault, result: SimulationResult, tool: ToolSpec,
              earlier: Sequence[SimulationResult] = ()) -> SimulationResult:
    """RESULT as FAULT (an after-model kind) shapes it, labelled; EARLIER: this tool's earlier results in the world.

    A failed call is left as it is (and the label says so): these faults shape answers, not failures.
    """
    apply = _TRANSFORMS.get(fault.kind)
    if apply is None:
        raise ValueError(f"{fault.kind!r} is not applied after the model (after-model kinds: {sorted(AFTER_MODEL)})")
    if result.is_error:
        return with_label(result, label(fault, {"note": "not applied: the call failed"}))
    changed, details = apply(fault, result, tool, earlier)
    return with_label(changed, label(fault, details))


def _empty(fault: Fault, result: SimulationResult, tool: ToolSpec,
           earlier: Sequence[SimulationResult]) -> tuple[SimulationResult, Details]:
    # Valid means what a client accepts: isError false and, for a tool with an outputSchema, structuredContent
    # present and conforming (clients reject its absence). So the content list is empty (text "") and the
    # structured value shrinks to the least the schema allows: optional properties dropped, arrays emptied.
    if tool.output_schema is None or result.structured is None:
        return replace(result, text="", structured=None), {"note": "no content"}
    smallest = _smallest_valid(result.structured, tool.output_schema)
    return replace(result, text="", structured=smallest), {
        "note": "no content; structuredContent reduced to what the outputSchema requires"}


def _smallest_valid(value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    root = copy.deepcopy(value)

    def shrink(node: Any) -> None:
        if isinstance(node, dict):
            order = list(node)
            for key in order:
                removed = node.pop(key)
                if validation_error(root, schema) is not None:
                    node[key] = removed
                    shrink(removed)
            kept = {key: node.pop(key) for key in order if key in node}  # restore the original key order
            node.update(kept)
        elif isinstance(node, list):
            items = node[:]
            node.clear()
            if validation_error(root, schema) is not None:
                node.extend(items)
                for item in node:
                    shrink(item)

    shrink(root)
    return root


def _oversized(fault: Fault, result: SimulationResult, tool: ToolSpec,
               earlier: Sequence[SimulationResult]) -> tuple[SimulationResult, Details]:
    size = int(fault.rule.parameter("bytes"))
    current = len(result.text.encode())
    if current >= size:
        return result, {"note": f"not padded: the result is already {current} bytes"}
    missing = size - current
    # JSON text stays the same JSON (trailing whitespace); plain text gets visible padding lines.
    padding = " " * missing if result.structured is not None else \
        ("\n" + PADDING_LINE * (missing // len(PADDING_LINE) + 1))[:missing]
    return replace(result, text=result.text + padding), {"note": f"text padded to {size} bytes"}


def _malformed(fault: Fault, result: SimulationResult, tool: ToolSpec,
               earlier: Sequence[SimulationResult]) -> tuple[SimulationResult, Details]:
    schema = tool.output_schema
    if schema is None:
        return result, {"note": "not applied: the tool has no outputSchema to break"}
    for how, broken in _breakages(result.structured or {}, schema):
        if _rejected_by_clients(broken, schema):
            return replace(result, structured=broken, text=json.dumps(broken, ensure_ascii=False)), {"note": how}
    # Nothing in the schema can be broken by value; a missing structuredContent still breaks the contract.
    return replace(result, structured=None), {"note": "structuredContent left out though the tool declares an "
                                                      "outputSchema"}


def _rejected_by_clients(value: dict[str, Any], schema: dict[str, Any]) -> bool:
    # The mcp clients validate without a format checker, so a format-only breakage would slip through them.
    validator_cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    return not validator_cls(schema).is_valid(value)


def _breakages(value: dict[str, Any], schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Candidate ways to break VALUE, in order; the caller keeps the first the schema really rejects."""
    for name in schema.get("required", []):
        if name in value:
            yield f"dropped the required property {name!r}", {k: v for k, v in value.items() if k != name}
    for key, current in value.items():
        wrongs: tuple[Any, ...] = (123456789, "malformed", None, [], {})
        for wrong in wrongs:
            if type(wrong) is not type(current):
                yield f"set {key!r} to {json.dumps(wrong)}", {**value, key: wrong}
    yield f"added the property {MALFORMED_KEY!r}", {**value, MALFORMED_KEY: True}


def _injection(fault: Fault, result: SimulationResult, tool: ToolSpec,
               earlier: Sequence[SimulationResult]) -> tuple[SimulationResult, Details]:
    corpus = [fault.rule.text] if fault.rule.text else _rotated(injections(), fault.token)
    if tool.output_schema is not None and result.structured is not None:
        placed = _place_injection(result.structured, tool.output_schema, corpus, fault.token)
        if placed is not None:
            structured, pointer, text = placed
            return (replace(result, structured=structured, text=json.dumps(structured, ensure_ascii=False)),
                    {"at": pointer, "injection": text})
    # A text tool, or no string field the schema lets carry one: the text content carries it.
    separator = "\n\n" if result.structured is not None else "\n"
    return replace(result, text=result.text + separator + corpus[0]), {"at": "text", "injection": corpus[0]}


def _place_injection(value: dict[str, Any], schema: dict[str, Any], corpus: list[str],
                     token: int) -> tuple[dict[str, Any], str, str] | None:
    """VALUE with one string field carrying an injection, still valid under SCHEMA; its pointer and text."""
    leaves = list(_string_paths(value))
    shortest = min(corpus, key=len)
    for path in _rotated(leaves, token):
        original = _get(value, path)
        if validation_error(_set(value, path, shortest), schema) is not None:
            continue  # enum, format, pattern or a short maxLength: no injection fits here
        for text in corpus:
            for candidate in (f"{original} {text}", text):
                changed = _set(value, path, candidate)
                if validation_error(changed, schema) is None:
                    return changed, "".join(f"/{part}" for part in path), text
    added = {**value, INJECTION_KEY: corpus[0]}
    if validation_error(added, schema) is None:  # no string field fits, but the schema admits a new property
        return added, f"/{INJECTION_KEY}", corpus[0]
    return None


def _string_paths(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(node, str):
        yield path
    elif isinstance(node, dict):
        for key, child in node.items():
            yield from _string_paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _string_paths(child, (*path, index))


def _get(node: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(value: dict[str, Any], path: tuple[str | int, ...], new: Any) -> dict[str, Any]:
    changed = copy.deepcopy(value)
    _get(changed, path[:-1])[path[-1]] = new
    return changed


def _rotated(items: list[Any], token: int) -> list[Any]:
    start = token % len(items) if items else 0
    return items[start:] + items[:start]


def _stale(fault: Fault, result: SimulationResult, tool: ToolSpec,
           earlier: Sequence[SimulationResult]) -> tuple[SimulationResult, Details]:
    previous = next((r for r in reversed(earlier) if not r.is_error), None)
    if previous is None:
        return result, {"note": "no earlier result of this tool in this world: result unchanged"}
    repeated = replace(result, text=previous.text, structured=copy.deepcopy(previous.structured))
    return repeated, {"note": "repeats an earlier result", "repeats_turn": previous.meta.get(META_KEY, {}).get("turn")}


_TRANSFORMS: dict[str, Transform] = {"empty": _empty, "oversized": _oversized, "malformed": _malformed,
                                     "injection": _injection, "stale": _stale}


@lru_cache(maxsize=1)
def _corpus() -> tuple[str, ...]:
    text = resources.files("mcp_sim.rehearsal").joinpath("injections.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def injections() -> list[str]:
    """The shipped corpus of test prompt-injection strings (mcp_sim/rehearsal/injections.txt)."""
    return list(_corpus())
