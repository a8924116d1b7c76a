"""The local engine: a GGUF model run in-process by llama.cpp (CPU, CUDA or Metal).

Only this package imports llama_cpp. The model is loaded on first use (or by `load()`), once. With one slot
every generation is serialized (one `Llama` object is not thread-safe); with `slots` > 1 a decoder thread
decodes up to that many calls together in one context (batch.py, batch_job.py, slots.py, loading.py). Its
other collaborators: prefix.py (state snapshots, so a call evaluates only its new tokens), grammar.py
(schemas to checked grammars), sampling.py (lazy grammar checks), thinking.py (reasoning before the answer),
gguf.py (file checks, metadata), build.py (what the build can do).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.errors import EngineError, ModelFileError
from mcp_sim.engines.base import ChatMessage, EngineIdentity, Generation, GenerationRequest
from mcp_sim.engines.llama.batch import BatchDecoder
from mcp_sim.engines.llama.batch_job import Codec, Job
from mcp_sim.engines.llama.build import build_info, default_threads, gpu_offload_supported
from mcp_sim.engines.llama.gguf import check_gguf_file, load_vocabulary, read_metadata
from mcp_sim.engines.llama.grammar import GrammarCache
from mcp_sim.engines.llama.loading import is_recurrent, open_batched, warm_batched
from mcp_sim.engines.llama.overrides import OverrideValue, plan_load
from mcp_sim.engines.llama.prefix import PrefixCache, memory_can_shift, plan_checkpoints
from mcp_sim.engines.llama.sampling import LazyGrammarSampler, decode
from mcp_sim.engines.llama.state_cache import StateCache
from mcp_sim.engines.llama.thinking import opening_tokens, think

__all__ = ["LlamaEngine", "build_info", "default_threads", "gpu_offload_supported", "plan_load", "read_metadata"]

logger = logging.getLogger(__name__)

# What llama-cpp-python's Llama makes of seed 0; the batched path follows it so both sample alike.
LLAMA_DEFAULT_SEED = 0xFFFFFFFF

# Used only when a GGUF carries no chat template (llama.cpp would otherwise fall back to llama-2).
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class LlamaEngine:
    """Runs one GGUF model with llama-cpp-python."""

    def __init__(self, model_path: str | Path, n_ctx: int = defaults.CTX, n_threads: int | None = None,
                 n_gpu_layers: int | None = None, seed: int = defaults.SEED,
                 template_kwargs: dict[str, Any] | None = None, verbose: bool = False,
                 chat_template: str | None = None, state_cache_mb: int = defaults.STATE_CACHE_MB,
                 context_shift: bool = defaults.CONTEXT_SHIFT, flash_attn: bool = defaults.FLASH_ATTN,
                 lazy_grammar: bool = defaults.LAZY_GRAMMAR, slots: int = defaults.SLOTS,
                 metadata_overrides: dict[str, OverrideValue] | None = None):
        self.model_path = Path(model_path)
        self.name = self.model_path.name
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()  # one count for both decoders, prompt and generation
        self.n_gpu_layers = n_gpu_layers
        self.seed = seed
        self.template_kwargs = template_kwargs or {}
        # Overrides the GGUF's own chat template (some files ship a broken or missing one).
        self.chat_template = chat_template
        self.verbose = verbose
        self.context_shift = context_shift
        self.flash_attn = flash_attn
        # Check the grammar against the sampled token only, filtering the vocabulary when it is rejected.
        self.lazy_grammar = lazy_grammar
        # Calls decoded together in one context (continuous batching, batch.py); 1: one call at a time.
        self.slots = slots
        # llama.cpp metadata overrides from the model's manifest; load() adds what the file's defects call for.
        self.metadata_overrides = metadata_overrides or {}
        self.states = StateCache(state_cache_mb * 1024 * 1024)
        self._llama: Any = None  # the one-call-at-a-time path's llama_cpp.Llama
        self._model: Any = None  # the loaded llama_cpp LlamaModel (both paths); set last, when ready
        self._decoder: BatchDecoder | None = None
        self._batch_model: Any = None
        self._batch_context: Any = None
        self._codec: Any = None
        self._prefix: PrefixCache | None = None
        self._formatter: Any = None
        self._transcript_formatter: Any = None
        self._grammars = GrammarCache(self._vocab)
        self._vocab_model: Any = None  # a vocabulary-only load, to check grammars before the model loads
        # Generation holds `_lock` for a whole call; tokenizing only needs the model loaded, so counting
        # tokens for one call never waits behind another call's decoding.
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self.slots  # the batched decoder's sequences; with one slot, calls take turns

    @property
    def context_size(self) -> int:
        return self.n_ctx

    def identity(self) -> EngineIdentity:
        return EngineIdentity(model_file=self.model_path)  # the file's content, whatever it is called

    def load(self) -> None:
        """Load the model now (servers do this at startup so a bad file fails fast)."""
        self._ensure_loaded()

    def check(self) -> None:
        """Fail now, naming the file, when the model is missing, corrupt or of an architecture this build
        cannot load: reads its header and vocabulary only, so it is fast even for a 20 GB file."""
        read_metadata(self.model_path)

    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        """Load the model and evaluate the system message of each prompt, keeping a snapshot of each: the
        first call of every spec then costs no more than a later one. Calls wait while a prompt is read."""
        self._ensure_loaded()
        for messages in prompts:
            tokens = self._transcript_tokens(messages[:1])
            if len(tokens) <= 1:
                continue
            if self._decoder is not None:
                warm_batched(self._decoder, tokens, self._codec)
                continue
            assert self._prefix is not None
            with self._lock:
                self._prefix.warm(tokens)

    def close(self) -> None:
        """Free the model and its context."""
        with self._lock, self._load_lock:
            if self._decoder is not None:
                self._decoder.close()
            for handle in (self._llama, self._batch_context, self._batch_model, self._vocab_model):
                if handle is not None:
                    handle.close()
            self._llama = self._vocab_model = self._prefix = self._model = self._decoder = None
            self._batch_context = self._batch_model = None

    def _ensure_loaded(self) -> Any:
        if self._model is not None:
            return self._model
        with self._load_lock:
            if self._model is None:
                self._load()
        return self._model

    def _load(self) -> None:
        check_gguf_file(self.model_path)
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        gpu_layers = self.n_gpu_layers
        if gpu_layers is None:
            gpu_layers = -1 if gpu_offload_supported() else 0
        plan = plan_load(self.model_path, self.metadata_overrides)
        if plan.findings:
            logger.warning("loading %s with metadata overrides: %s", self.model_path.name, "; ".join(plan.findings))
        started = time.perf_counter()
        try:
            if self.slots > 1:
                model = self._load_batched(gpu_layers, plan.overrides)
            else:
                llama = llama_cpp.Llama(
                    model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                    n_threads_batch=self.n_threads, n_gpu_layers=gpu_layers, seed=self.seed,
                    flash_attn=self.flash_attn, verbose=self.verbose, kv_overrides=plan.overrides or None)
                model = llama._model
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(
                f"llama.cpp could not load the model {self.model_path}: {exc}. The file may be truncated, "
                "corrupt, or of an architecture this llama.cpp build does not support; download it again "
                "or pass another file with --model.") from exc
        logger.info("loaded %s in %.2f s (n_ctx=%d x %d slots, gpu_layers=%d)", self.model_path,
                    time.perf_counter() - started, self.n_ctx, self.slots, gpu_layers)
        template = self.chat_template or model.metadata().get("tokenizer.chat_template") or CHATML_TEMPLATE
        eos, bos = model.token_eos(), model.token_bos()
        eos_text = model.token_get_text(eos) if eos != -1 else ""
        bos_text = model.token_get_text(bos) if bos != -1 else ""
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)
        # Renders a conversation without the assistant cue: where snapshots of finished turns are taken.
        self._transcript_formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text,
                                                         add_generation_prompt=False)
        if self.slots == 1:
            self._prefix = PrefixCache(llama, is_recurrent(model), self.states, self._transcript_tokens,
                                       self.context_shift)
            self._llama = llama
        self._model = model  # last: other threads take a set _model as a model ready to use

    def _load_batched(self, gpu_layers: int, overrides: dict[str, OverrideValue]) -> Any:
        """The model and one context of `slots` sequences, each with room for n_ctx tokens."""
        self._batch_model, self._batch_context = open_batched(
            self.model_path, self.n_ctx, self.slots, self.n_threads, gpu_layers, self.flash_attn, self.verbose,
            overrides)
        model = self._batch_model
        recurrent = is_recurrent(model)
        self._decoder = BatchDecoder(self._batch_context, model.vocab, self.slots, self.states, recurrent,
                                     self.context_shift and not recurrent and memory_can_shift(self._batch_context.ctx))
        self._codec = Codec(detokenize=lambda tokens, special: model.detokenize(tokens, special=special),
                            encode=self._encode,
                            sampler=lambda request, grammar: LazyGrammarSampler(
                                self._batch_context.ctx, model.vocab, request, grammar,
                                self.seed or LLAMA_DEFAULT_SEED))
        return model

    def _tokenize(self, messages: list[ChatMessage], think: bool = False,
                  generation_prompt: bool = True) -> tuple[list[int], list[str], str]:
        model = self._ensure_loaded()
        formatter = self._formatter if generation_prompt else self._transcript_formatter
        # Templates that can think (Qwen3 and kin) read enable_thinking; the others ignore it.
        formatted = formatter(messages=[{"role": m.role, "content": m.content} for m in messages],
                              **{**self.template_kwargs, "enable_thinking": think})
        tokens = model.tokenize(formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special,
                                special=True)
        stops = [s for s in (formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]) if s]
        return tokens, stops, formatted.prompt

    def _transcript_tokens(self, messages: list[ChatMessage]) -> list[int]:
        return self._tokenize(messages, generation_prompt=False)[0]

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        return len(self._tokenize(messages)[0])

    def count_text_tokens(self, text: str) -> int:
        """Tokens of TEXT alone (no chat template); reads the vocabulary only when the model is not loaded."""
        self._vocab()
        model = self._model if self._model is not None else self._vocab_model
        if model is None:
            raise EngineError(f"no model file at {self.model_path} to count tokens with")
        return len(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def render_prompt(self, messages: list[ChatMessage], think: bool = False) -> str:
        """The prompt text the model sees, through its own chat template (for debugging)."""
        return self._tokenize(messages, think)[2]

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        return self._grammars.support(json_schema)

    def _vocab(self) -> Any:
        if self._model is not None:
            return self._model.vocab
        if self._vocab_model is None and self.model_path.is_file():
            try:
                self._vocab_model = load_vocabulary(self.model_path)
            except (ValueError, RuntimeError):  # a bad file is reported when it is loaded
                return None
        return self._vocab_model.vocab if self._vocab_model is not None else None

    def generate(self, request: GenerationRequest) -> Generation:
        self._ensure_loaded()
        tokens, stops, prompt_text = self._tokenize(request.messages, request.think)
        budget = request.think_budget if request.think else 0
        if len(tokens) + budget + request.max_tokens > self.n_ctx:
            thinking = f" plus the thinking budget ({budget})" if budget else ""
            raise EngineError(f"the prompt ({len(tokens)} tokens){thinking} plus max_tokens "
                              f"({request.max_tokens}) exceeds the context of {self.n_ctx}; raise --ctx")
        if self._decoder is not None:
            return self._decoder.run(self._batch_job(request, tokens, stops, prompt_text))
        with self._lock:
            if self._prefix is None:  # closed while this call waited: the server is shutting down
                raise EngineError("the model was unloaded while this call waited (the server is shutting down)")
            return self._generate(self._llama, request, tokens, stops, prompt_text)

    def _grammar(self, request: GenerationRequest) -> Any:
        if request.json_schema is None:
            return None
        return self._grammars.get(request.schema_key or json.dumps(request.json_schema, sort_keys=True),
                                  request.json_schema)

    def _batch_job(self, request: GenerationRequest, tokens: list[int], stops: list[str], prompt_text: str) -> Job:
        grammar = self._grammar(request)
        think_open = opening_tokens(prompt_text, self._encode) if request.think else None
        assert self._decoder is not None
        checkpoints = plan_checkpoints(request, tokens, self._transcript_tokens, self._decoder.recurrent)
        return Job(request, tokens, stops, None if grammar is None else grammar._grammar, checkpoints, self._codec,
                   think_open)

    def _generate(self, llama: Any, request: GenerationRequest, tokens: list[int], stops: list[str],
                  prompt_text: str) -> Generation:
        assert self._prefix is not None
        evaluated = self._prefix.prepare(request, tokens)
        if request.cancel.is_set():
            return Generation("", len(tokens), 0, "cancelled", evaluated)
        # The model state now holds all but the last prompt token: what follows evaluates just that one.
        answer_prompt, thought = tokens, None
        if request.think:
            thought = think(llama, tokens, prompt_text, stops, request, self._encode)
            if thought.cancelled:
                return Generation(text="", prompt_tokens=len(tokens), completion_tokens=thought.tokens,
                                  finish_reason="cancelled", evaluated_tokens=evaluated + 1,
                                  reasoning=thought.text, reasoning_tokens=thought.tokens)
            answer_prompt = thought.prompt
        grammar = self._grammar(request)
        offset = thought.tokens if thought else 0
        text, finish_reason, produced = self._decode(llama, answer_prompt, stops, grammar, request, offset)
        # A final chunk of llama-cpp-python's stream may carry only the finish reason.
        answer_tokens = produced if self.lazy_grammar else max(0, llama.n_tokens - len(answer_prompt)) or produced
        return Generation(text=text, prompt_tokens=len(tokens), completion_tokens=offset + answer_tokens,
                          finish_reason=finish_reason, evaluated_tokens=evaluated + 1,
                          reasoning=thought.text if thought else None, reasoning_tokens=offset)

    def _decode(self, llama: Any, prompt: list[int], stops: list[str], grammar: Any,
                request: GenerationRequest, offset: int) -> tuple[str, str, int]:
        """Stream one answer, reporting tokens and stopping between tokens when cancelled."""
        if self.lazy_grammar:
            decoded = decode(llama, prompt, stops, None if grammar is None else grammar._grammar, request, offset)
            return decoded.text, decoded.finish_reason, decoded.tokens
        stream = llama.create_completion(
            prompt=prompt, max_tokens=request.max_tokens, temperature=request.temperature,
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
                request.on_token(offset + produced)
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
            if request.cancel.is_set():
                finish_reason = "cancelled"
                break
        with contextlib.suppress(Exception):
            stream.close()  # stops decoding now when we broke out early
        return "".join(pieces), finish_reason, produced

    def _encode(self, text: str) -> list[int]:
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True))
