"""Build world-model prompts and read the model's answer back out of its text."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcp_sim.engines.base import ChatMessage
from mcp_sim.specs import SpecSet, ToolSpec

# Modelled on Qwen-AgentWorld's MCP world-model prompt: role, tool definitions, world, demonstrations.
ROLE = (
    "You are a Tool World Model, a virtual environment simulator that faithfully simulates the execution "
    "of tool calls, strictly adhering to the Model Context Protocol (MCP) tool definitions below. "
    "Each user message is one tool call as JSON {\"name\": ..., \"arguments\": ...}. "
    "Reply with the exact response the real tool would return, and nothing else."
)

RULES = """\
# Rules
- When the tool has an outputSchema, reply with one JSON object that follows it exactly.
- When it has none, reply with the plain text the tool prints; do not wrap it in JSON.
- Stay consistent with the world state and with every earlier response in this session: \
a value written earlier must be read back exactly; an item deleted earlier no longer exists.
- Use realistic values (ids, timestamps, names) in the style of the world and of the examples.
- If the call cannot succeed in this world (missing item, invalid state), answer as the real tool \
would report that failure."""


@dataclass(frozen=True)
class Turn:
    """One earlier call in a session and the observation the simulator gave for it."""

    action: str
    observation: str


def render_action(name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def render_observation(structured: Any | None, text: str) -> str:
    return json.dumps(structured, ensure_ascii=False) if structured is not None else text


def system_prompt(spec_set: SpecSet) -> str:
    """The simulator's role, tool definitions, world and demonstrations for one spec set."""
    parts = [ROLE, "# Input Definitions & Action Space"]
    for tool in spec_set.tools:
        parts.append(json.dumps(_prompt_definition(tool), ensure_ascii=False, separators=(",", ":")))
    if spec_set.world_description or spec_set.world_data is not None:
        parts.append("# World")
        if spec_set.world_description:
            parts.append(spec_set.world_description.strip())
        if spec_set.world_data is not None:
            parts.append("Initial state (JSON):\n" + json.dumps(spec_set.world_data, ensure_ascii=False))
    parts.append(RULES)
    demonstrations = _demonstrations(spec_set)
    if demonstrations:
        parts.append("# Demonstrations\n" + demonstrations)
    return "\n\n".join(parts)


def _prompt_definition(tool: ToolSpec) -> dict[str, Any]:
    definition: dict[str, Any] = {"name": tool.name}
    if tool.description:
        definition["description"] = tool.description
    definition["inputSchema"] = tool.input_schema
    if tool.output_schema is not None:
        definition["outputSchema"] = tool.output_schema
    if tool.annotations:
        definition["annotations"] = tool.annotations
    return definition


def _demonstrations(spec_set: SpecSet) -> str:
    lines = []
    for tool in spec_set.tools:
        for example in tool.examples:
            observation = example.result if isinstance(example.result, str) else json.dumps(example.result)
            prefix = "Error: " if example.is_error else ""
            lines.append(f"Action: {render_action(tool.name, example.arguments)}\n"
                         f"Observation: {prefix}{observation}")
    return "\n\n".join(lines)


def build_messages(system: str, history: list[Turn], action: str) -> list[ChatMessage]:
    messages = [ChatMessage("system", system)]
    for turn in history:
        messages.append(ChatMessage("user", turn.action))
        messages.append(ChatMessage("assistant", turn.observation))
    messages.append(ChatMessage("user", action))
    return messages


_THINK_CLOSED = re.compile(r"<think>.*?</think>", re.DOTALL)
_PREDICTED = re.compile(r"<predicted_observation>(.*?)(?:</predicted_observation>|$)", re.DOTALL)
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_OBSERVATION_MARKER = re.compile(r"^\s*\*\*Environment Observation:\*\*\s*", re.IGNORECASE)


def extract_observation(text: str) -> str:
    """The answer without reasoning or wrappers, as Qwen-AgentWorld's official parser reads it."""
    text = _THINK_CLOSED.sub("", text)
    if "<think>" in text:  # an unclosed reasoning block runs to the end of the text
        text = text.split("<think>", 1)[0]
    text = text.replace("</think>", "")
    predicted = _PREDICTED.findall(text)
    if predicted:
        text = predicted[-1]
    text = _OBSERVATION_MARKER.sub("", text).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    return text
