"""The reasoning block of a thinking answer: free reasoning inside <think>, before the grammar-constrained
answer. How the block is opened, watched and closed; the job (batch_job.py) decodes it."""

from __future__ import annotations

from collections.abc import Callable

from mcp_sim.base.reasoning import THINK_CLOSE, THINK_OPEN


def opening_tokens(prompt_text: str, encode: Callable[[str], list[int]]) -> list[int]:
    """What opens the reasoning block after the prompt: nothing when the template opened it already (some
    do when thinking is on), else <think> and a newline."""
    return [] if prompt_text.rstrip().endswith(THINK_OPEN) else encode(THINK_OPEN + "\n")


def thought_tail(tokens: list[int], detokenize: Callable[[list[int]], bytes]) -> str:
    """The last few tokens of the reasoning as text: enough to see the closing tag or a stop string appear."""
    return detokenize(tokens[-8:]).decode("utf-8", errors="ignore")


def closing_suffix(text: str, closed: bool) -> str:
    """What follows the reasoning `text` before the answer: the model closed the block itself, or we close it."""
    return "\n\n" if closed else ("" if text.endswith("\n") else "\n") + THINK_CLOSE + "\n\n"


def reasoning_of(text: str) -> str:
    """The reasoning proper: the text before the closing tag."""
    return text.split(THINK_CLOSE, 1)[0].strip()
