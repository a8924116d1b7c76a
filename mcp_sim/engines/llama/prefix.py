"""Prefix reuse: bring the model to the longest evaluated prefix of a prompt, so a call costs its new tokens.

A collaborator of LlamaEngine that holds its `Llama` handle. It snapshots the end of each system prompt
(shared by every session of a spec) and parks a conversation's live state when another conversation takes
the model; recurrent and hybrid models (qwen35moe) cannot roll state back, so for them it also snapshots
the end of each conversation's finished turns and restores only exact prefixes.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import threading
from array import array
from collections.abc import Callable
from typing import Any

from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.llama.state_cache import Snapshot, StateCache, common_prefix

logger = logging.getLogger(__name__)

# Prompt tokens evaluated between checks for cancellation.
PREFILL_CHUNK = 256

Checkpoint = tuple[int, str]  # (token count, snapshot key)


# The fewest tokens a context shift must keep to be worth it (below that, re-reading them is as cheap).
MIN_SHIFT_KEPT = 16
# Tokens of the new prompt, just past where it leaves the old state, searched for in the old state.
SHIFT_PROBE = 32


class PrefixCache:
    def __init__(self, llama: Any, recurrent: bool, states: StateCache,
                 transcript_tokens: Callable[[list[ChatMessage]], list[int]], context_shift: bool = True):
        self._llama = llama
        self.recurrent = recurrent
        # Removing a span of positions and shifting the rest needs an attention-only memory that allows it.
        self.context_shift = context_shift and not recurrent and memory_can_shift(llama._ctx.ctx)
        self.states = states
        # Renders messages as a finished transcript (no assistant cue): where turn boundaries lie.
        self._transcript_tokens = transcript_tokens
        # The conversation whose state the model holds now (None: none, or a cache-less call).
        self._live_key: str | None = None

    def prepare(self, request: GenerationRequest, tokens: list[int]) -> int:
        """Bring the model to all of `tokens` but the last; returns the tokens evaluated for it."""
        checkpoints = plan_checkpoints(request, tokens, self._transcript_tokens, self.recurrent)
        conversation = conversation_key(request.cache_key)
        self._park_live_state(conversation)
        related = related_keys(request.related_cache_keys, self.recurrent)
        if not self._shift_own_state(tokens[:-1], conversation):
            self._resume(tokens, [key for _, key in checkpoints] + ([conversation] if conversation else [])
                         + [key for key in related if key])
        self._live_key = conversation
        return self._prefill(tokens, checkpoints, request.cancel)

    def warm(self, tokens: list[int]) -> None:
        """Evaluate a system prompt (rendered as a finished transcript) and snapshot it, so the first call of
        every session of its spec reads only its own tokens."""
        key = system_key(tokens)
        if key in self.states:
            return
        self._park_live_state(None)
        self._live_key = None
        # A prompt one token longer: the model is brought to all of `tokens`, and snapshotted there.
        extended = [*tokens, tokens[-1]]
        self._resume(extended, [])
        self._prefill(extended, [(len(tokens), key)], threading.Event())

    def _park_live_state(self, incoming: str | None) -> None:
        """Before another conversation takes the model, save the live one's state (its prompt and answer).

        Taken only on a switch, so a session calling alone pays nothing; its next prompt extends what it
        just generated, so it resumes with only the new call to read."""
        if self._live_key is None or self._live_key == incoming or self.recurrent or not self._llama.n_tokens:
            return
        self.states.put(self._live_key, self.snapshot())

    def _resume(self, tokens: list[int], keys: list[str]) -> None:
        """Bring the model state to the longest prefix of `tokens` we can, live state or a snapshot, but
        never past the prompt's last token: the first answer token must be sampled from logits of this
        prompt's last token, evaluated now. A state covering the whole prompt (another session that began
        with the same call) would leave llama-cpp-python sampling from the logits of whatever that state
        evaluated last (issue 8)."""
        llama = self._llama
        target = tokens[:-1]
        current = llama._input_ids.tolist()
        shared = common_prefix(current, target)
        usable = shared if not self.recurrent or shared == len(current) else 0
        best = self.states.best(keys, target, exact=self.recurrent)
        if best is not None and best[2] > usable:
            _, snapshot, usable = best
            self.restore(snapshot)
        if llama.n_tokens > usable:
            if self.recurrent or not llama._ctx.kv_cache_seq_rm(-1, usable, -1):
                llama.reset()
                return
            self._set_evaluated(usable)

    def _shift_own_state(self, target: list[int], conversation: str | None) -> bool:
        """When `target` is this conversation's state with a span left out (its oldest turns, dropped to fit
        the context), remove that span from the KV cache and shift what follows back to close the gap, as
        llama.cpp's server does on a context shift, instead of re-reading the history. The kept tokens keep
        the attention they paid to the dropped ones, as there. Never reaches the prompt's last token."""
        if not self.context_shift or conversation is None:
            return False
        live = self._live_key == conversation
        snapshot = None if live else self.states.get(conversation)
        if not live and snapshot is None:
            return False
        current = self._llama._input_ids.tolist() if live else list(snapshot.tokens)  # type: ignore[union-attr]
        plan = shift_plan(current, target)
        if plan is None:
            return False
        if snapshot is not None:
            self.restore(snapshot)
        start, span, kept = shift_sequence(self._llama._ctx.ctx, 0, plan)
        self._llama.input_ids[start: start + kept] = target[start: start + kept]
        self._set_evaluated(start + kept)
        logger.info("context shift: left out %d tokens at %d, kept %d", span, start, kept)
        return True

    def _set_evaluated(self, count: int) -> None:
        """Declare the first `count` input tokens evaluated. The logits in the context then belong to no
        token of the new prompt, so llama-cpp-python must not sample from them before evaluating one."""
        self._llama.n_tokens = count
        self._llama._requires_eval = True

    def _prefill(self, tokens: list[int], checkpoints: list[Checkpoint], cancel: threading.Event) -> int:
        """Evaluate the prompt up to its last token, snapshotting at each checkpoint passed on the way."""
        llama = self._llama
        start = llama.n_tokens
        targets = [(end, key) for end, key in checkpoints if end > start] + [(len(tokens) - 1, "")]
        for end, key in targets:
            while llama.n_tokens < end:
                if cancel.is_set():
                    return int(llama.n_tokens - start)
                llama.eval(tokens[llama.n_tokens: min(end, llama.n_tokens + PREFILL_CHUNK)])
            if key:
                self.states.put(key, self.snapshot())
        return int(llama.n_tokens - start)

    def snapshot(self) -> Snapshot:
        return save_sequence(self._llama._ctx.ctx, 0, self._llama._input_ids.tolist())

    def restore(self, snapshot: Snapshot) -> None:
        llama = self._llama
        if not load_sequence(llama._ctx.ctx, snapshot, 0):
            llama.reset()
            return
        count = len(snapshot.tokens)
        llama.input_ids[:count] = snapshot.tokens
        self._set_evaluated(count)


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


def memory_can_shift(ctx: Any) -> bool:
    """Whether a llama context's memory can remove a span of positions and shift the rest (attention only)."""
    import llama_cpp

    memory = llama_cpp.llama_get_memory(ctx)
    return bool(memory is not None and llama_cpp.llama_memory_can_shift(memory))


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
