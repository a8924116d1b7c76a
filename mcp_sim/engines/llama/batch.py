"""The decoder: one llama.cpp context holding N sequences (`--slots N`, 1 by default), one per active call.
It is the engine's only decode loop; with one slot, calls simply take turns.

Each step feeds, in one llama_decode, the next token of every answering call and a chunk of each joining
call's prompt; then every call whose logits came out samples its next token with its own sampler chain and
grammar. Calls join and leave between steps. A slot's state stays resident while its session is idle, and is
parked in the state cache only when another call needs the slot. Each sequence has a KV stream of its own
(loading.py says why); a new session starts from its spec's system prompt snapshot.

One thread (the decoder) owns the context; callers hand it jobs and wait (batch_job.py).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

from mcp_sim.base.errors import EngineError
from mcp_sim.engines.base import Generation
from mcp_sim.engines.llama.batch_job import Job
from mcp_sim.engines.llama.kv import (
    clear_sequence,
    cut_sequence,
    load_sequence,
    save_sequence,
    shift_plan,
    shift_sequence,
)
from mcp_sim.engines.llama.prefix import conversation_key, related_keys
from mcp_sim.engines.llama.slots import Resume, Slot, choose_slot, plan_resume
from mcp_sim.engines.llama.state_cache import StateCache

logger = logging.getLogger(__name__)

# Tokens one step may feed: every answering call's next token first, then chunks of joining prompts. Larger
# chunks read a prompt faster but make every answering call wait longer for its next token.
BATCH_TOKENS = 512


class BatchDecoder:
    def __init__(self, ctx: Any, vocab: Any, slots: int, states: StateCache, recurrent: bool,
                 context_shift: bool):
        import llama_cpp

        self._ctx = ctx  # a llama_cpp._internals.LlamaContext with n_seq_max = slots
        self._vocab = vocab
        self.states = states
        self.recurrent = recurrent
        self.context_shift = context_shift
        self.slots = [Slot(seq_id) for seq_id in range(slots)]
        self._queue: deque[Job] = deque()
        self._active: list[Job] = []
        self._forget: list[threading.Event] = []  # forget() requests, done by the decoder thread when idle
        self._wake = threading.Condition()
        self._closing = False
        self._clock = 0
        self._batch = llama_cpp.llama_batch_init(BATCH_TOKENS, 0, 1)
        self._thread = threading.Thread(target=self._run, name="mcp-sim-decoder", daemon=True)
        self._thread.start()

    def run(self, job: Job) -> Generation:
        """Queue a job and wait for its answer (in the caller's thread, which receives its progress)."""
        with self._wake:
            if self._closing:
                raise EngineError("the model engine is closed")
            self._queue.append(job)
            self._wake.notify()
        return job.wait()

    def forget(self) -> None:
        """Empty every slot, so the next calls read their prompts from the start or from a snapshot (a cold
        reference for tests and benchmarks). Waits for the calls in flight."""
        done = threading.Event()
        with self._wake:
            if self._closing:
                return
            self._forget.append(done)
            self._wake.notify()
        done.wait()

    def close(self) -> None:
        import llama_cpp

        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()
        for job in [*self._queue, *self._active]:
            job.fail(EngineError("the model engine was closed during the call"))
        self._queue.clear()
        self._active.clear()
        llama_cpp.llama_batch_free(self._batch)

    # --- the decoder thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closing and not self._queue and not self._active and not self._forget:
                    self._wake.wait()
                if self._closing:
                    for done in self._forget:
                        done.set()
                    return
                if self._forget and not self._active:
                    for slot in self.slots:
                        self._clear(slot)
                    for done in self._forget:
                        done.set()
                    self._forget.clear()
                arrivals = self._admit()
            for job in arrivals:
                self._begin(job)
            if self._active:
                try:
                    self._step()
                except Exception as exc:  # never let the decoder die: fail the calls in flight instead
                    logger.exception("the batched decoder failed a step")
                    for job in list(self._active):
                        self._abort(job, EngineError(f"the model failed while answering: {exc}"))

    def _admit(self) -> list[Job]:
        """Give queued jobs the slots that are free, in arrival order (the server's scheduler is fair); a job
        cancelled while it waited leaves the queue at once."""
        for job in [job for job in self._queue if job.request.cancel.is_set()]:
            self._queue.remove(job)
            job.finish("cancelled")
        admitted: list[Job] = []
        while self._queue:
            job = self._queue[0]
            slot = choose_slot(self.slots, conversation_key(job.request.cache_key), job.prompt)
            if slot is None:
                break
            self._queue.popleft()
            slot.busy = True
            job.slot = slot
            admitted.append(job)
        return admitted

    def _begin(self, job: Job) -> None:
        try:
            resumed = self._resume(job)
            job.start(resumed)
            job.checkpoints = [(end, key) for end, key in job.checkpoints
                               if end > resumed and (key.startswith("turns:") or key not in self.states)]
        except Exception as exc:
            logger.exception("could not start a call on the batched context")
            self._abort(job, EngineError(f"the model could not start the call: {exc}"))
            return
        self._active.append(job)

    def _resume(self, job: Job) -> int:
        """Bring the job's slot to the longest prefix of its prompt it can reach without reading it, never to
        the prompt's last token (whose logits the first answer token is sampled from); returns its length."""
        slot = job.slot
        assert slot is not None
        conversation = conversation_key(job.request.cache_key)
        target = job.prompt[:-1]
        self._park(slot, conversation)
        if conversation is not None and self._shift(slot, conversation, target):
            return len(slot.tokens)
        related = related_keys(job.request.related_cache_keys, self.recurrent)
        keys = [key for _, key in job.checkpoints] + [key for key in (conversation, *related) if key]
        resume = plan_resume(slot, self.states, keys, target, self.recurrent)
        seq = slot.seq_id
        if resume.kind == "snapshot":
            resume = self._restore(slot, str(resume.source), resume)
        if len(slot.tokens) > resume.shared:
            if not cut_sequence(self._ctx.ctx, seq, resume.shared):  # a recurrent state cannot be cut back
                slot.tokens = []
            del slot.tokens[resume.shared:]
        slot.owner = conversation
        return len(slot.tokens)

    def _restore(self, slot: Slot, key: str, resume: Resume) -> Resume:
        snapshot = self.states.get(key)
        if snapshot is not None and load_sequence(self._ctx.ctx, snapshot, slot.seq_id):
            slot.tokens = list(snapshot.tokens)
            return resume
        self._clear(slot)
        return Resume("own", 0)

    def _park(self, slot: Slot, incoming: str | None) -> None:
        """Save the state of the session that owned this slot before another one takes it."""
        if slot.owner is not None and slot.owner != incoming and slot.tokens:
            self.states.put(slot.owner, save_sequence(self._ctx.ctx, slot.seq_id, slot.tokens))
        if slot.owner != incoming:
            slot.owner = None

    def _shift(self, slot: Slot, conversation: str, target: list[int]) -> bool:
        """Drop the span of the conversation's state that its prompt left out (its oldest turns) and shift
        what follows back, as llama.cpp's server does on a context shift, instead of re-reading the history.
        The kept tokens keep the attention they paid to the dropped ones, as there."""
        if not self.context_shift:
            return False
        snapshot = None if slot.owner == conversation else self.states.get(conversation)
        if slot.owner != conversation and snapshot is None:
            return False
        current = slot.tokens if snapshot is None else list(snapshot.tokens)
        plan = shift_plan(current, target)
        if plan is None:
            return False
        if snapshot is not None and not load_sequence(self._ctx.ctx, snapshot, slot.seq_id):
            self._clear(slot)
            return False
        start, span, kept = shift_sequence(self._ctx.ctx, slot.seq_id, plan)
        slot.tokens = target[: start + kept]
        slot.owner = conversation
        logger.info("context shift in slot %d: left out %d tokens at %d, kept %d", slot.seq_id, span, start, kept)
        return True

    def _step(self) -> None:
        """Feed one batch and sample for every job whose pending tokens it completed."""
        import llama_cpp

        for job in [job for job in self._active if job.request.cancel.is_set()]:
            self._release(job)
            job.finish("cancelled")
        entries = self._fill_batch()
        if not entries:
            return
        code = llama_cpp.llama_decode(self._ctx.ctx, self._batch)
        if code != 0:
            for job, _, _ in entries:
                self._abort(job, EngineError(f"llama.cpp could not decode the batch (code {code}); "
                                             "raise --ctx or lower --slots"))
            return
        for job, count, index in entries:
            self._advance(job, count, index)

    def _fill_batch(self) -> list[tuple[Job, int, int | None]]:
        """Answering jobs (one pending token) first, then prompt chunks, up to BATCH_TOKENS; a chunk stops at
        the job's next checkpoint, so the state can be snapshotted there."""
        batch = self._batch
        entries: list[tuple[Job, int, int | None]] = []
        n = 0
        for job in sorted(self._active, key=lambda job: len(job.pending)):
            slot = job.slot
            assert slot is not None
            limit = BATCH_TOKENS - n
            for end, _ in job.checkpoints:
                if end > len(slot.tokens):
                    limit = min(limit, end - len(slot.tokens))
                    break
            count = min(len(job.pending), limit)
            if count <= 0:
                continue
            completes = count == len(job.pending) and job.samples
            base = len(slot.tokens)
            for i, token in enumerate(job.pending[:count]):
                batch.token[n] = token
                batch.pos[n] = base + i
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = slot.seq_id
                batch.logits[n] = completes and i == count - 1
                n += 1
            entries.append((job, count, n - 1 if completes else None))
        batch.n_tokens = n
        return entries

    def _advance(self, job: Job, count: int, index: int | None) -> None:
        import llama_cpp

        slot = job.slot
        assert slot is not None
        slot.tokens.extend(job.pending[:count])
        del job.pending[:count]
        while job.checkpoints and job.checkpoints[0][0] <= len(slot.tokens):
            end, key = job.checkpoints.pop(0)
            if end == len(slot.tokens):
                self.states.put(key, save_sequence(self._ctx.ctx, slot.seq_id, slot.tokens))
        if job.pending:
            return
        if not job.samples:  # a warm-up job: its prompt is read and snapshotted
            self._release(job)
            job.finish("stop")
            return
        assert job.sampler is not None and index is not None
        try:
            token = job.sampler.sample(index)
            alive = job.take(token, bool(llama_cpp.llama_vocab_is_eog(self._vocab, token)))
        except Exception as exc:  # a failing sampler or callback fails this call alone
            logger.exception("sampling failed")
            self._abort(job, EngineError(f"the model failed while answering: {exc}"))
            return
        if not alive:
            self._release(job)

    def _release(self, job: Job) -> None:
        slot = job.slot
        if slot is not None:
            self._clock += 1
            slot.busy = False
            slot.last_used = self._clock
        if job in self._active:
            self._active.remove(job)

    def _abort(self, job: Job, error: EngineError) -> None:
        """Fail a job and forget its slot's state, which may be half written."""
        if job.slot is not None:
            self._clear(job.slot)
        self._release(job)
        job.fail(error)

    def _clear(self, slot: Slot) -> None:
        clear_sequence(self._ctx.ctx, slot.seq_id)
        slot.tokens = []
        slot.owner = None
