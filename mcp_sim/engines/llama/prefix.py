"""Prefix reuse, planned: which snapshots a prompt may resume from and where to take new ones, so a call costs
its new tokens. Pure bookkeeping over token lists and keys; the decoder (batch.py) does the model work.

Every session of a spec shares its system prompt's snapshot. A session's live state stays in its slot and is
parked under its conversation key when another session needs the slot. Recurrent and hybrid models
(qwen35moe) cannot roll state back, so for them the end of each conversation's finished turns is snapshotted
too, and only exact prefixes are restored.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable

from mcp_sim.engines.base import ChatMessage, GenerationRequest

Checkpoint = tuple[int, str]  # (token count, snapshot key)


def plan_checkpoints(request: GenerationRequest, tokens: list[int],
                     transcript_tokens: Callable[[list[ChatMessage]], list[int]], recurrent: bool) -> list[Checkpoint]:
    """Where to snapshot on the way through this prompt: the end of the system prompt, shared by every
    session of a spec; for recurrent models also the end of this conversation's finished turns."""
    messages = request.messages
    boundaries: list[Checkpoint] = []
    system_end = _prefix_length(messages[:1], tokens, transcript_tokens)
    if system_end:
        boundaries.append((system_end, system_key(tokens[:system_end])))
    # Attention models resume from the state parked after their last answer; recurrent state can only
    # resume from an exact prefix, which the end of the finished turns is.
    if recurrent and request.cache_key is not None and len(messages) > 2:
        history_end = _prefix_length(messages[:-1], tokens, transcript_tokens)
        if history_end > system_end:
            boundaries.append((history_end, "turns:" + request.cache_key))
    return boundaries


def _prefix_length(messages: list[ChatMessage], tokens: list[int],
                   transcript_tokens: Callable[[list[ChatMessage]], list[int]]) -> int:
    """How many of `tokens` render `messages` as a finished transcript; 0 when the template renders that
    part differently inside the whole prompt (then there is no usable boundary there)."""
    prefix = transcript_tokens(messages)
    if 0 < len(prefix) < len(tokens) - 1 and tokens[: len(prefix)] == prefix:
        return len(prefix)
    return 0


def related_keys(cache_keys: list[str], recurrent: bool) -> list[str]:
    """Snapshots of related conversations (a fork's origin) a prompt may resume from: their parked state,
    and for recurrent models the end of their finished turns, the only exact prefix they keep."""
    return [f"{kind}:{key}" for key in cache_keys for kind in (("conversation", "turns") if recurrent
                                                                else ("conversation",))]


def conversation_key(cache_key: str | None) -> str | None:
    return None if cache_key is None else "conversation:" + cache_key


def system_key(tokens: list[int]) -> str:
    return "system:" + _digest(tokens)


def _digest(tokens: list[int]) -> str:
    return hashlib.sha256(array("i", tokens).tobytes()).hexdigest()[:16]
