"""Recorded tool calls: one JSON object per line, with secret-looking fields redacted before writing."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import pydantic

from mcp_sim.base.errors import McpSimError, parse_failure

REDACTED = "[REDACTED]"
# What a record holds: a tool call (every record before resources were recorded), a resource read (`tool`
# is the URI, `arguments` {"uri": ...}) or a prompt get (`tool` is the prompt's name).
TOOL_CALL, RESOURCE_READ, PROMPT_GET = "tools/call", "resources/read", "prompts/get"
DEFAULT_REDACT_PATTERNS = (r"(?i)(pass(word|wd)?|secret|token|api[_-]?key|authorization|cookie|credential)",)


class TraceError(McpSimError):
    """A trace file is missing or holds a line that is not a recorded call."""


@dataclass
class TraceRecord:
    """One real call: what the agent sent and what the real server answered."""

    # Read back through pydantic (`_RECORD`): a field of the wrong type is refused at load, naming its line,
    # instead of breaking a replay or a report later.
    __pydantic_config__ = pydantic.ConfigDict(extra="forbid")

    session: str
    step: int
    tool: str
    arguments: dict[str, Any]
    # The CallToolResult as on the wire: {"content": [...], "structuredContent": ..., "isError": bool}.
    result: dict[str, Any]
    is_error: bool
    latency_ms: float = 0.0
    server: str = ""
    recorded_at: str = ""
    # Set when the server answered with a JSON-RPC error instead of a result: its error code.
    protocol_error: int | None = field(default=None)
    # The MCP method recorded; left out of the line for tool calls, so old traces read as they always did.
    kind: str = TOOL_CALL
    # What the server sent the client during the call, in order (mcp_sim.fidelity.record_interactions):
    # notifications and requests with their answers; left out of the line when none.
    interactions: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        data = asdict(self)
        if data["protocol_error"] is None:
            del data["protocol_error"]
        if data["kind"] == TOOL_CALL:
            del data["kind"]
        if not data["interactions"]:
            del data["interactions"]
        return json.dumps(data, ensure_ascii=False)

    @property
    def text(self) -> str:
        return result_text(self.result)

    @property
    def structured(self) -> Any:
        return self.result.get("structuredContent")


_RECORD = pydantic.TypeAdapter(TraceRecord)


def result_text(result: dict[str, Any]) -> str:
    """The text blocks of a result, joined; other blocks (images, resources) are named by type."""
    parts = []
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'content')}]")
    return "\n".join(parts)


def read_traces(paths: Sequence[str | Path], kinds: Collection[str] | None = (TOOL_CALL,)) -> list[TraceRecord]:
    """The records of the named JSONL files of these `kinds` (default: tool calls, what learn, eval and
    cassettes use; None: all), in file order; a bad line is an error naming it."""
    records: list[TraceRecord] = []
    for path in map(Path, paths):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"cannot read trace file {path}: {exc}") from None
        for number, line in enumerate(lines, 1):
            record = _parse_line(line, f"{path}:{number}") if line.strip() else None
            if record is not None and (kinds is None or record.kind in kinds):
                records.append(record)
    return records


def _parse_line(line: str, where: str) -> TraceRecord:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:  # ValueError: bad JSON, and integers past 4300 digits
        raise TraceError(f"{where}: not a trace record ({parse_failure(exc)}); expected one JSON object per line as "
                         "written by `mcp-sim record`") from None
    try:
        record = _RECORD.validate_python(data)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:3])
        raise TraceError(f"{where}: not a trace record ({problems}); expected one JSON object per line as "
                         "written by `mcp-sim record`") from None
    content = record.result.get("content") or []
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise TraceError(f"{where}: result.content must be a list of content blocks (JSON objects)")
    return record


def sessions(records: Iterable[TraceRecord]) -> dict[str, list[TraceRecord]]:
    """Records grouped by session (in order of first appearance), each ordered by step."""
    grouped: dict[str, list[TraceRecord]] = {}
    for record in records:
        grouped.setdefault(record.session, []).append(record)
    return {name: sorted(steps, key=lambda r: r.step) for name, steps in grouped.items()}


class TraceWriter:
    """Appends records to a JSONL file, flushing each line so a crash loses at most the call in flight."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: IO[str] = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: TraceRecord) -> None:
        with self._lock:
            self._handle.write(record.to_json() + "\n")
            self._handle.flush()

    def close(self) -> None:
        self._handle.close()


class Redactor:
    """Replaces the values of fields whose names look secret, at any depth.

    Text blocks that hold a JSON document (many servers print their structured result as text too)
    are redacted inside that document, so a secret does not survive in the text copy.
    """

    def __init__(self, patterns: Sequence[str] = DEFAULT_REDACT_PATTERNS):
        self.patterns = [re.compile(p) for p in patterns]

    def secret(self, name: str) -> bool:
        return any(p.search(name) for p in self.patterns)

    def value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: REDACTED if self.secret(str(k)) and not _token_count(str(k), v) else self.value(v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value

    def result(self, result: dict[str, Any]) -> dict[str, Any]:
        redacted = dict(result)
        if "structuredContent" in redacted:
            redacted["structuredContent"] = self.value(redacted["structuredContent"])
        if isinstance(redacted.get("content"), list):
            redacted["content"] = [self._block(block) for block in redacted["content"]]
        return redacted

    def _block(self, block: Any) -> Any:
        if not isinstance(block, dict) or block.get("type") != "text":
            return self.value(block)
        try:
            parsed = json.loads(block.get("text", ""))
        except (json.JSONDecodeError, TypeError):
            return block
        cleaned = self.value(parsed)
        if cleaned == parsed:
            return block
        return {**block, "text": json.dumps(cleaned, indent=2, ensure_ascii=False)}


def _token_count(name: str, value: Any) -> bool:
    """`maxTokens: 100` (a sampling request's budget) counts tokens; it holds no secret."""
    return name.lower().endswith("tokens") and isinstance(value, int) and not isinstance(value, bool)


def replace_text(value: Any, replacements: Sequence[tuple[str, str]]) -> Any:
    """Every string in `value` (keys too) with each OLD replaced by NEW, e.g. a temp dir by /sandbox."""
    if not replacements:
        return value
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {replace_text(k, replacements): replace_text(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_text(item, replacements) for item in value]
    return value
