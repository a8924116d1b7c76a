"""Build world-model prompts and read the model's answer back out of its text."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcp_sim.base.reasoning import strip_reasoning
from mcp_sim.core.demonstrations import nearest, shown
from mcp_sim.core.resources import surface_prompt
from mcp_sim.core.scenarios import DEFAULT_SCENARIO
from mcp_sim.core.specs import Example, SpecSet, ToolSpec
from mcp_sim.engines.base import ChatMessage

# Part of every response-cache key. The key already covers the system prompt's text, the world's history
# and the call, so bump this when anything else changes what the model is shown or what is taken from its
# answer: how messages are laid out (build_messages, the agentworld turns), how actions and observations
# are rendered, how answers are extracted, grammar preparation (grammar_schema.py) or the retry rules
# (model_answer.py). Answers cached under an older version then miss instead of answering a prompt that
# is no longer sent.
PROMPT_VERSION = "2"  # 2: reasoning taken out by the official parser's rules (a lone </think> too)
# (A call's nearest examples need no bump: the examples a call may bring are part of its key, sources.py.)

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
- Use realistic values (ids, timestamps, names) in the style of the world and of the examples."""
# With --simulate-errors off the grammar admits no failure shape, so the prompt must not ask for one.
SUCCESS_RULE = "- Answer every call with a successful response."


@dataclass(frozen=True)
class Turn:
    """One earlier call in a session and the observation the simulator gave for it."""

    action: str
    observation: str


def render_action(name: str, arguments: dict[str, Any], client: dict[str, Any] | None = None) -> str:
    """The call as the model sees it; with what the client answered to the tool's own requests, if any."""
    action: dict[str, Any] = {"name": name, "arguments": arguments}
    if client:
        action["client"] = client
    return json.dumps(action, ensure_ascii=False)


def render_observation(structured: Any | None, text: str) -> str:
    return json.dumps(structured, ensure_ascii=False) if structured is not None else text


ERRORS_RULE = """\
- If the call cannot succeed in this world (a missing item, an invalid state, a bad value), answer \
{"error": "<the message the real tool gives>"} for a tool with an outputSchema, or a line starting with \
"Error: " for a text tool."""


def error_schema(max_length: int) -> dict[str, Any]:
    """The shape of a simulated tool failure, offered to the grammar beside the tool's outputSchema."""
    return {"type": "object", "properties": {"error": {"type": "string", "minLength": 1, "maxLength": max_length}},
            "required": ["error"], "additionalProperties": False}


def parse_error(answer: Any, structured: bool) -> str | None:
    """The failure message when ANSWER is a simulated tool failure, else None."""
    if structured:
        if isinstance(answer, dict) and set(answer) == {"error"} and isinstance(answer["error"], str):
            return answer["error"].strip() or None
        return None
    text = str(answer)
    return text if text.startswith("Error:") else None


def render_error(message: str, structured: bool) -> str:
    """A simulated failure as the model wrote it, for the session history."""
    return json.dumps({"error": message}, ensure_ascii=False) if structured else message


def system_prompt(spec_set: SpecSet, style: str = "generic", errors: bool = False,
                  scenario: str = DEFAULT_SCENARIO, first_call: bool = False) -> str:
    """The simulator's role, tool definitions, world (in `scenario`) and demonstrations for one spec set; for
    a world's FIRST_CALL of an indexed spec, without the index (INDEX_FIRST_CALL)."""
    if style == "agentworld":
        return agentworld_system_prompt(spec_set, errors, scenario, first_call)
    description, data = spec_set.world_state(scenario)
    parts = [ROLE, "# Input Definitions & Action Space"]
    if spec_set.prompt_layout == "index":
        parts.append(_indexed_tools(spec_set, first_call))
    else:
        for tool in spec_set.tools:
            parts.append(json.dumps(_prompt_definition(tool), ensure_ascii=False, separators=(",", ":")))
    parts.extend(filter(None, [surface_prompt(spec_set.surface)]))
    if description or data is not None:
        parts.append("# World")
        if description:
            parts.append(description.strip())
        if data is not None:
            parts.append("Initial state (JSON):\n" + json.dumps(data, ensure_ascii=False))
    parts.append(RULES + "\n" + (ERRORS_RULE if errors else SUCCESS_RULE))
    demonstrations = _demonstrations(spec_set, scenario)
    if demonstrations and spec_set.prompt_layout != "index":
        parts.append("# Demonstrations\n" + demonstrations)
    return "\n\n".join(parts)


