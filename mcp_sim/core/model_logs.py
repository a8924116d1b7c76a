"""Log messages the model writes for a call it answered (x-sim `logs`), sent as notifications/message.

A second short generation continues the call's own conversation (its answer included, so an engine that keeps
model state reads only the new tokens) under a grammar: `{"logs": [{"level": ..., "data": "..."}]}`, at most
`count` entries, each level one the spec allows. The messages never enter the world's history. A generation
that fails or breaks the shape gives no logs: they are best effort, as a real server's are.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp_sim.core.calls import Call
from mcp_sim.core.interactions import ModelLogs
from mcp_sim.core.model_answer import ModelAnswerer
from mcp_sim.core.prompt import extract_observation
from mcp_sim.engines.base import ChatMessage, GenerationRequest

logger = logging.getLogger(__name__)

INSTRUCTION = ("Now write the log lines the server printed while it ran the {tool} call above: at most {count}, "
               "each with a level ({levels}) and one short line of text about this call and its answer, "
               'as JSON {{"logs": [{{"level": "...", "data": "..."}}]}}.')
MESSAGE_CHARS = 120  # a log line, not an essay (SmolLM2 fills unbounded strings to the limit)


def logs_schema(spec: ModelLogs) -> dict[str, Any]:
    entry = {"type": "object", "properties": {"level": {"type": "string", "enum": list(spec.levels)},
                                              "data": {"type": "string", "minLength": 1,
                                                       "maxLength": MESSAGE_CHARS}},
             "required": ["level", "data"], "additionalProperties": False}
    return {"type": "object", "properties": {"logs": {"type": "array", "items": entry, "minItems": 1,
                                                      "maxItems": spec.count}},
            "required": ["logs"], "additionalProperties": False}


def write_logs(answerer: ModelAnswerer, call: Call, answer: str, spec: ModelLogs) -> list[dict[str, Any]]:
    """The log notifications (as a cassette records them) the model writes for CALL answered with ANSWER."""
    messages, _ = answerer.fit_to_context(call)
    instruction = INSTRUCTION.format(tool=call.tool.name, count=spec.count, levels=", ".join(spec.levels))
    messages = [*messages, ChatMessage("assistant", answer), ChatMessage("user", instruction)]
    opts = answerer.options
    schema = logs_schema(spec)
    request = GenerationRequest(
        messages=messages, max_tokens=min(opts.max_tokens, 48 * spec.count + 16), json_schema=schema,
        schema_key=f"mcp-sim/logs:{json.dumps(schema, sort_keys=True)}", temperature=opts.temperature,
        top_p=opts.top_p, top_k=opts.top_k, repeat_penalty=opts.repeat_penalty, seed=call.seed,
        cache_key=f"{call.world.name}|{call.source}", cancel=call.cancel)
    try:
        generation = answerer.engine.generate(request)
    except Exception:  # best effort: the answer stands without its logs
        logger.info("writing the logs of %s failed", call.tool.name, exc_info=True)
        return []
    return _parsed(extract_observation(generation.text), spec)


def _parsed(text: str, spec: ModelLogs) -> list[dict[str, Any]]:
    try:
        document = json.loads(text)
    except ValueError:
        return []
    entries = document.get("logs") if isinstance(document, dict) else None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("level") in spec.levels and isinstance(entry.get("data"), str) \
                and entry["data"].strip():
            params = {"level": entry["level"], "data": entry["data"].strip(),
                      **({"logger": spec.logger} if spec.logger else {})}
            found.append({"notification": "notifications/message", "params": params})
    return found[:spec.count]
