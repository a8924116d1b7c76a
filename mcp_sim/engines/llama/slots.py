"""The slots of a batched context: which one a call takes, and where its prompt resumes from. Pure bookkeeping;
batch.py does the model work.

A slot is one sequence of the shared llama.cpp context. Its state stays resident between calls, so a session
that finds its own slot idle resumes with only its new tokens to read; a slot is handed to another session
only when no idle one is free, and its state is then parked in the state cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_sim.engines.llama.state_cache import StateCache, common_prefix


@dataclass
class Slot:
    seq_id: int
    tokens: list[int] = field(default_factory=list)  # what this sequence of the context has evaluated
    owner: str | None = None  # the conversation whose state it holds (its state-cache key)
    busy: bool = False
    last_used: int = 0


def choose_slot(slots: list[Slot], conversation: str | None, prompt: list[int]) -> Slot | None:
    """The idle slot a call should take, or None when every slot is busy: its own conversation's slot, else a
    slot no conversation owns (the one sharing most of the prompt), else the least recently used one."""
    idle = [slot for slot in slots if not slot.busy]
    if not idle:
        return None
    if conversation is not None:
        own = next((slot for slot in idle if slot.owner == conversation), None)
        if own is not None:
            return own
    unowned = [slot for slot in idle if slot.owner is None]
    if unowned:
        return max(unowned, key=lambda slot: (common_prefix(slot.tokens, prompt), -slot.last_used))
    return min(idle, key=lambda slot: slot.last_used)


@dataclass(frozen=True)
class Resume:
    """Where a call's prompt resumes: `shared` tokens of it are already evaluated in the slot (kind "own") or
    restored from a snapshot ("snapshot", `source` is its key)."""

    kind: str
    shared: int
    source: str | None = None


def plan_resume(slot: Slot, states: StateCache, keys: list[str], target: list[int], recurrent: bool) -> Resume:
    """The longest prefix of `target` the slot can start from: what it holds, or a snapshot. Recurrent and
    hybrid models (qwen35moe) cannot cut their state back, so for them only exact prefixes count. (Each
    sequence has a KV stream of its own, and llama.cpp copies only whole streams between them, so a slot
    never starts from another live slot's cells.)"""
    own = common_prefix(slot.tokens, target)
    if recurrent and own != len(slot.tokens):
        own = 0
    best = Resume("own", own)
    found = states.best(keys, target, exact=recurrent)
    if found is not None and found[2] > best.shared:
        best = Resume("snapshot", found[2], found[0])
    return best
