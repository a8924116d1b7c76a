"""Reasoning over the openai engine: thinking inline in the content (a server without a reasoning parser:
`python -m llama_cpp.server` serving the qwen35moe twin) or apart in `reasoning_content` (vLLM's and
SGLang's reasoning parsers, as a recorded stream), and the think budget sent where a server takes one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest

from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.openai import BUDGET_FIELD, OpenAIEngine
from tests.conftest import SPECS, llama_cpp_server
from tests.twin import THOUGHT, build_twin

ALIAS = "qwen-agentworld-twin"
OPS = SPECS / "ops.yaml"
MESSAGES = [ChatMessage("system", "You simulate a tool."), ChatMessage("user", "Call get_service_status.")]


@pytest.fixture(scope="module")
def twin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on the twin: it has no reasoning parser, so the
    twin's thinking (its template opens the block in the prompt) arrives inline in the content."""
    folder = tmp_path_factory.mktemp("twin-server")
    model = build_twin(folder / "twin.gguf")
    with llama_cpp_server(model, folder / "server.log", ALIAS, "--n_ctx", "16384", "--n_threads", "2") as url:
        yield url


def test_inline_thinking_is_split_from_the_answer(twin_server: str) -> None:
    engine = OpenAIEngine(twin_server, ALIAS, n_ctx=16384)
    generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=32, think=True, think_budget=16,
                                                   temperature=0.0, seed=0))
    # The twin thinks one token, closes the block itself and ends its turn: all of it reasoning, no answer.
    assert generation.reasoning == THOUGHT and generation.text == ""
    assert generation.reasoning_tokens == 2
    assert engine.budget_field is True  # sent, and ignored by this server without a complaint


def test_a_thinking_model_behind_the_server_gives_schema_valid_results(twin_server: str) -> None:
    catalog = load_catalog([OPS])
    options = SimOptions(max_tokens=96, temperature=0.0, attempts=1, prompt_style="agentworld", think=True,
                         think_budget=16)
    simulator = Simulator(catalog, OpenAIEngine(twin_server, ALIAS, n_ctx=16384), options)
    for service in ("api", "worker"):
        result = simulator.simulate("get_service_status", {"service": service}, world="remote")
        assert not result.is_error, result.text
        jsonschema.validate(result.structured, catalog.tools["get_service_status"].output_schema or {})


def sse(*deltas: dict[str, Any], usage: dict[str, Any] | None = None) -> bytes:
    events: list[dict[str, Any]] = [{"choices": [{"delta": delta, "finish_reason": None}]} for delta in deltas]
    events.append({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": usage})
    return "".join(f"data: {json.dumps(event)}\n\n" for event in events).encode() + b"data: [DONE]\n\n"


def recording_engine(answer: bytes, refuse_budget: bool = False) -> tuple[OpenAIEngine, list[dict[str, Any]]]:
    """An engine whose server is a handler: it records each request body and streams `answer`."""
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if refuse_budget and BUDGET_FIELD in body:
            return httpx.Response(400, json={"error": {"message": f"Unrecognized request argument: {BUDGET_FIELD}"}})
        return httpx.Response(200, content=answer, headers={"content-type": "text/event-stream"})

    engine = OpenAIEngine("http://reasoning-server:8000/v1", ALIAS)
    engine._client = httpx.Client(base_url=engine.base_url, transport=httpx.MockTransport(handle))
    engine._checked = True
    return engine, bodies


def test_reasoning_content_stays_apart_and_the_budget_is_sent() -> None:
    answer = sse({"reasoning_content": "The service "}, {"reasoning_content": "is up."},
                 {"content": '{"ok": '}, {"content": "true}"},
                 usage={"prompt_tokens": 40, "completion_tokens": 30,
                        "completion_tokens_details": {"reasoning_tokens": 26}})
    engine, bodies = recording_engine(answer)
    generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, think=True, think_budget=512))
    assert (generation.reasoning, generation.text) == ("The service is up.", '{"ok": true}')
    assert generation.reasoning_tokens == 26 and generation.completion_tokens == 30
    assert bodies[0][BUDGET_FIELD] == 512 and bodies[0]["max_tokens"] == 64 + 512
    off = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, think=False, think_budget=512))
    assert off.text == '{"ok": true}'
    assert BUDGET_FIELD not in bodies[1] and bodies[1]["chat_template_kwargs"] == {"enable_thinking": False}


def test_inline_reasoning_the_template_opened_and_an_unclosed_one() -> None:
    opened = sse({"content": "checking"}, {"content": " state"}, {"content": "</think>"}, {"content": "\n\n{}"})
    engine, _ = recording_engine(opened)
    generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, think=True, think_budget=8))
    assert (generation.reasoning, generation.text, generation.reasoning_tokens) == ("checking state", "{}", 3)
    cut = sse({"content": "<think>"}, {"content": "still going"})
    engine, _ = recording_engine(cut)
    generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, think=True, think_budget=8))
    assert (generation.reasoning, generation.text) == ("still going", "")


def test_a_server_that_refuses_the_budget_field_is_asked_again_without_it() -> None:
    engine, bodies = recording_engine(sse({"content": "{}"}), refuse_budget=True)
    for _ in range(2):
        generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, think=True, think_budget=64))
        assert generation.text == "{}"
    assert [BUDGET_FIELD in body for body in bodies] == [True, False, False]
    assert engine.budget_field is False
