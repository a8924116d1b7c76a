"""An engine that sends the simulator's prompts to an OpenAI-compatible server.

For when one machine is not enough: vLLM or SGLang serving Qwen-AgentWorld on a cluster, llama.cpp's
`llama-server`, Ollama, or `python -m llama_cpp.server`. The server does the decoding; the simulator
still validates every answer locally and retries, exactly as with the local engine.

Structured output is negotiated once per engine, most specific first: OpenAI's `json_schema` response
format, then the `json_object` + `schema` form of the llama.cpp servers, then none (prompt and local
validation only). Calls are streamed so that progress is reported and a cancelled call stops at once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from mcp_sim.base import defaults
from mcp_sim.base.errors import EngineError
from mcp_sim.base.reasoning import THINK_CLOSE, split_reasoning
from mcp_sim.engines.base import ChatMessage, EngineIdentity, Generation, GenerationRequest

logger = logging.getLogger(__name__)

FORMAT_MODES = ("json_schema", "json_object", "none")
# Rough, and on the high side so that history trimming errs towards fitting: ~3 characters a token.
CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 6
# vLLM's per-request cap on reasoning tokens (with a reasoning parser it then closes the block itself).
# Servers that do not know the field ignore it (llama-cpp-python, SGLang) or refuse it, once.
BUDGET_FIELD = "thinking_token_budget"


class OpenAIEngine:
    """Generates through an OpenAI-compatible /v1/chat/completions endpoint."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, n_ctx: int = defaults.CTX,
                 timeout: float = defaults.OPENAI_TIMEOUT_S, max_inflight: int = defaults.OPENAI_MAX_INFLIGHT):
        self.base_url = normalize_base_url(base_url)
        self.model = model
        self.name = model
        self.timeout = timeout
        self._n_ctx = n_ctx
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers,
                                    timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))
        # Caps the calls in flight to the server; the rest wait here, not in the server's queue.
        self._slots = threading.BoundedSemaphore(max_inflight)
        self._max_inflight = max_inflight
        # The response_format form this server accepted, once known (see FORMAT_MODES).
        self.format_mode: str | None = None
        # Whether the server takes BUDGET_FIELD (None: not known yet; False: it refused it).
        self.budget_field: bool | None = None
        self._checked = False
        self._check_lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._max_inflight

    @property
    def context_size(self) -> int:
        return self._n_ctx

    def identity(self) -> EngineIdentity:
        # A model served elsewhere: its name is all that is known of it.
        return EngineIdentity(described={"engine": type(self).__name__, "model": self.name})

    def load(self) -> None:
        """Check now that the server is up and serves the model (servers call this at startup)."""
        with self._check_lock:
            self._check()

    def served_models(self) -> list[dict[str, Any]] | None:
        """The server's model list (GET /models), or None when it has no such endpoint."""
        response = self._request("GET", "/models")
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise self._http_error(response)
        try:
            data = response.json().get("data")
        except (json.JSONDecodeError, AttributeError):
            raise EngineError(f"{self.base_url}/models did not answer with an OpenAI model list: is "
                              "--base-url the API root (usually ending in /v1)?") from None
        return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        """An estimate: the server's tokenizer is not reachable through the OpenAI API."""
        return sum(int(len(m.content) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS for m in messages)

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        # The server decides what it enforces; every answer is validated locally either way.
        return None

    def generate(self, request: GenerationRequest) -> Generation:
        if not self._checked:
            self.load()
        with self._slots:
            return self._generate(request)

    def close(self) -> None:
        self._client.close()

    def _check(self) -> None:
        if self._checked:
            return
        models = self.served_models()
        if models is None:
            logger.warning("%s has no /models endpoint; cannot check that it serves %s", self.base_url,
                           self.model)
            self._checked = True
            return
        ids = [str(m.get("id")) for m in models]
        if ids and self.model not in ids:
            raise EngineError(f"the server at {self.base_url} does not serve the model {self.model!r}; it "
                              f"serves {', '.join(ids)}. Pass one of those with --model")
        for entry in models:
            # vLLM reports the context it was started with; a larger --ctx would only fail later.
            limit = entry.get("max_model_len")
            if entry.get("id") == self.model and isinstance(limit, int) and limit < self._n_ctx:
                logger.info("%s serves %s with a %d-token context; using that", self.base_url, self.model,
                            limit)
                self._n_ctx = limit
        self._checked = True

    def _generate(self, request: GenerationRequest) -> Generation:
        started = time.perf_counter()
        while True:
            mode = self.format_mode or FORMAT_MODES[0]
            body = self._body(request, mode if request.json_schema is not None else "none")
            with self._stream(body) as response:
                if response.status_code < 400:
                    if request.json_schema is not None and self.format_mode is None:
                        self.format_mode = mode
                    if BUDGET_FIELD in body:
                        self.budget_field = True
                    generation = self._read_stream(response, request)
                    break
                response.read()
                error = self._http_error(response)
            if BUDGET_FIELD in body and BUDGET_FIELD in response.text:
                logger.warning("%s refused %s (%s); the think budget now only sizes max_tokens", self.base_url,
                               BUDGET_FIELD, _error_text(response))
                self.budget_field = False
                continue
            if request.json_schema is None or not _about_response_format(response) or mode == "none":
                raise error
            fallback = FORMAT_MODES[FORMAT_MODES.index(mode) + 1]
            logger.warning("%s refused response_format %s (%s); trying %s", self.base_url, mode,
                           _error_text(response), fallback)
            self.format_mode = fallback
        logger.debug("%s answered in %.2f s (%d tokens)", self.model, time.perf_counter() - started,
                     generation.completion_tokens)
        return generation

    def _body(self, request: GenerationRequest, mode: str) -> dict[str, Any]:
        budget = request.think_budget if request.think else 0
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            # The server cannot split thinking from answering for us: the budget covers both.
            "max_tokens": request.max_tokens + budget, "temperature": request.temperature,
            "top_p": request.top_p, "top_k": request.top_k, "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if not request.think:
            # Read by Qwen3-style templates on vLLM, SGLang and llama-server; ignored elsewhere.
            body["chat_template_kwargs"] = {"enable_thinking": False}
        elif budget > 0 and self.budget_field is not False:
            body[BUDGET_FIELD] = budget
        if mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "tool_output", "schema": request.json_schema}}
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": request.json_schema}
        return body

    def _stream(self, body: dict[str, Any]) -> _ErrorMappingStream:
        return _ErrorMappingStream(self, self._client.stream("POST", "/chat/completions", json=body))

    def _read_stream(self, response: httpx.Response, request: GenerationRequest) -> Generation:
        content: list[str] = []
        reasoning: list[str] = []
        finish_reason = "stop"
        chunks = thought_chunks = 0
        closed_at: int | None = None  # content chunks streamed when an inline </think> appeared
        usage: dict[str, Any] = {}
        try:
            for event in _sse_events(response.iter_lines()):
                if event.get("usage"):
                    usage = event["usage"]
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        content.append(delta["content"])
                        if closed_at is None and THINK_CLOSE in "".join(content[-8:]):
                            closed_at = len(content)
                    # Thinking arrives apart from the answer where the server runs a reasoning parser (vLLM
                    # and SGLang call it reasoning_content, some servers reasoning), else inline in the content.
                    thought = delta.get("reasoning_content") or delta.get("reasoning")
                    if thought:
                        reasoning.append(thought)
                        thought_chunks += 1
                    if delta.get("content") or thought:
                        chunks += 1
                        if request.on_token is not None:
                            request.on_token(chunks)
                    if choice.get("finish_reason"):
                        finish_reason = choice["finish_reason"]
                if request.cancel.is_set():
                    finish_reason = "cancelled"
                    break
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        inline, text = split_reasoning("".join(content))
        thoughts = "\n".join(part for part in ("".join(reasoning).strip(), inline) if part)
        if thoughts:
            logger.debug("reasoning (%s): %s", self.model, thoughts)
        prompt_tokens = usage.get("prompt_tokens") or self.count_tokens(request.messages)
        completion_tokens = usage.get("completion_tokens") or chunks
        details = usage.get("completion_tokens_details") or {}
        reasoning_tokens = details.get("reasoning_tokens") or thought_chunks + (
            (closed_at or 0) if inline else 0)
        if finish_reason not in ("stop", "length", "cancelled"):
            finish_reason = "stop"  # e.g. "eos" from some servers
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return Generation(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          finish_reason=finish_reason, reasoning=thoughts or None, reasoning_tokens=reasoning_tokens,
                          cached_tokens=cached if isinstance(cached, int) and not isinstance(cached, bool) else None)

    def _request(self, method: str, path: str) -> httpx.Response:
        try:
            return self._client.request(method, path)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None

    def _transport_error(self, exc: httpx.HTTPError) -> EngineError:
        if isinstance(exc, httpx.TimeoutException):
            return EngineError(f"the server at {self.base_url} did not answer within {self.timeout:g} s "
                               f"({type(exc).__name__}); raise --timeout or lower --max-inflight")
        if isinstance(exc, httpx.ConnectError):
            return EngineError(f"cannot connect to the OpenAI-compatible server at {self.base_url} ({exc}): "
                               "is it running, and is --base-url right?")
        return EngineError(f"talking to {self.base_url} failed: {type(exc).__name__}: {exc}")

    def _http_error(self, response: httpx.Response) -> EngineError:
        status, message = response.status_code, _error_text(response)
        where = f"{self.base_url} answered HTTP {status}"
        if status in (401, 403):
            return EngineError(f"{where}: {message}. The API key was refused or missing: set the variable "
                               "named by --api-key-env")
        if status == 404 and "model" in message.lower():
            return EngineError(f"{where}: {message}. The server does not serve the model {self.model!r}: "
                               "pass the name it serves with --model")
        if status == 404:
            return EngineError(f"{where} for {response.request.url.path}: {message}. Is --base-url the API "
                               "root (usually ending in /v1)?")
        return EngineError(f"{where}: {message}")


