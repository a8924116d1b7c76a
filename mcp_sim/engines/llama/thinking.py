"""Phase one of a thinking answer: free reasoning inside <think>, before the grammar-constrained answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_sim.base.reasoning import THINK_CLOSE, THINK_OPEN
from mcp_sim.engines.base import GenerationRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Thought:
    prompt: list[int]  # the prompt for the answer phase: ends with the closed think block
    text: str
    tokens: int
    cancelled: bool


def think(llama: Any, prompt: list[int], prompt_text: str, stops: list[str], request: GenerationRequest,
          encode: Callable[[str], list[int]]) -> Thought:
    """Phase one of a thinking answer: free decoding inside <think> until the model closes it or the
    budget runs out. No grammar here, so the schema never forces JSON into the reasoning; the answer
    prompt that comes back ends with a closed think block, ready for the grammar-constrained phase."""
    import llama_cpp

    prefix = prompt + opening_tokens(prompt_text, encode)
    generated: list[int] = []
    closed = cancelled = False
    if request.think_budget > 0:
        if request.seed is not None:
            llama.set_seed(request.seed)
        tokens = llama.generate(prefix, top_k=request.top_k, top_p=request.top_p,
                                temp=request.temperature, repeat_penalty=request.repeat_penalty)
        try:
            for token in tokens:
                if llama_cpp.llama_vocab_is_eog(llama._model.vocab, token):
                    break  # the model ended its turn while thinking; the answer phase still follows
                generated.append(token)
                if request.on_token is not None:
                    request.on_token(len(generated))
                tail = thought_tail(generated, lambda tokens: llama.detokenize(tokens, special=True))
                if THINK_CLOSE in tail:
                    closed = True
                    break
                if request.cancel.is_set():
                    cancelled = True
                    break
                if any(stop in tail for stop in stops) or len(generated) >= request.think_budget:
                    break
        finally:
            tokens.close()
    text = llama.detokenize(generated, special=True).decode("utf-8", errors="replace")
    reasoning = reasoning_of(text)
    logger.debug("reasoning (%d tokens, %s): %s", len(generated), "closed" if closed else "budget or end",
                 reasoning)
    # Extending the evaluated tokens (never re-tokenizing them) keeps the cache valid, which matters
    # for recurrent models (qwen35moe) whose state cannot be rolled back to a shorter prefix.
    return Thought(prefix + generated + encode(closing_suffix(text, closed)), reasoning, len(generated), cancelled)


# Both engines (this one-call path and batch_job.py) build the reasoning block with these, so the model sees
# the same text either way.

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
