"""The openai engine against a real OpenAI-compatible server: llama-cpp-python's, serving SmolLM2."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import jsonschema
import pytest
from mcp import Client

from mcp_sim.base.errors import EngineError
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.openai import OpenAIEngine, normalize_base_url
from mcp_sim.serving.server import create_server
from tests.conftest import SPECS, free_port, llama_cpp_server, mcp_sim_command, subprocess_env

ALIAS = "smollm2-local"
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "temperature"],
          "properties": {"city": {"type": "string", "maxLength": 24}, "temperature": {"type": "number"}}}
MESSAGES = [ChatMessage("system", "You simulate a weather tool. Answer with JSON."),
            ChatMessage("user", '{"name": "get_weather", "arguments": {"city": "Lisbon"}}')]


@pytest.fixture(scope="module")
def server_url(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m llama_cpp.server` on a free loopback port, ready to answer."""
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with llama_cpp_server(model_path, log, ALIAS, "--n_ctx", "4096") as url:
        yield url


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


def test_schema_output_through_the_server_negotiates_the_response_format(server_url: str) -> None:
    engine = OpenAIEngine(server_url, ALIAS, n_ctx=4096)
    engine.load()
    ticks: list[int] = []
    generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, json_schema=SCHEMA,
                                                   seed=0, on_token=ticks.append))
    jsonschema.validate(json.loads(generation.text), SCHEMA)
    # This server refuses OpenAI's json_schema form and takes llama.cpp's json_object + schema.
    assert engine.format_mode == "json_object"
    assert generation.finish_reason == "stop" and generation.prompt_tokens > 10
    assert ticks and ticks == sorted(ticks)


def test_openai_and_local_engines_both_return_schema_valid_results(server_url: str, model_path: Path) -> None:
    catalog = load_catalog([str(SPECS / "weather.yaml")])
    schema = catalog.tools["get_weather"].output_schema
    options = SimOptions(max_tokens=200)
    remote = Simulator(catalog, OpenAIEngine(server_url, ALIAS, n_ctx=4096), options)
    local = Simulator(catalog, LlamaEngine(model_path, n_ctx=4096), options)
    for simulator in (remote, local):
        result = simulator.simulate("get_weather", {"city": "Lisbon"})
        assert not result.is_error, result.text
        jsonschema.validate(result.structured, schema)
        assert result.meta["mcp-sim/simulation"]["model"] in (ALIAS, model_path.name)


def test_cancelling_stops_the_stream(server_url: str) -> None:
    request = GenerationRequest(messages=[ChatMessage("user", "Write a long story about a lighthouse.")],
                                max_tokens=400)
    request.on_token = lambda n: request.cancel.set() if n >= 3 else None
    generation = OpenAIEngine(server_url, ALIAS).generate(request)
    assert generation.finish_reason == "cancelled"
    assert generation.completion_tokens < 10


def test_wrong_model_name_is_a_clear_error(server_url: str) -> None:
    # llama-cpp-python's server would silently answer with its default model; the engine checks first.
    engine = OpenAIEngine(server_url, "qwen-agentworld-35b-a3b")
    with pytest.raises(EngineError, match=rf"does not serve the model 'qwen-agentworld-35b-a3b'; it serves "
                                          rf"{ALIAS}\. Pass one of those with --model"):
        engine.load()
    with pytest.raises(EngineError, match="does not serve the model"):
        engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=16))


def test_server_down_is_a_clear_error_and_an_is_error_result() -> None:
    url = closed_port_url()
    engine = OpenAIEngine(url, ALIAS, timeout=5)
    with pytest.raises(EngineError, match=r"cannot connect to the OpenAI-compatible server at .*is it "):
        engine.load()
    simulator = Simulator(load_catalog([str(SPECS / "weather.yaml")]), engine, SimOptions(max_tokens=64))

    async def call() -> tuple[bool, str]:
        async with Client(create_server(simulator)) as client:
            result = await client.call_tool("get_weather", {"city": "Lisbon"})
            return bool(result.is_error), result.content[0].text  # type: ignore[union-attr]

    is_error, text = anyio.run(call)
    assert is_error and "cannot connect" in text and url in text


def test_timeouts_are_reported_with_the_option_to_raise(server_url: str) -> None:
    engine = OpenAIEngine(server_url, ALIAS, timeout=0.05)
    engine._checked = True  # skip the model check so that the slow part is the answer itself
    with pytest.raises(EngineError, match=r"did not answer within 0.05 s.*raise --timeout"):
        # A long prompt keeps the server busy for far longer than the timeout before its first token.
        engine.generate(GenerationRequest(messages=[ChatMessage("user", "Summarize this. " + "word " * 250)],
                                          max_tokens=8))


def test_cli_serves_through_the_openai_engine_and_explains_failures(server_url: str) -> None:
    base = ["call", str(SPECS / "weather.yaml"), "--tool", "get_weather", "--args", '{"city": "Oslo"}',
            "--engine", "openai", "--base-url", server_url.removesuffix("/v1"), "--max-tokens", "200"]
    done = subprocess.run(mcp_sim_command(*base, "--model", ALIAS), env=subprocess_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"]["city"]
    wrong = subprocess.run(mcp_sim_command(*base, "--model", "gpt-4o"), env=subprocess_env(),
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 1 and "does not serve the model 'gpt-4o'" in wrong.stderr
    doctor = mcp_sim_command("doctor", "--engine", "openai", "--base-url", closed_port_url(),
                             "--model", ALIAS)
    down = subprocess.run(doctor, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert down.returncode == 1 and "[FAIL] server: cannot connect" in down.stdout


def test_base_urls_are_normalized_to_the_api_root() -> None:
    assert normalize_base_url("http://gpu-box:8000") == "http://gpu-box:8000/v1"
    assert normalize_base_url("http://gpu-box:8000/v1/") == "http://gpu-box:8000/v1"
    assert normalize_base_url("https://host/openai/v1") == "https://host/openai/v1"
    with pytest.raises(EngineError, match="needs a scheme"):
        normalize_base_url("gpu-box:8000")


def test_the_engines_prefix_cache_hits_are_reported_in_meta() -> None:
    answer = json.dumps({"city": "Oslo", "temperature": 4.5, "conditions": "cloudy", "humidity": 81,
                         "wind_speed": 12.0, "units": "metric"})
    usage = {"prompt_tokens": 900, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 768}}
    events = [{"choices": [{"delta": {"content": answer}, "finish_reason": "stop"}]}, {"choices": [], "usage": usage}]
    stream = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"

    def handler(request: httpx.Request) -> httpx.Response:  # what vLLM and SGLang stream, usage last
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    engine = OpenAIEngine("http://vllm.invalid/v1", ALIAS)
    engine._client = httpx.Client(base_url=engine.base_url, transport=httpx.MockTransport(handler))
    engine._checked = True
    result = Simulator(load_catalog([SPECS / "weather.yaml"]), engine, SimOptions(attempts=1)).simulate(
        "get_weather", {"city": "Oslo"})
    assert not result.is_error and result.meta[META_KEY]["cached_tokens"] == 768
    assert result.meta[META_KEY]["prompt_tokens"] == 900