# A spec too large for the context lists its tools in one line each; every call then brings its own
# tool's definition, on the line before the call (the world's history keeps the calls alone, so the
# system prompt and the history stay a shared prefix across calls of any tool).
ONE_DEFINITION = "Every call message starts with the definition of the tool called (one JSON line), then the call."
INDEX_INTRO = "This server has more tools than fit here in full: each is listed by name and purpose. " + ONE_DEFINITION
INDEX_DESCRIPTION_CHARS = 80
# The first call of a world in an indexed spec is shown no index. It brings its own tool's definition, and
# reading the index first (thousands of tokens for hundreds of tools) would make it wait for tools it does
# not call; the warm-up reads the index in the background meanwhile, and the world's later calls have it.
# Which prompt a call gets follows from its world alone (its first call of the file or not), so a replay
# asks the same prompts as the recording run.
INDEX_FIRST_CALL = "This server has more tools than fit here. " + ONE_DEFINITION


def _indexed_tools(spec_set: SpecSet, first_call: bool) -> str:
    return INDEX_FIRST_CALL if first_call else tool_index(spec_set, spec_set.index_chars)


def tool_index(spec_set: SpecSet, limit_chars: int = 0) -> str:
    """One line per tool: its name and the first sentence of its description; past LIMIT_CHARS (0: none),
    the names that do not fit are counted instead of listed."""
    lines = [INDEX_INTRO]
    used = len(INDEX_INTRO)
    for number, tool in enumerate(spec_set.tools):
        line = f"- {tool.name}" + (f": {_first_sentence(tool.description)}" if tool.description else "")
        if limit_chars and used + len(line) > limit_chars:
            lines.append(f"- ... and {len(spec_set.tools) - number} more tools")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _first_sentence(text: str) -> str:
    sentence = text.strip().split("\n", 1)[0].split(". ", 1)[0].rstrip(".")
    return sentence if len(sentence) <= INDEX_DESCRIPTION_CHARS else sentence[:INDEX_DESCRIPTION_CHARS - 1] + "…"


def prompt_action(tool: ToolSpec, action: str) -> str:
    """The current call as the model is shown it: with its tool's definition first when the spec's tools are
    only indexed in the system prompt."""
    spec_set = tool.spec_set
    if spec_set is None or spec_set.prompt_layout != "index":
        return action
    return compact_definition(tool, spec_set.definition_chars) + "\n" + action


def compact_definition(tool: ToolSpec, limit_chars: int = 0) -> str:
    """TOOL's definition as an indexed spec's call brings it: one JSON line of at most LIMIT_CHARS (0: no
    limit). Concise if it fits (the tool's description to its first paragraph, each schema description to its
    first sentence, one example each), else without the schemas' descriptions, then without its outputSchema
    (the grammar still enforces it), then with only the names of its arguments. Concise even with room to
    spare: unlike a definition in the shared system prompt, this one is read again by every call."""
    full = _prompt_definition(tool)
    summary = {"name": tool.name, **({"description": _first_sentence(tool.description)} if tool.description else {})}
    concise = {**_concise(full), **({"description": _first_paragraph(tool.description)} if tool.description else {})}
    terse = {**_without_descriptions(full), **summary}
    candidates = [concise, terse, {k: v for k, v in terse.items() if k != "outputSchema"},
                  {**summary, "arguments": sorted(tool.input_schema.get("properties", {}))}]
    for candidate in candidates:
        text = json.dumps(candidate, ensure_ascii=False, separators=(",", ":"))
        if not limit_chars or len(text) <= limit_chars:
            return text
    return text[:limit_chars]


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n", 1)[0].strip()


