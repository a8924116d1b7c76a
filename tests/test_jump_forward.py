"""Jump-forward decoding (issue 30) on the real model: the span the grammar forces (keys, punctuation, pinned
values) is fed in one batch; answers stay schema-valid and keep their pinned content, with one slot or two,
with the lazy grammar or without, on the shipped specs and on an imported API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.base import ChatMessage, Generation, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.llama.forced import ForcedSpans
from mcp_sim.engines.llama.grammar import fixed_json_layout, schema_to_gbnf
from mcp_sim.sources.openapi import import_openapi, write_spec
from tests.conftest import SPECS

PINNED = {f"field_{i}": f"value number {i}, as the state pinned it" for i in range(6)}
# Six pinned values and one the model writes: most of the answer is forced.
SCHEMA = {"type": "object", "additionalProperties": False, "required": [*PINNED, "note"],
          "properties": {**{key: {"const": value} for key, value in PINNED.items()},
                         "note": {"type": "string", "maxLength": 40}}}
MESSAGES = [ChatMessage("system", "You simulate a ticketing tool. Answer with the ticket as JSON."),
            ChatMessage("user", '{"name": "create_ticket", "arguments": {"title": "Printer on fire"}}')]
OPENAPI = Path(__file__).parent / "data" / "openapi" / "openapi31.yaml"


@pytest.fixture(scope="module")
def engine(model_path: Path) -> Iterator[LlamaEngine]:
    engine = LlamaEngine(model_path, n_ctx=4096, n_threads=2, seed=0)
    yield engine
    engine.close()


def pinned_answer(engine: LlamaEngine, jump: bool, **request: Any) -> Generation:
    engine.jump_forward = jump
    return engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=400, json_schema=SCHEMA,
                                             schema_key="jump-test", temperature=0.0, **request))


def assert_pinned(generation: Generation) -> dict[str, Any]:
    answer = json.loads(generation.text, strict=False)  # the grammar lets raw newlines into strings
    assert validation_error(answer, SCHEMA) is None, generation.text
    assert {key: answer[key] for key in PINNED} == PINNED
    return dict(answer)


def test_a_pinned_answer_is_fed_in_batches_and_keeps_its_content(engine: LlamaEngine) -> None:
    jumped = pinned_answer(engine, jump=True)
    assert_pinned(jumped)
    # Only the note's words (and the answer's end) are sampled; everything else came in forced spans.
    assert jumped.forced_tokens >= 0.8 * jumped.completion_tokens, jumped
    decoded = pinned_answer(engine, jump=False)
    assert_pinned(decoded)
    assert decoded.forced_tokens == 0


def test_a_whole_answer_ends_without_decoding_its_end(engine: LlamaEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once only the end can follow (the note's closing quote sampled, the brace forced), the answer is
    returned: its last tokens are not fed and no end-of-turn token is decoded. Each decode is then a sampled
    token's; a token at a time, the end of turn is decoded too."""
    import llama_cpp

    decodes = []
    decode = llama_cpp.llama_decode
    monkeypatch.setattr(llama_cpp, "llama_decode", lambda ctx, batch: decodes.append(batch.n_tokens) or
                        decode(ctx, batch))
    jumped = pinned_answer(engine, jump=True)
    assert_pinned(jumped)
    assert len(decodes) == jumped.completion_tokens - jumped.forced_tokens, decodes
    decodes.clear()
    decoded = pinned_answer(engine, jump=False)
    assert_pinned(decoded)
    assert len(decodes) == decoded.completion_tokens + 1


