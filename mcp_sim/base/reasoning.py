"""Reasoning in a model's raw output: where <think> blocks are, by the rules of Qwen-AgentWorld's official
output parser (eval/lwm_eval_utils/output_parser.py), so that every engine and the answer parser agree."""

from __future__ import annotations

import re

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
# An unclosed reasoning block ends where the observation's own tag begins.
_ANSWER_TAG = re.compile(r"<predicted_observation>", re.IGNORECASE)


def reasoning_spans(text: str) -> list[tuple[int, int]]:
    """Where the reasoning is, sorted: each <think> with the next unpaired </think>; for an orphaned </think>
    (the template opened the block in the prompt) everything before it; for an orphaned <think> everything
    up to the next <predicted_observation>, or to the end."""
    tags = [(match.start(), match.end(), match.group(1) == "/") for match in _THINK_TAG.finditer(text)]
    used: set[int] = set()
    spans: list[tuple[int, int]] = []
    for i, (start, _, closing) in enumerate(tags):
        if closing or i in used:
            continue
        partner = next((j for j in range(i + 1, len(tags)) if tags[j][2] and j not in used), None)
        if partner is not None:
            used.update((i, partner))
            spans.append((start, tags[partner][1]))
    spans += [(0, end) for i, (_, end, closing) in enumerate(tags) if closing and i not in used]
    for i, (start, _, closing) in enumerate(tags):
        if not closing and i not in used:
            answer = _ANSWER_TAG.search(text, start)
            spans.append((start, answer.start() if answer else len(text)))
    return sorted(spans)


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, answer): the reasoning without its tags, and the rest of the text, both stripped."""
    kept, thought, position = [], [], 0
    for start, end in reasoning_spans(text):
        if start > position:
            kept.append(text[position:start])
        if end > position:
            thought.append(text[max(start, position):end])
        position = max(position, end)
    kept.append(text[position:])
    reasoning = _THINK_TAG.sub("", "".join(thought))
    return reasoning.strip(), "".join(kept).strip()


def strip_reasoning(text: str) -> str:
    """The text without its reasoning (what the official parser keeps before it looks for the answer)."""
    return split_reasoning(text)[1]
