"""The local engine: a GGUF model run in-process by llama.cpp (CPU, CUDA or Metal).

This is the only module that imports llama_cpp. The model is loaded on first use (or by `load()`),
once, and every call is serialized: one `Llama` object is not thread-safe.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import json
import logging
import os
import threading
import time
from array import array
from pathlib import Path
from typing import Any

from mcp_sim.engines.base import ChatMessage, Generation, GenerationRequest
from mcp_sim.errors import EngineError, ModelFileError
from mcp_sim.model_file import check_gguf_file
from mcp_sim.state_cache import Snapshot, StateCache, common_prefix

logger = logging.getLogger(__name__)

# Prompt tokens evaluated between checks for cancellation.
PREFILL_CHUNK = 256

# Used only when a GGUF carries no chat template (llama.cpp would otherwise fall back to llama-2).
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def gpu_offload_supported() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def build_info() -> dict[str, Any]:
    """What this llama.cpp build can do, for `doctor` and logs."""
    import llama_cpp

    system_info = llama_cpp.llama_print_system_info().decode(errors="replace")
    return {"llama_cpp_python": llama_cpp.__version__, "gpu_offload": gpu_offload_supported(),
            "system_info": system_info.strip()}


class LlamaEngine:
    """Runs one GGUF model with llama-cpp-python."""

    def __init__(self, model_path: str | Path, n_ctx: int = 4096, n_threads: int | None = None,
                 n_gpu_layers: int | None = None, seed: int = 0, template_kwargs: dict[str, Any] | None = None,
                 state_cache_mb: int = 1024, verbose: bool = False):
        self.model_path = Path(model_path)
        self.name = self.model_path.name
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_gpu_layers = n_gpu_layers
        self.seed = seed
        self.template_kwargs = template_kwargs or {}
        self.verbose = verbose
        self._llama: Any = None
        self._formatter: Any = None
        self._transcript_formatter: Any = None
        # Recurrent and hybrid models (qwen35moe) cannot roll their state back to an earlier token.
        self._recurrent = False
        self.states = StateCache(state_cache_mb * 1024 * 1024)
        # Tokens evaluated by the last call, before sampling: the measure of prefix reuse.
        self.last_evaluated = 0
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def context_size(self) -> int:
        return self.n_ctx

    def load(self) -> None:
        """Load the model now (servers do this at startup so a bad file fails fast)."""
        with self._lock:
            self._ensure_loaded()

    def _ensure_loaded(self) -> Any:
        if self._llama is not None:
            return self._llama
        check_gguf_file(self.model_path)
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        gpu_layers = self.n_gpu_layers
        if gpu_layers is None:
            gpu_layers = -1 if gpu_offload_supported() else 0
        started = time.perf_counter()
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                n_gpu_layers=gpu_layers, seed=self.seed, verbose=self.verbose)
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(
                f"llama.cpp could not load the model {self.model_path}: {exc}. The file may be truncated, "
                "corrupt, or of an architecture this llama.cpp build does not support; download it again "
                "or pass another file with --model.") from exc
        logger.info("loaded %s in %.2f s (n_ctx=%d, gpu_layers=%d)", self.model_path,
                    time.perf_counter() - started, self.n_ctx, gpu_layers)
        llama = self._llama
        template = llama.metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
        eos, bos = llama.token_eos(), llama.token_bos()
        eos_text = llama._model.token_get_text(eos) if eos != -1 else ""
        bos_text = llama._model.token_get_text(bos) if bos != -1 else ""
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)
        # Renders a conversation without the assistant cue: where snapshots of finished turns are taken.
        self._transcript_formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text,
                                                         add_generation_prompt=False)
        model = llama._model.model
        self._recurrent = bool(llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model))
        return llama

    def _tokenize(self, messages: list[ChatMessage], generation_prompt: bool = True) -> tuple[list[int], list[str]]:
        llama = self._ensure_loaded()
        formatter = self._formatter if generation_prompt else self._transcript_formatter
        formatted = formatter(messages=[{"role": m.role, "content": m.content} for m in messages],
                              **self.template_kwargs)
        tokens = llama.tokenize(formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special,
                                special=True)
        stops = [s for s in (formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]) if s]
        return tokens, stops

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        with self._lock:
            return len(self._tokenize(messages)[0])

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        try:
            self._grammar(json.dumps(json_schema, sort_keys=True), json_schema)
        except Exception as exc:  # the converter raises assorted errors on schemas it cannot express
            return f"{type(exc).__name__}: {exc}"
        return None

    def _grammar(self, key: str, json_schema: dict[str, Any]) -> Any:
        grammar = self._grammars.get(key)
        if grammar is None:
            from llama_cpp import LlamaGrammar

            # The converter prints the grammar to stdout, which is the protocol channel on stdio.
            with contextlib.redirect_stdout(io.StringIO()):
                grammar = LlamaGrammar.from_json_schema(json.dumps(json_schema), verbose=False)
            self._grammars[key] = grammar
        return grammar

    def generate(self, request: GenerationRequest) -> Generation:
        with self._lock:
            return self._generate(request)

    def _generate(self, request: GenerationRequest) -> Generation:
        llama = self._ensure_loaded()
        tokens, stops = self._tokenize(request.messages)
        if len(tokens) + request.max_tokens > self.n_ctx:
            raise EngineError(f"the prompt ({len(tokens)} tokens) plus max_tokens ({request.max_tokens}) "
                              f"exceeds the context of {self.n_ctx}; raise --ctx")
        checkpoints = self._checkpoints(request, tokens)
        self._resume(tokens, [key for _, key in checkpoints])
        evaluated = self._prefill(tokens, checkpoints, request.cancel)
        self.last_evaluated = evaluated
        if request.cancel.is_set():
            return Generation("", len(tokens), 0, "cancelled", evaluated)
        grammar = None
        if request.json_schema is not None:
            grammar = self._grammar(request.schema_key or json.dumps(request.json_schema, sort_keys=True),
                                    request.json_schema)
        # The KV now holds all but the last prompt token, so llama.cpp evaluates just that one and samples.
        stream = llama.create_completion(
            prompt=tokens, max_tokens=request.max_tokens, temperature=request.temperature,
            top_p=request.top_p, top_k=request.top_k, repeat_penalty=request.repeat_penalty,
            seed=request.seed, stop=stops, grammar=grammar, stream=True)
        pieces: list[str] = []
        finish_reason = "stop"
        produced = 0
        for chunk in stream:
            choice = chunk["choices"][0]
            pieces.append(choice["text"])
            produced += 1
            if request.on_token is not None:
                request.on_token(produced)
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
            if request.cancel.is_set():
                finish_reason = "cancelled"
                break
        with contextlib.suppress(Exception):
            stream.close()  # stops decoding now when we broke out early
        # A final chunk may carry only the finish reason.
        completion_tokens = max(0, llama.n_tokens - len(tokens)) or produced
        return Generation(text="".join(pieces), prompt_tokens=len(tokens), completion_tokens=completion_tokens,
                          finish_reason=finish_reason, evaluated_tokens=evaluated + 1)

    def _checkpoints(self, request: GenerationRequest, tokens: list[int]) -> list[tuple[int, str]]:
        """Where to snapshot on the way through this prompt: the end of the system prompt (shared by every
        session of a spec) and the end of this conversation's finished turns (resumed on its next call)."""
        messages = request.messages
        boundaries: list[tuple[int, str]] = []
        system_end = self._prefix_length(messages[:1], tokens)
        if system_end:
            boundaries.append((system_end, "system:" + _digest(tokens[:system_end])))
        if request.cache_key is not None and len(messages) > 2:
            history_end = self._prefix_length(messages[:-1], tokens)
            if history_end > system_end:
                boundaries.append((history_end, "conversation:" + request.cache_key))
        return boundaries

    def _prefix_length(self, messages: list[ChatMessage], tokens: list[int]) -> int:
        """How many of `tokens` render `messages` as a finished transcript; 0 when the template renders
        that part differently inside the whole prompt (then there is no usable boundary there)."""
        prefix = self._tokenize(messages, generation_prompt=False)[0]
        if 0 < len(prefix) < len(tokens) - 1 and tokens[: len(prefix)] == prefix:
            return len(prefix)
        return 0

    def _resume(self, tokens: list[int], keys: list[str]) -> None:
        """Bring the model state to the longest prefix of `tokens` we can: live state or a snapshot."""
        llama = self._llama
        current = llama._input_ids.tolist()
        shared = common_prefix(current, tokens)
        usable = shared if not self._recurrent or shared == len(current) else 0
        best = self.states.best(keys, tokens, exact=self._recurrent)
        if best is not None and best[2] > usable:
            _, snapshot, usable = best
            self._restore(snapshot)
        if llama.n_tokens > usable:
            if self._recurrent or not llama._ctx.kv_cache_seq_rm(-1, usable, -1):
                llama.reset()
                return
            llama.n_tokens = usable

    def _prefill(self, tokens: list[int], checkpoints: list[tuple[int, str]], cancel: threading.Event) -> int:
        """Evaluate the prompt up to its last token, snapshotting at each checkpoint passed on the way."""
        llama = self._llama
        start = llama.n_tokens
        targets = [(end, key) for end, key in checkpoints if end > start] + [(len(tokens) - 1, "")]
        for end, key in targets:
            while llama.n_tokens < end:
                if cancel.is_set():
                    return llama.n_tokens - start
                llama.eval(tokens[llama.n_tokens: min(end, llama.n_tokens + PREFILL_CHUNK)])
            if key:
                self.states.put(key, self._snapshot())
        return llama.n_tokens - start

    def _snapshot(self) -> Snapshot:
        import llama_cpp

        ctx = self._llama._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        return Snapshot(tuple(self._llama._input_ids.tolist()), ctypes.string_at(buffer, written))

    def _restore(self, snapshot: Snapshot) -> None:
        import llama_cpp

        llama = self._llama
        buffer = (ctypes.c_uint8 * len(snapshot.state)).from_buffer_copy(snapshot.state)
        if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, buffer, len(snapshot.state), 0) != len(snapshot.state):
            logger.warning("could not restore a state snapshot; evaluating the prompt from the start")
            llama.reset()
            return
        count = len(snapshot.tokens)
        llama.input_ids[:count] = snapshot.tokens
        llama.n_tokens = count


def _digest(tokens: list[int]) -> str:
    return hashlib.sha256(array("i", tokens).tobytes()).hexdigest()[:16]


def default_threads() -> int | None:
    """llama.cpp's default is half the cores; on small machines every core helps."""
    cores = os.cpu_count() or 1
    return cores if cores <= 4 else None