def _concise(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (_first_sentence(v) if k == "description" and isinstance(v, str)
                    else v[:1] if k == "examples" and isinstance(v, list) else _concise(v))
                for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_concise(item) for item in node]
    return node


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items()
                if k not in ("description", "examples", "example", "title") or not isinstance(v, str | list)}
    if isinstance(node, list):
        return [_without_descriptions(item) for item in node]
    return node


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


def _examples(spec_set: SpecSet, scenario: str) -> list[tuple[ToolSpec, Example]]:
    """The demonstrations a world of `scenario` sees: each tool's first examples, general or the scenario's
    own (core.demonstrations)."""
    return [(tool, example) for tool in spec_set.tools for example in shown(tool, scenario)]


NEAREST_INTRO = "Real answers of this tool to calls like this one:"


def nearest_demonstrations(tool: ToolSpec, arguments: dict[str, Any], scenario: str) -> str | None:
    """The tool's examples nearest to this call that the system prompt does not show, as this call's prompt
    brings them (after the call, like the state's note: the history keeps the bare call), or None."""
    found = nearest(tool, arguments, scenario)
    if not found:
        return None
    return "\n".join([NEAREST_INTRO, *(f"Action: {render_action(tool.name, example.arguments)}\n"
                                        f"Observation: {_example_observation(tool, example)}" for example in found)])


def _demonstrations(spec_set: SpecSet, scenario: str) -> str:
    return "\n\n".join(f"Action: {render_action(tool.name, example.arguments)}\n"
                       f"Observation: {_example_observation(tool, example)}"
                       for tool, example in _examples(spec_set, scenario))


def build_messages(system: str, history: list[Turn], action: str,
                   style: str = "generic") -> list[ChatMessage]:
    if style == "agentworld":
        return agentworld_messages(system, history, action)
    messages = [ChatMessage("system", system)]
    for turn in history:
        messages.append(ChatMessage("user", turn.action))
        messages.append(ChatMessage("assistant", turn.observation))
    messages.append(ChatMessage("user", action))
    return messages


# Qwen-AgentWorld's native format (its MCP system template and AgentWorldBench turns): the same
# sections in the same order, so the model sees the shape it was trained on.
AGENTWORLD_ROLE = """\
# Role and Objective

You are a **Tool World Model**, a virtual environment simulator that faithfully simulates the execution of \
tool calls in tool-augmented agent scenarios, strictly adhering to the Model Context Protocol (MCP) tool \
definitions below. Given a tool call with its arguments, you produce the response the real tool would return.

## Task Definition

Given:
1. **Historical Context** (optional): earlier tool calls of this session and the responses they got
2. **Current Tool Call**: a JSON function call with `name` and `arguments`

Predict the **exact tool response** a real execution environment would return."""

AGENTWORLD_ENVIRONMENT = """\
# Environment Management

- Track the state across turns: resources created, changed or deleted by earlier calls, their ids, \
timestamps and counters.
- Reads change nothing; writes create or change resources that later reads must reflect; a deleted \
resource stays gone and later access to it fails."""

AGENTWORLD_REQUIREMENTS = """\
# Predicted Observation Requirements

1. **Format Adherence**: when a tool has an outputSchema, the response is one JSON object that follows it \
exactly; otherwise it is the raw text the tool returns. Do not wrap raw responses in extra JSON.
2. **State Consistency**: agree with every earlier response and with the world state.
3. **Realistic Details**: plausible ids, timestamps, names and numbers, in the style of the demonstrations.
4. **Output**: the observation only, optionally inside <predicted_observation></predicted_observation>."""


