"""Lazily checked grammars (issue 14): the sampled token is checked against the output schema's grammar and
the whole vocabulary is filtered only when it is rejected. At temperature 0 the answers are the same as
with the grammar filtering every token, and they fit the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.llama.sampling import cut_at_stop
from tests.conftest import SPECS

OPS_CALLS = [("get_service_status", {"service": "api"}), ("restart_service", {"service": "worker"}),
             ("get_service_status", {"service": "worker"})]
# The model would never begin with this on its own: its first sampled tokens are rejected.
UNLIKELY = {"type": "object", "properties": {"code": {"type": "string", "enum": ["zq-7781-xv"]},
                                             "count": {"type": "integer"}}, "required": ["code", "count"]}


@pytest.fixture(scope="module")
def engine(model_path: Path) -> LlamaEngine:
    return LlamaEngine(model_path, n_ctx=4096, n_threads=2)


def test_lazy_and_eager_checks_give_the_same_schema_valid_answers(engine: LlamaEngine) -> None:
    catalog = load_catalog([SPECS / "ops.yaml"])
    simulator = Simulator(catalog, engine, SimOptions(temperature=0.0, max_tokens=96, attempts=1))
    answers: dict[bool, list[str]] = {}
    for lazy in (False, True):
        engine.lazy_grammar = lazy
        answers[lazy] = []
        for name, arguments in OPS_CALLS:
            result = simulator.simulate(name, arguments, world=f"lazy-{lazy}")
            assert not result.is_error, result.text
            schema = catalog.tools[name].output_schema
            assert schema is not None and validation_error(result.structured, schema) is None
            assert result.meta[META_KEY]["completion_tokens"] > 5
            answers[lazy].append(result.text)
    assert answers[True] == answers[False]


def test_a_rejected_first_token_is_resampled_under_the_grammar(engine: LlamaEngine) -> None:
    texts = {}
    for lazy in (False, True):
        engine.lazy_grammar = lazy
        request = GenerationRequest(messages=[ChatMessage("user", "Say hello in one friendly sentence.")],
                                    max_tokens=40, json_schema=UNLIKELY, schema_key="unlikely", temperature=0.0)
        generation = engine.generate(request)
        texts[lazy] = generation.text
        assert json.loads(generation.text)["code"] == "zq-7781-xv", generation.text
    assert texts[True] == texts[False]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_shortlist_gives_the_answer_the_whole_vocabulary_gives(engine: LlamaEngine,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 temperature: float) -> None:
    """On a rejected token the grammar filters only the best candidates by logit; the pick (and, sampling
    with a seed, every random draw) must be the one filtering the whole vocabulary makes."""
    import mcp_sim.engines.llama.sampling as sampling

    engine.lazy_grammar = True
    # Jumping would feed the forced code whole: no token of it would be rejected.
    monkeypatch.setattr(engine, "jump_forward", False)
    filtered: list[int] = []
    original = sampling.LazyGrammarSampler._pick_allowed

    def counted(self: sampling.LazyGrammarSampler, logits: object) -> int:
        filtered.append(1)
        return original(self, logits)

    monkeypatch.setattr(sampling.LazyGrammarSampler, "_pick_allowed", counted)
    texts = []
    for shortlist in (sampling.SHORTLIST, 10**9):  # 10**9: longer than the vocabulary, so never used
        monkeypatch.setattr(sampling, "SHORTLIST", shortlist)
        request = GenerationRequest(messages=[ChatMessage("user", "Say hello in one friendly sentence.")],
                                    max_tokens=40, json_schema=UNLIKELY, schema_key="unlikely",
                                    temperature=temperature, seed=7)
        texts.append(engine.generate(request).text)
        assert json.loads(texts[-1])["code"] == "zq-7781-xv", texts[-1]
    assert filtered, "no token was rejected: the shortlist was never tried"
    assert texts[0] == texts[1]


def test_the_answer_is_cut_at_the_first_stop_string() -> None:
    assert cut_at_stop('{"a": 1}<|im_end|>\nmore', ["<|im_end|>", "\nmore"]) == '{"a": 1}'
    assert cut_at_stop("plain", ["<|im_end|>"]) == "plain"
