"""Prompt building and answer extraction."""

from __future__ import annotations

import pytest

from mcp_sim.core.prompt import Turn, build_messages, extract_observation, render_action, system_prompt
from mcp_sim.core.specs import load_catalog
from tests.conftest import SPECS


def test_system_prompt_holds_role_tools_world_and_demonstrations() -> None:
    crm = load_catalog([SPECS]).tools["create_ticket"].spec_set
    assert crm is not None
    prompt = system_prompt(crm)
    assert prompt.startswith("You are a Tool World Model")
    assert "# Input Definitions & Action Space" in prompt and '"name":"create_ticket"' in prompt
    assert "# World" in prompt and "C-1001" in prompt  # seed data
    assert "# Demonstrations" in prompt and "Action: {\"name\": \"get_customer\"" in prompt


def test_messages_alternate_actions_and_observations() -> None:
    history = [Turn(render_action("a", {"x": 1}), "obs1")]
    messages = build_messages("SYS", history, render_action("b", {}))
    assert [(m.role, m.content) for m in messages] == [
        ("system", "SYS"), ("user", '{"name": "a", "arguments": {"x": 1}}'), ("assistant", "obs1"),
        ("user", '{"name": "b", "arguments": {}}')]


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"a": 1}', '{"a": 1}'),
    ('<think>hmm</think>\n{"a": 1}', '{"a": 1}'),
    ('{"a": 1}<think>never closed', '{"a": 1}'),
    ("<predicted_observation>one</predicted_observation> <predicted_observation>two</predicted_observation>", "two"),
    ("**Environment Observation:**\nhello", "hello"),
    ('```json\n{"a": 1}\n```', '{"a": 1}'),
    ("<think>x</think><predicted_observation>\nplain text", "plain text"),
])
def test_extract_observation(raw: str, expected: str) -> None:
    assert extract_observation(raw) == expected
