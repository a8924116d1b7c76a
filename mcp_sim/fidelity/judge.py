"""An optional LLM judge: AgentWorldBench's five dimensions, 1-5 each, for one simulated result.

The judge sees the tool's definition, the session so far, the call, the real result (the reference)
and the simulated one, and answers one JSON object constrained by a grammar. Scores are normalized
as AgentWorldBench does: (x - 1) / 4, so 1 -> 0 and 5 -> 1 (reports multiply by 100).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from mcp_sim.base.errors import McpSimError
from mcp_sim.core.prompt import render_action, render_observation
from mcp_sim.core.specs import ToolSpec
from mcp_sim.engines.base import ChatMessage, Engine, GenerationRequest
from mcp_sim.fidelity.scoring import Observation
from mcp_sim.rehearsal.traces import TraceRecord

logger = logging.getLogger(__name__)

DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")
MAX_SHOWN_CHARS = 1200
MAX_HISTORY = 4
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {name: {"type": "integer", "enum": [1, 2, 3, 4, 5]} for name in DIMENSIONS},
    "required": list(DIMENSIONS),
    "additionalProperties": False,
}

RUBRIC = """\
You judge how faithfully a simulated MCP tool response matches the REAL response of the same call.
Rate each dimension from 1 (very poor) to 5 (indistinguishable from the real response):
- format: same structure, keys, types and output schema as the real response; errors reported as errors.
- factuality: the facts match the real response. Objective facts must match exactly; numbers within \
10-20 %; values the session generates (ids, timestamps) only need to be valid.
- consistency: consistent with the earlier calls of the session (values written earlier read back, \
deleted items gone).
- realism: plausible as the output of a real tool; no placeholders or invented fields.
- quality: overall, how well an agent would be served by the simulated response instead of the real one.
Reply with one JSON object: {"format": n, "factuality": n, "consistency": n, "realism": n, "quality": n}."""


class LlmJudge:
    """Rates simulated results with any engine (the simulator's own model, or a larger one)."""

    def __init__(self, engine: Engine, max_tokens: int = 64):
        self.engine = engine
        self.max_tokens = max_tokens

    def rate(self, tool: ToolSpec | None, history: Sequence[TraceRecord], record: TraceRecord,
             simulated: Observation) -> dict[str, float] | None:
        request = GenerationRequest(messages=self.messages(tool, history, record, simulated),
                                    max_tokens=self.max_tokens, json_schema=JUDGE_SCHEMA, schema_key="judge",
                                    temperature=0.0, seed=0)
        try:
            generation = self.engine.generate(request)
            raw = json.loads(generation.text)
            return {name: (int(raw[name]) - 1) / 4 for name in DIMENSIONS}
        except (McpSimError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            logger.warning("no usable judge rating for %s step %d: %s", record.tool, record.step, exc)
            return None

    def messages(self, tool: ToolSpec | None, history: Sequence[TraceRecord], record: TraceRecord,
                 simulated: Observation) -> list[ChatMessage]:
        parts = []
        if tool is not None:
            parts.append("# Tool\n" + json.dumps(tool.definition(), ensure_ascii=False)[:MAX_SHOWN_CHARS])
        if history:
            turns = [f"Call: {render_action(r.tool, r.arguments)}\nReal response: {_shown(r.result)}"
                     for r in history[-MAX_HISTORY:]]
            parts.append("# Session so far\n" + "\n\n".join(turns))
        parts.append("# Call\n" + render_action(record.tool, record.arguments))
        parts.append("# Real response\n" + _shown(record.result))
        flag = "ERROR: " if simulated.is_error else ""
        shown = render_observation(simulated.structured, simulated.text)[:MAX_SHOWN_CHARS]
        parts.append("# Simulated response\n" + flag + shown)
        return [ChatMessage("system", RUBRIC), ChatMessage("user", "\n\n".join(parts))]


def _shown(result: dict[str, Any]) -> str:
    real = Observation.from_wire(result)
    flag = "ERROR: " if real.is_error else ""
    return flag + render_observation(real.structured, real.text)[:MAX_SHOWN_CHARS]
