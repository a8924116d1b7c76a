"""One call inside the batched decoder: the tokens it still has to feed, and what each sampled token does.

The decoder thread drives a job step by step (feed a chunk, sample one token); the caller's thread waits in
`wait()`, relaying progress there, because the caller's progress callback must run in its own thread.
Where the grammar forces a span (forced.py), the job takes it whole and feeds it with the token before it;
where nothing but the answer's end can follow, the job ends without feeding what is pending.
A thinking job first decodes freely inside <think>, then feeds the closing suffix and answers under its
grammar; thinking.py holds how the reasoning block is opened and closed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from mcp_sim.base.reasoning import THINK_CLOSE
from mcp_sim.engines.base import Generation, GenerationRequest
from mcp_sim.engines.llama.sampling import LazyGrammarSampler, cut_at_stop, hits_stop
from mcp_sim.engines.llama.slots import Slot
from mcp_sim.engines.llama.thinking import closing_suffix, reasoning_of, thought_tail

logger = logging.getLogger(__name__)

Checkpoint = tuple[int, str]  # (token count, snapshot key)


@dataclass(frozen=True)
class Codec:
    """What a job needs of the model: text from tokens, tokens from text, a sampler for its request."""

    detokenize: Callable[[list[int], bool], bytes]  # (tokens, special)
    encode: Callable[[str], list[int]]
    sampler: Callable[[GenerationRequest, str | None], LazyGrammarSampler]  # (request, grammar or None)


class Job:
    def __init__(self, request: GenerationRequest, prompt: list[int], stops: list[str], grammar_text: str | None,
                 checkpoints: list[Checkpoint], codec: Codec, think_open: list[int] | None = None,
                 samples: bool = True):
        self.request = request
        self.prompt = prompt
        self.stops = stops
        self.grammar_text = grammar_text
        self.checkpoints = checkpoints
        self.codec = codec
        # Tokens that open the reasoning block after the prompt; None when the call does not think.
        self.think_open = think_open
        self.thinking = False
        # False for a warm-up job, which only evaluates its prompt (to snapshot it) and samples nothing.
        self.samples = samples
        self.slot: Slot | None = None
        self.pending: list[int] = []  # tokens to feed before the next sample
        self.evaluated = 0  # prompt tokens this call evaluated
        self.sampler: LazyGrammarSampler | None = None
        self.thought: list[int] = []
        self.produced: list[int] = []
        self.forced = 0  # produced tokens the grammar forced, fed without sampling
        self.data = bytearray()
        self._done = threading.Condition()
        self._progress = 0
        self._result: Generation | None = None
        self._error: BaseException | None = None

    # --- the caller's side -----------------------------------------------------------------------------

    def wait(self) -> Generation:
        """Block until the decoder finishes this job, relaying progress to the request's callback here."""
        reported = 0
        while True:
            with self._done:
                while self._result is None and self._error is None and self._progress == reported:
                    self._done.wait()
                progress, result, error = self._progress, self._result, self._error
            if progress != reported and self.request.on_token is not None:
                self.request.on_token(progress)
            reported = progress
            if error is not None:
                raise error
            if result is not None:
                return result

    # --- the decoder's side ------------------------------------------------------------------------------

    def start(self, resumed: int) -> None:
        """Begin once the slot holds the first `resumed` tokens of the prompt."""
        self.pending = self.prompt[resumed:]
        self.evaluated = len(self.pending)
        if not self.samples:
            return
        if self.think_open is None:
            self.sampler = self.codec.sampler(self.request, self.grammar_text)
            self.pending = self.pending + self._forced()
            return
        self.pending = self.pending + self.think_open
        if self.request.think_budget > 0:
            self.thinking = True
            self.sampler = self.codec.sampler(self.request, None)  # no grammar inside the reasoning
        else:
            self._close_thought(closed=False, last=[])

    def take(self, token: int, is_end: bool) -> bool:
        """Handle one sampled token; False once the job is finished."""
        if self.thinking:
            return self._take_thought(token, is_end)
        if is_end:
            return self.finish("stop")
        self.produced.append(token)
        self.data += self.codec.detokenize([token], False)
        self._report(len(self.thought) + len(self.produced))
        if self.request.cancel.is_set():
            return self.finish("cancelled")
        if hits_stop(self.data, self.stops):
            return self.finish("stop")
        if len(self.produced) >= self.request.max_tokens:
            return self.finish("length")
        self.pending = [token, *self._forced()]
        if hits_stop(self.data, self.stops):
            return self.finish("stop")
        assert self.sampler is not None
        if self.sampler.complete():
            # Only the end can follow: the answer is whole without feeding its last token and forced tail
            # (the slot keeps what it was fed, a prefix of the next call's prompt, which reads the rest).
            return self.finish("stop")
        return True

    def _forced(self) -> list[int]:
        """Take the span the grammar forces next as produced tokens (fed in one batch with the pending ones);
        room is left for one more sampled token, whose take() ends the answer at max_tokens."""
        assert self.sampler is not None
        tokens = self.sampler.forced(self.request.max_tokens - len(self.produced) - 1)
        if tokens:
            self.produced.extend(tokens)
            self.forced += len(tokens)
            self.data += self.codec.detokenize(tokens, False)
            self._report(len(self.thought) + len(self.produced))
        return tokens

    def _take_thought(self, token: int, is_end: bool) -> bool:
        if is_end:  # the model ended its turn while thinking; the answer phase still follows
            self._close_thought(closed=False, last=[])
            return True
        self.thought.append(token)
        self._report(len(self.thought))
        tail = thought_tail(self.thought, lambda tokens: self.codec.detokenize(tokens, True))
        if self.request.cancel.is_set():
            return self.finish("cancelled")
        if THINK_CLOSE in tail:
            self._close_thought(closed=True, last=[token])
        elif any(stop in tail for stop in self.stops) or len(self.thought) >= self.request.think_budget:
            self._close_thought(closed=False, last=[token])
        else:
            self.pending = [token]
        return True

    def _close_thought(self, closed: bool, last: list[int]) -> None:
        """Feed the rest of the reasoning block, then answer under the grammar."""
        self.thinking = False
        # Sampling happens only once everything pending was fed, so `pending` holds what the start left.
        self.pending = self.pending + last + self.codec.encode(closing_suffix(self._thought_text(), closed))
        if self.sampler is not None:
            self.sampler.close()
        self.sampler = self.codec.sampler(self.request, self.grammar_text)
        self.pending = self.pending + self._forced()

    def _thought_text(self) -> str:
        return self.codec.detokenize(self.thought, True).decode("utf-8", errors="replace") if self.thought else ""

    def _report(self, tokens: int) -> None:
        with self._done:
            self._progress = tokens
            self._done.notify_all()

    def finish(self, reason: str) -> bool:
        """Hand the answer to the caller; returns False (the job is over)."""
        self._close_sampler()
        reasoning = None
        if self.think_open is not None:
            reasoning = reasoning_of(self._thought_text())
            logger.debug("reasoning (%d tokens): %s", len(self.thought), reasoning)
        result = Generation(text=cut_at_stop(self.data.decode("utf-8", errors="ignore"), self.stops),
                            prompt_tokens=len(self.prompt), completion_tokens=len(self.thought) + len(self.produced),
                            finish_reason=reason, evaluated_tokens=self.evaluated, reasoning=reasoning,
                            reasoning_tokens=len(self.thought), forced_tokens=self.forced)
        with self._done:
            self._result = result
            self._done.notify_all()
        return False

    def fail(self, error: BaseException) -> None:
        self._close_sampler()
        with self._done:
            self._error = error
            self._done.notify_all()

    def _close_sampler(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