def agentworld_system_prompt(spec_set: SpecSet, errors: bool = False, scenario: str = DEFAULT_SCENARIO,
                             first_call: bool = False) -> str:
    """The system prompt in Qwen-AgentWorld's MCP template shape: role, environment, tools, demonstrations."""
    parts = [AGENTWORLD_ROLE, AGENTWORLD_ENVIRONMENT + "\n" + (ERRORS_RULE if errors else SUCCESS_RULE)]
    description, data = spec_set.world_state(scenario)
    if description or data is not None:
        world = ["## World State"]
        if description:
            world.append(description.strip())
        if data is not None:
            world.append("Initial state (JSON):\n" + json.dumps(data, ensure_ascii=False))
        parts.append("\n\n".join(world))
    tools = _indexed_tools(spec_set, first_call) if spec_set.prompt_layout == "index" else "\n".join(
        json.dumps(_prompt_definition(t), ensure_ascii=False, separators=(",", ":")) for t in spec_set.tools)
    parts.append("# Input Definitions & Action Space\n\nYou can simulate the following tools:\n\n" + tools)
    parts.extend(filter(None, [surface_prompt(spec_set.surface)]))
    parts.append(AGENTWORLD_REQUIREMENTS)
    demonstrations = [
        agentworld_turn(number, render_action(tool.name, example.arguments))
        + "\n" + agentworld_observation(_example_observation(tool, example))
        for number, (tool, example) in enumerate(_examples(spec_set, scenario), start=1)
        if spec_set.prompt_layout != "index"]
    if demonstrations:
        parts.append("# Demonstrations\n\n" + "\n\n".join(demonstrations))
    return "\n\n---\n\n".join(parts)


def agentworld_turn(number: int, action: str) -> str:
    return f"### Turn {number}\n**Action:**\n```json\n{action}\n```"


def agentworld_observation(observation: str) -> str:
    return f"**Environment Observation:**\n{observation}"


def agentworld_messages(system: str, history: list[Turn], action: str) -> list[ChatMessage]:
    """Earlier turns as numbered action / observation pairs, then the current action as the next turn."""
    messages = [ChatMessage("system", system)]
    for number, turn in enumerate(history, start=1):
        messages.append(ChatMessage("user", agentworld_turn(number, turn.action)))
        messages.append(ChatMessage("assistant", agentworld_observation(turn.observation)))
    messages.append(ChatMessage("user", agentworld_turn(len(history) + 1, action)))
    return messages


def _example_observation(tool: ToolSpec, example: Example) -> str:
    """A demonstration's observation; a failure in the same shape a simulated failure takes."""
    if example.is_error:
        message = str(example.result)
        structured = tool.output_schema is not None
        return render_error(message if structured or message.startswith("Error:") else f"Error: {message}",
                            structured)
    return example.result if isinstance(example.result, str) else json.dumps(example.result)


_PREDICTED_OPEN = re.compile(r"<predicted_observation>", re.IGNORECASE)
_PREDICTED_CLOSE = re.compile(r"</predicted_observation>", re.IGNORECASE)
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_OBSERVATION_MARKER = "**Environment Observation:**"


def extract_observation(text: str) -> str:
    """The answer without reasoning or wrappers, as Qwen-AgentWorld's official parser reads it (its
    parse_model_output, then its clean_response_marker), and without a code fence around the whole."""
    text = strip_reasoning(text)
    opened = list(_PREDICTED_OPEN.finditer(text))
    if opened:
        text = text[opened[-1].end():]
        closed = _PREDICTED_CLOSE.search(text)
        text = text[: closed.start()] if closed else text
    text = text.strip()
    text = text[len(_OBSERVATION_MARKER):] if text.startswith(_OBSERVATION_MARKER) else \
        text.replace(_OBSERVATION_MARKER, "")
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    return text
