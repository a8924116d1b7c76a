"""Does llama.cpp's grammar, built from a JSON Schema by the engine's converter, let a model write this text?

The real converter and the real grammar sampler with the real model's vocabulary (no weights): each token of
the text must survive the grammar, and the grammar must allow the end of generation after the last one."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import llama_cpp

from mcp_sim.engines.llama.gguf import load_vocabulary
from mcp_sim.engines.llama.grammar import schema_to_gbnf


class GrammarChecker:
    def __init__(self, model_path: Path):
        self.model = load_vocabulary(model_path)
        self.vocab = self.model.vocab

    def accepts(self, json_schema: dict[str, Any], text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, schema_to_gbnf(json_schema).encode(), b"root")
        assert sampler, "llama.cpp rejected the grammar"
        try:
            for token in self.model.tokenize(text.encode(), add_bos=False, special=False):
                if not self._allowed(sampler, token):
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, llama_cpp.llama_vocab_eos(self.vocab))
        finally:
            llama_cpp.llama_sampler_free(sampler)

    @staticmethod
    def _allowed(sampler: Any, token: int) -> bool:
        data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
        candidates = llama_cpp.llama_token_data_array(data, 1, -1, False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return bool(data[0].logit > float("-inf"))

    def close(self) -> None:
        self.model.close()
