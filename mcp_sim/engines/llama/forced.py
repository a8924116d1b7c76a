"""Jump-forward decoding (SGLang's name for it): where the grammar leaves exactly one continuation (the key
names, the punctuation, a pinned value of a JSON answer), the decoder feeds that whole span in one batch instead
of sampling it a token at a time. On a CPU llama.cpp reads a batch of tokens many times faster than it decodes
them one by one, so an answer the state mostly pins costs little more than its free parts.

The forced text is found on a copy of the grammar, one character at a time: a character is forced when it is
the only one of the probe characters (printable ASCII, tab and newline, each a token of its own) that the
grammar allows and the answer cannot end there. A probe holds ~100 candidates, not the vocabulary. An
alternative that starts with a character outside the probe set (a non-ASCII one) is not seen; such a span only
ends early, because a character the probe cannot name ends the span.

The span is then tokenized as a whole, as the model's tokenizer splits it: the grammar's forced spans end at a
JSON boundary (a quote, a colon, a comma, a bracket), where the free text that follows starts a token anyway.
"""

from __future__ import annotations

import ctypes
import string
from collections.abc import Callable
from typing import Any

# The longest span found in one go; a longer forced run continues after the next batch.
MAX_FORCED_CHARS = 512


class ForcedSpans:
    """The probe of one model's vocabulary. `tokenize` splits text into tokens without specials or a BOS."""

    def __init__(self, vocab: Any, tokenize: Callable[[str], list[int]], detokenize: Callable[[list[int]], bytes]):
        import llama_cpp

        self._tokenize = tokenize
        self._detokenize = detokenize
        probes: list[tuple[int, str]] = []
        for char in string.printable:
            if char in "\r\x0b\x0c":
                continue
            tokens = tokenize(char)
            if len(tokens) == 1 and detokenize(tokens) == char.encode():
                probes.append((tokens[0], char))
        ends = {llama_cpp.llama_vocab_eos(vocab), llama_cpp.llama_vocab_eot(vocab)} - {-1}
        self._chars = [char for _, char in probes]
        self._ids = [token for token, _ in probes] + sorted(ends)
        self._index = {token: i for i, token in enumerate(self._ids)}
        self._size = len(self._ids)
        self._data = (llama_cpp.llama_token_data * self._size)()
        self._array = llama_cpp.llama_token_data_array(self._data, self._size, -1, False)

    def text(self, grammar: Any, limit: int = MAX_FORCED_CHARS) -> str:
        """The text the grammar sampler `grammar` forces next ('' when the model has a choice)."""
        import llama_cpp

        # Applying a grammar leaves its state alone; only accepting moves it. So the first character is probed
        # on the grammar itself, and the copy (made for every sampled token otherwise) only for a forced one.
        first = self._forced_char(grammar)
        if first is None or limit <= 0:
            return ""
        copy = llama_cpp.llama_sampler_clone(grammar)
        forced: list[str] = []
        try:
            char: int | None = first
            while char is not None and len(forced) < limit:
                llama_cpp.llama_sampler_accept(copy, self._ids[char])
                forced.append(self._chars[char])
                char = self._forced_char(copy)
        finally:
            llama_cpp.llama_sampler_free(copy)
        return "".join(forced)

    def tokens(self, grammar: Any, limit: int = MAX_FORCED_CHARS) -> list[int]:
        """The forced text as the model's tokens; [] when it does not tokenize back to itself."""
        text = self.text(grammar, limit)
        if not text:
            return []
        tokens = self._tokenize(text)
        return tokens if self._detokenize(tokens) == text.encode() else []

    def only_ends(self, grammar: Any) -> bool:
        """Whether `grammar` allows nothing but the end of the answer: it is complete, and what the model
        would sample next (an end-of-turn token) need not be decoded."""
        allowed = self._allowed(grammar)
        return bool(allowed) and all(index >= len(self._chars) for index in allowed)

    def _forced_char(self, grammar: Any) -> int | None:
        """The probe index of the one character `grammar` allows next; None at a choice or where it may end."""
        allowed = self._allowed(grammar)
        return allowed[0] if len(allowed) == 1 and allowed[0] < len(self._chars) else None

    def _allowed(self, grammar: Any) -> list[int]:
        import llama_cpp

        for i, token in enumerate(self._ids):
            self._data[i].id, self._data[i].logit, self._data[i].p = token, 0.0, 0.0
        self._array.size, self._array.selected, self._array.sorted = self._size, -1, False
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(self._array))
        return [self._index[self._data[i].id] for i in range(self._size) if self._data[i].logit != float("-inf")]
