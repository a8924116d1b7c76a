"""Grammars from JSON Schemas, compiled once per tool and checked by llama.cpp's own parser before use."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from mcp_sim.base.errors import EngineError

# What a GBNF string literal must escape. llama-cpp-python's converter leaves out the backslash, so a const or
# enum string holding a quote or a newline (a pinned file's content: {"debug": false}) became a literal that
# llama.cpp's parser rejects, or one that means another text; llama.cpp's own converter escapes it now.
LITERAL_ESCAPE = re.compile(r'[\r\n"\\]')
LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}
# The converter lets a space follow every token of JSON (`space ::= " "?`), a choice the model makes at every
# key and value. The fixed layout is Python's json.dumps (", " and ": ", no other space), as the prompts show
# answers; then the keys and punctuation between two free values are one forced span (forced.py).
FLEXIBLE_SPACE = 'space ::= " "?'
FIXED_SPACE = 'space ::= ""'
SEPARATORS = re.compile(r'"([,:])" space')


def schema_to_gbnf(json_schema: dict[str, Any], fixed_layout: bool = False) -> str:
    """The GBNF grammar of a JSON Schema: llama-cpp-python's converter, its string literals escaped fully;
    with `fixed_layout`, in json.dumps's layout only."""
    from llama_cpp import llama_grammar

    module: Any = llama_grammar  # untyped
    converter = module.SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    converter._format_literal = gbnf_literal  # every literal it writes (consts, enums, names) goes through it
    # The converter prints the grammar to stdout, which is the protocol channel on stdio.
    with contextlib.redirect_stdout(io.StringIO()):
        schema = converter.resolve_refs(copy.deepcopy(json_schema), "stdin")
        converter.visit(schema, "")
        grammar = str(converter.format_grammar())
    return fixed_json_layout(grammar) if fixed_layout else grammar


def fixed_json_layout(grammar: str) -> str:
    """The converter's grammar with its optional spaces fixed: one after a comma or a colon, none elsewhere."""
    if FLEXIBLE_SPACE not in grammar.splitlines():
        return grammar
    lines = [FIXED_SPACE if line == FLEXIBLE_SPACE else SEPARATORS.sub(r'"\1 "', line) for line in grammar.splitlines()]
    return "\n".join(lines) + "\n"


def gbnf_literal(text: str) -> str:
    return '"' + LITERAL_ESCAPE.sub(lambda match: LITERAL_ESCAPES[match.group(0)], text) + '"'


class GrammarCache:
    """GBNF grammars by key and layout, each checked once. `vocab` gives the model's vocabulary to parse them
    against (None: none)."""

    def __init__(self, vocab: Callable[[], Any]):
        self._vocab = vocab
        self._grammars: dict[tuple[str, bool], str] = {}
        # Batched calls compile grammars from several threads; schema_to_gbnf's redirect_stdout swaps sys.stdout
        # for the whole process, so two at once could leave the protocol channel pointing at a StringIO.
        self._lock = threading.Lock()

    def get(self, key: str, json_schema: dict[str, Any], fixed_layout: bool = False) -> str:
        with self._lock:
            return self._get(key, json_schema, fixed_layout)

    def _get(self, key: str, json_schema: dict[str, Any], fixed_layout: bool) -> str:
        grammar = self._grammars.get((key, fixed_layout))
        if grammar is None:
            grammar = schema_to_gbnf(json_schema, fixed_layout)
            self._check(grammar)
            self._grammars[(key, fixed_layout)] = grammar
        return grammar

    def support(self, json_schema: dict[str, Any]) -> str | None:
        """None when the schema compiles to a grammar llama.cpp accepts, else why not."""
        try:
            self.get(json.dumps(json_schema, sort_keys=True), json_schema)
        except Exception as exc:  # the converter raises assorted errors on schemas it cannot express
            return f"{type(exc).__name__}: {exc}"
        return None

    def _check(self, text: str) -> None:
        """Parse the grammar as llama.cpp will: the converter can emit text the parser rejects, and a
        rejected grammar crashes the sampler rather than raising."""
        import llama_cpp

        vocab = self._vocab()
        if vocab is None:
            return  # no model file to check against (only `mcp-sim check` without a model gets here)
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root")
        if not sampler:
            raise EngineError("llama.cpp's grammar parser rejected the grammar built from this schema")
        llama_cpp.llama_sampler_free(sampler)
