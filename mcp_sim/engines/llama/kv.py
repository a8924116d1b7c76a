"""The KV primitives of a batched llama.cpp context: what one sequence holds, saved, restored, cut back, cleared
and shifted. The decoder (batch.py) decides when; this module only knows how."""

from __future__ import annotations

import ctypes
import logging
from array import array
from typing import Any

from mcp_sim.engines.llama.state_cache import Snapshot, common_prefix

logger = logging.getLogger(__name__)

# The fewest tokens a context shift must keep to be worth it (below that, re-reading them is as cheap).
MIN_SHIFT_KEPT = 16
# Tokens of the new prompt, just past where it leaves the old state, searched for in the old state.
SHIFT_PROBE = 32


def save_sequence(ctx: Any, seq_id: int, tokens: list[int]) -> Snapshot:
    """A snapshot of sequence `seq_id` of a llama context, which has evaluated `tokens`."""
    import llama_cpp

    size = llama_cpp.llama_state_seq_get_size(ctx, seq_id)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq_id)
    # The ctypes buffer is kept as it is: copying tens of MB into bytes (and back) doubled the cost.
    return Snapshot(tuple(tokens), memoryview(buffer)[:written])


def load_sequence(ctx: Any, snapshot: Snapshot, seq_id: int) -> bool:
    """Put a snapshot into sequence `seq_id` (replacing what it held); False when llama.cpp refused it."""
    import llama_cpp

    size = snapshot.state.nbytes
    buffer = (ctypes.c_uint8 * size).from_buffer(snapshot.state.obj)  # shares the memory: no copy
    if llama_cpp.llama_state_seq_set_data(ctx, buffer, size, seq_id) != size:
        logger.warning("could not restore a state snapshot; evaluating the prompt from the start")
        return False
    return True


def cut_sequence(ctx: Any, seq_id: int, keep: int) -> bool:
    """Keep the first `keep` positions of sequence `seq_id`; False (and the sequence emptied) when its memory
    cannot be cut back, as a recurrent state cannot."""
    import llama_cpp

    memory = llama_cpp.llama_get_memory(ctx)
    if llama_cpp.llama_memory_seq_rm(memory, seq_id, keep, -1):
        return True
    clear_sequence(ctx, seq_id)
    return False


def clear_sequence(ctx: Any, seq_id: int) -> None:
    import llama_cpp

    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), seq_id, -1, -1)


def memory_can_shift(ctx: Any) -> bool:
    """Whether a llama context's memory can remove a span of positions and shift the rest (attention only)."""
    import llama_cpp

    memory = llama_cpp.llama_get_memory(ctx)
    return bool(memory is not None and llama_cpp.llama_memory_can_shift(memory))


def shift_plan(current: list[int], target: list[int]) -> tuple[int, int, int] | None:
    """(start, span, kept): `target` shares `start` tokens with `current`, then continues with `kept` tokens
    that follow a `span` left out of `current`; None when no such run of at least MIN_SHIFT_KEPT exists."""
    start = common_prefix(current, target)
    if start == 0 or start >= len(target) or start >= len(current):
        return None
    probe = target[start: start + SHIFT_PROBE]
    if len(probe) < min(SHIFT_PROBE, MIN_SHIFT_KEPT):
        return None
    at = _find(current, probe, start + 1)
    if at < 0:
        return None
    kept = common_prefix(current[at:], target[start:])
    return (start, at - start, kept) if kept >= MIN_SHIFT_KEPT else None


def shift_sequence(ctx: Any, seq_id: int, plan: tuple[int, int, int]) -> tuple[int, int, int]:
    """Carry out a shift_plan on sequence `seq_id` of a llama context: drop what follows the kept run, drop
    the span, and move the kept run back over it. Returns the plan."""
    import llama_cpp

    start, span, kept = plan
    memory = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_seq_rm(memory, seq_id, start + span + kept, -1)
    llama_cpp.llama_memory_seq_rm(memory, seq_id, start, start + span)
    llama_cpp.llama_memory_seq_add(memory, seq_id, start + span, start + span + kept, -span)
    return plan


def _find(haystack: list[int], needle: list[int], begin: int) -> int:
    """The first index >= begin where `needle` occurs in `haystack`, or -1 (a byte search: a 5k-token
    history is searched in microseconds)."""
    hay, pattern = array("i", haystack).tobytes(), array("i", needle).tobytes()
    at = hay.find(pattern, begin * 4)
    while at > 0 and at % 4:
        at = hay.find(pattern, at + 1)
    return at // 4 if at >= 0 else -1
