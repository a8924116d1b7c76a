"""What the recording proxy writes: each session's calls numbered, redacted and with paths replaced.

Below both halves of the proxy (record.py for tools, record_surface.py for resources and prompts), which
each hand it what they forwarded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from mcp_sim.rehearsal.traces import TOOL_CALL, Redactor, TraceRecord, TraceWriter, read_traces, replace_text


class Recorder:
    """Numbers the calls of each session and writes them, redacted and with paths replaced."""

    def __init__(self, writer: TraceWriter, server_name: str, redactor: Redactor,
                 replacements: Sequence[tuple[str, str]] = ()):
        self.writer = writer
        self.server_name = server_name
        self.redactor = redactor
        self.replacements = list(replacements)
        self._steps: dict[str, int] = {}
        self._lock = threading.Lock()
        if writer.path.exists() and writer.path.stat().st_size:
            # Appending to an earlier file: a reused session name continues its step count.
            for record in read_traces([writer.path], kinds=None):
                self._steps[record.session] = max(self._steps.get(record.session, 0), record.step)

    def next_step(self, session: str) -> int:
        with self._lock:
            self._steps[session] = self._steps.get(session, 0) + 1
            return self._steps[session]

    def record(self, session: str, step: int, tool: str, arguments: dict[str, Any], result: dict[str, Any],
               latency_ms: float, protocol_error: int | None = None, kind: str = TOOL_CALL,
               interactions: list[dict[str, Any]] | None = None) -> TraceRecord:
        record = TraceRecord(
            session=session, step=step, tool=tool,
            arguments=replace_text(self.redactor.value(arguments), self.replacements),
            result=replace_text(self.redactor.result(result), self.replacements),
            is_error=bool(result.get("isError")), latency_ms=round(latency_ms, 1), server=self.server_name,
            recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            protocol_error=protocol_error, kind=kind,
            interactions=replace_text(self.redactor.value(interactions or []), self.replacements))
        self.writer.write(record)
        return record
