"""mcp-sim's `agentworld` prompt and answer parser against Qwen-AgentWorld's official ones (no model).

The official MCP system prompt template is held as data (tests/data/official, with its source and commit).
mcp-sim's prompt is not that template byte for byte: docs/MODELS.md says why for each difference, and this
test holds the list, so a change on either side shows up here and in the note together.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcp_sim.core.prompt import agentworld_system_prompt, extract_observation
from mcp_sim.core.specs import SpecSet, load_catalog
from tests.conftest import SPECS

OFFICIAL = Path(__file__).parent / "data" / "official" / "qwen_agentworld_mcp_system_prompt.txt"
SOURCE = ("QwenLM/Qwen-AgentWorld", "prompts/mcp/system_prompt.txt", "cd0aa83dc7a9c733695eb9c4652e0a68b6e6ecde")
_HEADING = re.compile(r"^(#{1,3}) (?!Turn \d)(.+)$", re.MULTILINE)

# Every heading of the official template, and what mcp-sim's agentworld prompt does with its section:
# "same" (heading and text as there), "shortened" (heading kept, text rewritten), "dropped". See
# docs/MODELS.md, "The agentworld prompt against the official template".
OFFICIAL_SECTIONS = {
    "Role and Objective": "shortened",
    "Task Definition": "shortened",
    "Core Responsibilities": "dropped",
    "Environment Management": "shortened",
    "State Representation & Initialization": "dropped",
    "State Transitions & Update": "dropped",
    "Context Awareness": "dropped",
    "Variable Reuse": "dropped",
    "Logical Consistency": "dropped",
    "Environment Execution": "dropped",
    "Tool Execution": "dropped",
    "Data Retrieval Tools": "dropped",
    "Data Modification Tools": "dropped",
    "Computation Tools": "dropped",
    "Communication/API Tools": "dropped",
    "Utility & Meta Tools": "dropped",
    "Response Format Inference": "dropped",
    "Error Handling & Edge Cases": "dropped",
    "Argument Validation Errors": "dropped",
    "Service Failures": "dropped",
    "Input Definitions & Action Space": "same",
    "Predicted Observation Requirements": "shortened",
}
# Sections mcp-sim adds: the world's seeded state, and the demonstrations under a heading of their own.
ADDED_SECTIONS = ["World State", "Demonstrations"]


def sections(text: str) -> dict[str, str]:
    """Each heading's text up to the next heading (demonstration turns are not headings)."""
    found = list(_HEADING.finditer(text))
    return {match.group(2): text[match.end(): found[i + 1].start() if i + 1 < len(found) else len(text)]
            .strip().strip("-").strip() for i, match in enumerate(found)}


def ops() -> SpecSet:
    spec_set = load_catalog([SPECS / "ops.yaml"]).tools["get_service_status"].spec_set
    assert spec_set is not None
    return spec_set


def tool_definitions(prompt: str) -> str:
    """The tool definitions as mcp-sim writes them: what it would put in the template's slot."""
    start = prompt.index("You can simulate the following tools:\n\n") + len("You can simulate the following tools:\n\n")
    return prompt[start: prompt.index("\n\n---\n\n", start)]


def test_the_official_template_is_the_one_held_here() -> None:
    template = OFFICIAL.read_text(encoding="utf-8")
    assert template.startswith("# Role and Objective\n\nYou are a **Tool World Model**")
    assert template.count("{tool_definitions}") == 1 and template.rstrip().endswith("{demonstrations}")
    assert SOURCE[2] in (OFFICIAL.parent / "README.md").read_text(encoding="utf-8")


def test_the_agentworld_prompt_differs_from_the_official_one_only_as_documented() -> None:
    prompt = agentworld_system_prompt(ops())
    definitions = tool_definitions(prompt)
    demonstrations = "\n\n# Demonstrations\n\n" + prompt.split("# Demonstrations\n\n", 1)[1]
    official = OFFICIAL.read_text(encoding="utf-8").replace("{tool_definitions}", definitions).replace(
        "{demonstrations}", demonstrations)
    assert official != prompt  # when they become equal, this test and the note in docs/MODELS.md go
    theirs, ours = sections(official), sections(prompt)
    found = {heading: ("dropped" if heading not in ours else "same" if ours[heading] == body else "shortened")
             for heading, body in theirs.items() if heading != "Demonstrations"}
    assert found == OFFICIAL_SECTIONS
    assert [heading for heading in ours if heading not in theirs] == ADDED_SECTIONS[:1]
    # The same order where both have a section, tools in the same slot, and each tool one JSON line.
    shared = [heading for heading in theirs if heading in ours]
    assert shared == [heading for heading in ours if heading in theirs]
    assert all(json.loads(line)["name"] for line in definitions.splitlines())
    assert ours["Input Definitions & Action Space"] == theirs["Input Definitions & Action Space"]


def test_demonstrations_use_the_turn_format_of_agentworldbench() -> None:
    prompt = agentworld_system_prompt(ops())
    demonstrations = prompt.split("# Demonstrations\n\n", 1)[1]
    assert demonstrations.startswith('### Turn 1\n**Action:**\n```json\n{"name": "restart_service", ')
    assert "```\n**Environment Observation:**\n{" in demonstrations


# What Qwen-AgentWorld's parser (eval/lwm_eval_utils/output_parser.py at the commit above: parse_model_output,
# then clean_response_marker for the mcp domain) makes of each raw output. The expectations were produced
# by running that parser; its code is not part of this repository.
OFFICIAL_PARSES = [
    ('{"a": 1}', '{"a": 1}'),
    ('<think>hmm</think>\n{"a": 1}', '{"a": 1}'),
    ('reasoning the template opened\n</think>\n\n{"a": 1}', '{"a": 1}'),
    ('reasoning\n</think>\n\n**Environment Observation:**\n{"a": 1}', '{"a": 1}'),
    ('<think>plan <predicted_observation>fake</predicted_observation></think>'
     '<predicted_observation>\n{"a": 2}\n</predicted_observation>', '{"a": 2}'),
    ('<think>never closed <predicted_observation>\n{"a": 3}\n</predicted_observation>', '{"a": 3}'),
    ("<THINK>upper</THINK>ok", "ok"),
    ("<think>a<think>nested</think>still</think>after", "after"),
    ("<predicted_observation>one</predicted_observation> <predicted_observation>two</predicted_observation>", "two"),
    ("<Predicted_Observation>mixed case</PREDICTED_OBSERVATION>", "mixed case"),
    ("**Environment Observation:**\nhello", "hello"),
    ("note **Environment Observation:** inside", "note  inside"),
    ("<think>x</think><predicted_observation>\nplain text", "plain text"),
    ("r1</think>mid</think>end", "end"),
]


@pytest.mark.parametrize(("raw", "official"), OFFICIAL_PARSES)
def test_the_answer_parser_reads_what_the_official_parser_reads(raw: str, official: str) -> None:
    assert extract_observation(raw) == official


def test_where_the_answer_parser_differs_from_the_official_one() -> None:
    # Nothing left: the official parser says "No output"; mcp-sim returns "" and treats it as no answer.
    assert extract_observation("<think>only reasoning, cut off by the budget") == ""
    # A code fence around the whole answer is taken off (the official parser keeps it).
    assert extract_observation('```json\n{"a": 1}\n```') == '{"a": 1}'