class _ErrorMappingStream:
    """httpx's streaming context, with network failures turned into EngineErrors."""

    def __init__(self, engine: OpenAIEngine, inner: Any):
        self._engine = engine
        self._inner = inner

    def __enter__(self) -> httpx.Response:
        try:
            response: httpx.Response = self._inner.__enter__()
            return response
        except httpx.HTTPError as exc:
            raise self._engine._transport_error(exc) from None

    def __exit__(self, *exc_info: Any) -> None:
        self._inner.__exit__(*exc_info)


def normalize_base_url(url: str) -> str:
    """The API root: `http://host:8000` and `http://host:8000/v1/` both become `http://host:8000/v1`."""
    url = url.strip().rstrip("/")
    if urlsplit(url).scheme not in ("http", "https"):
        raise EngineError(f"--base-url {url!r} needs a scheme, e.g. http://127.0.0.1:8000/v1")
    return url if urlsplit(url).path not in ("", "/") else url + "/v1"


def _sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            logger.debug("skipping an unreadable stream event: %r", data[:200])
            continue
        if isinstance(event, dict):
            if "error" in event:
                raise EngineError(f"the server reported an error mid-stream: {event['error']}")
            yield event


def _error_text(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:300] or response.reason_phrase
    if isinstance(payload, dict):
        error = payload.get("error", payload.get("detail", payload))
        if isinstance(error, dict):
            error = error.get("message", error)
        return (error if isinstance(error, str) else json.dumps(error))[:300]
    return json.dumps(payload)[:300]


def _about_response_format(response: httpx.Response) -> bool:
    """Whether a refusal is about the response_format (so a simpler form may work).

    llama-cpp-python's server answers a response_format it cannot parse with HTTP 500, not 400/422."""
    if response.status_code not in (400, 422, 500):
        return False
    text = response.text.lower()
    return "response_format" in text or "json_schema" in text or "schema" in text
