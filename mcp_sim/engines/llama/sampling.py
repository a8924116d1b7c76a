"""The sampler chain of one answer (the job in batch_job.py calls it), with the grammar checked lazily, as
llama.cpp's own common sampler does: sample from the model's distribution first, check just that token against
the grammar, and apply the grammar to the whole vocabulary only when the token is rejected. Filtering all ~50k
candidates through the grammar on every token cost 30-75% per token; most tokens of a well-prompted answer fit
already. At temperature 0 the pick is the same either way: the best token the grammar accepts."""

from __future__ import annotations

import ctypes
import math
from collections import deque
from typing import Any

import numpy as np

from mcp_sim.engines.base import GenerationRequest
from mcp_sim.engines.llama.forced import ForcedSpans

# llama-cpp-python's sampling defaults that mcp-sim does not set (kept so both paths sample alike).
MIN_P = 0.05
TYPICAL_P = 1.0
PENALTY_LAST_N = 64  # llama-cpp-python's last_n_tokens_size
# On a rejected token, the grammar first filters only this many of the best candidates by logit (see
# LazyGrammarSampler._pick_allowed); the whole vocabulary only when too few of them are allowed.
SHORTLIST = 512


class LazyGrammarSampler:
    """The sampler chain of one answer, with its grammar applied only to rejected tokens (or, not `lazy`, to
    the whole vocabulary before every pick: `--no-lazy-grammar`, the same answers at temperature 0, slower).
    `ctx` is the llama_context whose logits it reads, `vocab` the model's vocabulary; `seed` is used when the
    request sets none. With `spans`, `forced()` takes the span the grammar forces next (forced.py)."""

    def __init__(self, ctx: Any, vocab: Any, request: GenerationRequest, grammar_text: str | None, seed: int,
                 lazy: bool = True, penalty_last_n: int = PENALTY_LAST_N, spans: ForcedSpans | None = None):
        import llama_cpp
        from llama_cpp._internals import LlamaSampler

        self._ctx = ctx
        self._lazy = lazy
        self._n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        chain = self._chain = LlamaSampler()
        chain.add_penalties(n_vocab=self._n_vocab, penalty_last_n=penalty_last_n,
                            penalty_repeat=request.repeat_penalty, penalty_freq=0.0, penalty_present=0.0)
        if request.temperature == 0:
            chain.add_greedy()
        else:
            chain.add_top_k(request.top_k)
            chain.add_typical(TYPICAL_P, 1)
            chain.add_top_p(request.top_p, 1)
            chain.add_min_p(MIN_P, 1)
            chain.add_temp(request.temperature)
            chain.add_dist(request.seed if request.seed is not None else seed)
        # Allowed candidates a shortlist must rank high enough for the chain's pick among them to be its pick
        # over the whole vocabulary: top_k (1 when greedy); None when top_k is off (all candidates count).
        top_k = 1 if request.temperature == 0 else request.top_k
        self._enough = top_k if top_k > 0 else None
        # The tokens the repetition penalty applies to: the last penalty_last_n the chain accepted.
        self._penalty = request.repeat_penalty
        self._recent: deque[int] = deque(maxlen=penalty_last_n)
        self._spans = spans
        self._grammar = None
        if grammar_text is not None:
            self._grammar = llama_cpp.llama_sampler_init_grammar(vocab, grammar_text.encode(), b"root")
        self._short_size = min(SHORTLIST, self._n_vocab)
        self._short = (llama_cpp.llama_token_data * self._short_size)()
        self._short_fields = np.ctypeslib.as_array(self._short)
        self._shortlist = llama_cpp.llama_token_data_array(self._short, self._short_size, -1, False)
        self._candidates = (llama_cpp.llama_token_data * self._n_vocab)()
        self._fields = np.ctypeslib.as_array(self._candidates)
        self._fields["id"] = np.arange(self._n_vocab, dtype=np.int32)
        self._all = llama_cpp.llama_token_data_array(self._candidates, self._n_vocab, -1, False)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._single = llama_cpp.llama_token_data_array(self._one, 1, -1, False)

    def close(self) -> None:
        import llama_cpp

        self._chain.close()
        if self._grammar is not None:
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None

    def sample(self, index: int = -1) -> int:
        """The next token from the logits of the `index`th output of the last batch (-1: its last); accepted
        by the chain and the grammar."""
        import llama_cpp

        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx, index), shape=(self._n_vocab,))
        if self._grammar is not None and not self._lazy:
            token = self._pick(logits, with_grammar=True)
        else:
            token = self._pick(logits, with_grammar=False)
        if self._grammar is not None and self._lazy and not self._allowed(token):
            token = self._pick_allowed(logits)
        self._accept(token)
        return token

    def forced(self, limit: int) -> list[int]:
        """The tokens (at most `limit`) of the span the grammar forces next, accepted as if sampled; [] when
        the model has a choice, or without a grammar or spans."""
        if self._grammar is None or self._spans is None or limit <= 0:
            return []
        tokens = self._spans.tokens(self._grammar)[:limit]
        for i, token in enumerate(tokens):
            if not self._allowed(token):  # never feed what the grammar would not have sampled
                del tokens[i:]
                break
            self._accept(token)
        return tokens

    def complete(self) -> bool:
        """The answer's grammar accepts nothing more than its end (never without a grammar or spans)."""
        return self._grammar is not None and self._spans is not None and self._spans.only_ends(self._grammar)

    def _accept(self, token: int) -> None:
        import llama_cpp

        llama_cpp.llama_sampler_accept(self._chain.sampler, token)
        self._recent.append(token)
        if self._grammar is not None:
            llama_cpp.llama_sampler_accept(self._grammar, token)

    def _pick(self, logits: Any, with_grammar: bool) -> int:
        import llama_cpp

        # The samplers sort and truncate the candidates in place: start from the whole vocabulary each time.
        self._fields["id"] = np.arange(self._n_vocab, dtype=np.int32)
        self._fields["logit"] = logits
        self._fields["p"] = 0.0
        self._all.size, self._all.selected, self._all.sorted = self._n_vocab, -1, False
        if with_grammar:
            llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(self._all))
        llama_cpp.llama_sampler_apply(self._chain.sampler, ctypes.byref(self._all))
        return int(self._candidates[self._all.selected].id)

    def _pick_allowed(self, logits: Any) -> int:
        """The chain's pick among the tokens the grammar allows, filtering only the SHORTLIST best candidates.

        Exact, not an approximation: a token outside the shortlist has a logit no higher than the lowest inside,
        and the repetition penalty only lowers logits; so when at least top_k allowed tokens inside keep, after
        their penalty, a logit at least that high, the chain's top_k (or greedy pick) falls inside, and the later
        steps (top_p, min_p, temperature, the draw) see the same candidates in the same order. Otherwise (or
        with top_k off) the grammar filters the whole vocabulary, as before."""
        import llama_cpp

        size = self._short_size
        if self._enough is None or size >= self._n_vocab:
            return self._pick(logits, with_grammar=True)
        best = np.argpartition(logits, -size)[-size:]
        fields = self._short_fields
        fields["id"] = best
        fields["logit"] = logits[best]
        fields["p"] = 0.0
        short = self._shortlist
        short.size, short.selected, short.sorted = size, -1, False
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(short))
        allowed = fields[np.isfinite(fields["logit"])]
        if not self._outrank_the_rest(allowed, float(logits[best].min())):
            return self._pick(logits, with_grammar=True)
        fields[: len(allowed)] = allowed
        short.size = len(allowed)
        llama_cpp.llama_sampler_apply(self._chain.sampler, ctypes.byref(short))
        return int(self._short[short.selected].id)

    def _outrank_the_rest(self, allowed: Any, floor: float) -> bool:
        """Whether top_k of the allowed shortlisted tokens keep a logit of at least `floor` after the
        repetition penalty (llama.cpp's: divide a positive logit by it, multiply a negative one)."""
        assert self._enough is not None
        if len(allowed) < self._enough:
            return False
        scores = allowed["logit"].astype(np.float64)
        if self._recent and self._penalty != 1.0:
            hit = np.isin(allowed["id"], np.fromiter(set(self._recent), dtype=np.int32))
            scores[hit] = np.where(scores[hit] > 0, scores[hit] / self._penalty, scores[hit] * self._penalty)
        return int(np.count_nonzero(scores >= floor)) >= self._enough

    def _allowed(self, token: int) -> bool:
        import llama_cpp

        self._one[0] = type(self._one[0])(token, 1.0, 0.0)
        self._single.size, self._single.selected, self._single.sorted = 1, -1, False
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(self._single))
        return not math.isinf(self._one[0].logit)


def hits_stop(data: bytes | bytearray, stops: list[str]) -> bool:
    """Whether the answer so far (raw bytes: a character may still be incomplete) contains a stop string."""
    text = data.decode("utf-8", errors="ignore")
    return any(stop in text for stop in stops)


def cut_at_stop(text: str, stops: list[str]) -> str:
    cuts = [text.find(stop) for stop in stops if stop in text]
    return text[: min(cuts)] if cuts else text