def test_the_forced_span_is_the_text_up_to_the_first_choice(engine: LlamaEngine) -> None:
    import llama_cpp

    model = engine._ensure_loaded()
    spans = ForcedSpans(model.vocab, lambda text: list(model.tokenize(text.encode(), add_bos=False, special=False)),
                        lambda tokens: model.detokenize(tokens, special=False))
    schema = {"type": "object", "required": ["id", "state"],
              "properties": {"id": {"const": "T-1001"}, "state": {"enum": ["open", "closed"]}}}
    grammar = llama_cpp.llama_sampler_init_grammar(model.vocab, schema_to_gbnf(schema, True).encode(), b"root")
    try:
        assert spans.text(grammar) == '{"id": "T-1001", "state": "'
        assert spans.text(grammar, limit=4) == '{"id'
        tokens = spans.tokens(grammar)
        assert model.detokenize(tokens, special=False) == b'{"id": "T-1001", "state": "'
        assert len(tokens) < len('{"id": "T-1001", "state": "')  # the tokenizer's own split, not one per character
        assert not spans.only_ends(grammar)
        for token in model.tokenize(b'{"id": "T-1001", "state": "open"}', add_bos=False, special=False):
            llama_cpp.llama_sampler_accept(grammar, token)
        assert spans.only_ends(grammar) and spans.text(grammar) == ""  # whole: nothing but the end follows
    finally:
        llama_cpp.llama_sampler_free(grammar)
    # The flexible layout leaves a space to choose after the brace: nothing is forced past it.
    flexible = llama_cpp.llama_sampler_init_grammar(model.vocab, schema_to_gbnf(schema).encode(), b"root")
    try:
        assert spans.text(flexible) == "{"
    finally:
        llama_cpp.llama_sampler_free(flexible)


def test_the_fixed_layout_is_json_dumps_layout() -> None:
    grammar = fixed_json_layout(schema_to_gbnf({"type": "object", "properties": {"a": {"type": "array"}}}))
    assert 'space ::= ""' in grammar.splitlines() and '" "?' not in grammar
    assert '": "' in grammar and '", "' in grammar


def test_without_the_lazy_grammar_the_same_span_is_forced(engine: LlamaEngine) -> None:
    answers = []
    for lazy in (True, False):
        engine.lazy_grammar = lazy
        generation = pinned_answer(engine, jump=True)
        assert_pinned(generation)
        answers.append((generation.text, generation.forced_tokens))
    engine.lazy_grammar = True
    assert answers[0] == answers[1]


def test_two_slots_keep_decoding_while_one_jumps(model_path: Path) -> None:
    engine = LlamaEngine(model_path, n_ctx=4096, n_threads=2, seed=0, slots=2)
    free = GenerationRequest(messages=[ChatMessage("user", "Name three colours.")], max_tokens=48,
                             temperature=0.0)
    try:
        alone = pinned_answer(engine, jump=True)
        results: dict[str, Generation] = {}

        def run(name: str, request: GenerationRequest) -> None:
            results[name] = engine.generate(request)

        threads = [threading.Thread(target=run, args=("free", free)),
                   threading.Thread(target=run, args=("pinned", GenerationRequest(
                       messages=MESSAGES, max_tokens=400, json_schema=SCHEMA, schema_key="jump-test",
                       temperature=0.0)))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        engine.close()
    assert results["free"].completion_tokens > 10 and results["free"].forced_tokens == 0  # no grammar, no span
    assert assert_pinned(results["pinned"]) == assert_pinned(alone)
    assert results["pinned"].forced_tokens == alone.forced_tokens > 0


@pytest.mark.parametrize("jump", [True, False])
def test_shipped_specs_and_an_imported_api_stay_schema_valid(engine: LlamaEngine, tmp_path: Path,
                                                             jump: bool) -> None:
    spec = tmp_path / "plants.yaml"
    write_spec(import_openapi(OPENAPI).document, spec)
    catalog = load_catalog([SPECS / "ops.yaml", SPECS / "crm.yaml", spec])
    engine.jump_forward = jump
    simulator = Simulator(catalog, engine, SimOptions(temperature=0.0, max_tokens=160, attempts=1))
    imported = next(name for name in catalog.tools if name.startswith("get_plants_")
                    and catalog.tools[name].output_schema is not None)
    required = catalog.tools[imported].input_schema.get("required", [])
    forced = 0
    for name, arguments in [("get_service_status", {"service": "api"}), ("restart_service", {"service": "api"}),
                            ("get_customer", {"customer_id": "C-1001"}), (imported, dict.fromkeys(required, "p-7"))]:
        result = simulator.simulate(name, arguments, world=f"jump-{jump}")
        schema = catalog.tools[name].output_schema
        assert not result.is_error, (name, result.text)
        assert schema is None or validation_error(result.structured, schema) is None, (name, result.text)
        forced += result.meta[META_KEY].get("forced_tokens", 0)
    assert (forced > 0) == jump
