"""The local engine: a GGUF model run in-process by llama.cpp (CPU, CUDA or Metal).

Only this package imports llama_cpp. The model is loaded on first use (or by `load()`), once. One decoder
thread owns its context and decodes up to `slots` calls together (batch.py); with one slot, calls take turns.
A call is a job (batch_job.py, the only place that samples); slots.py picks a call's slot and where its prompt
resumes, prefix.py plans which snapshots it resumes from and takes, kv.py moves sequences in and out of the
context. The others: loading.py (model and context), grammar.py (schemas to checked grammars), sampling.py
(the sampler chain, lazy grammar checks), thinking.py (the reasoning block), state_cache.py (snapshots kept in
memory), prompt_store.py (system prompts' snapshots kept on disk across restarts), gguf.py (file checks,
metadata), build.py (what the build can do), overrides.py (metadata fixes).
"""

from __future__ import annotations

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
from mcp_sim.engines.llama.build import build_info, cpu_repack, default_threads, gpu_offload_supported
from mcp_sim.engines.llama.forced import ForcedSpans
from mcp_sim.engines.llama.gguf import check_gguf_file, load_vocabulary, read_metadata
from mcp_sim.engines.llama.grammar import GrammarCache
from mcp_sim.engines.llama.kv import memory_can_shift
from mcp_sim.engines.llama.loading import is_recurrent, open_context, warm_system_prompt
from mcp_sim.engines.llama.overrides import OverrideValue, plan_load
from mcp_sim.engines.llama.prefix import plan_checkpoints, system_key
from mcp_sim.engines.llama.prompt_store import PromptStore
from mcp_sim.engines.llama.sampling import LazyGrammarSampler
from mcp_sim.engines.llama.state_cache import StateCache
from mcp_sim.engines.llama.thinking import opening_tokens

__all__ = ["LlamaEngine", "build_info", "default_threads", "gpu_offload_supported", "plan_load", "read_metadata"]

logger = logging.getLogger(__name__)

# What llama-cpp-python's Llama makes of seed 0 (its random seed): followed, so a seed means what it means there.
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
                 lazy_grammar: bool = defaults.LAZY_GRAMMAR, jump_forward: bool = defaults.JUMP_FORWARD,
                 slots: int = defaults.SLOTS, cpu_repack: str = defaults.CPU_REPACK,
                 metadata_overrides: dict[str, OverrideValue] | None = None,
                 prompt_cache_dir: str | Path | None = None, prompt_cache_mb: int = defaults.PROMPT_CACHE_MB):
        self.model_path = Path(model_path)
        self.name = self.model_path.name
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()  # one count for prompt and generation
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
        # Feed what the grammar forces (keys, punctuation, pinned values) in one batch, in json.dumps's layout.
        self.jump_forward = jump_forward
        # auto, on or off: whether llama.cpp may repack the weights for its CPU kernels (build.repack_choice).
        self.cpu_repack = cpu_repack
        # Calls decoded together in one context (continuous batching, batch.py); 1: one call at a time.
        self.slots = max(1, slots)
        # llama.cpp metadata overrides from the model's manifest; load() adds what the file's defects call for.
        self.metadata_overrides = metadata_overrides or {}
        self.states = StateCache(state_cache_mb * 1024 * 1024)
        # System prompts' states kept on disk across restarts (prompt_store.py); None: read them every start.
        self.prompt_store = (PromptStore(Path(prompt_cache_dir), prompt_cache_mb * 1024 * 1024, self._state_identity())
                             if prompt_cache_dir is not None and prompt_cache_mb > 0 else None)
        self._model: Any = None  # the loaded llama_cpp LlamaModel; set last, when ready
        self._context: Any = None  # its LlamaContext, of `slots` sequences
        self._decoder: BatchDecoder | None = None
        self._codec: Codec | None = None
        self._formatter: Any = None
        self._transcript_formatter: Any = None
        self._grammars = GrammarCache(self._vocab)
        self._vocab_model: Any = None  # a vocabulary-only load, to check grammars before the model loads
        # Tokenizing only needs the model loaded, so counting tokens never waits behind a call's decoding.
        self._load_lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self.slots  # the decoder's sequences; with one slot, calls take turns

    @property
    def context_size(self) -> int:
        return self.n_ctx

    def identity(self) -> EngineIdentity:
        return EngineIdentity(model_file=self.model_path)  # the file's content, whatever it is called

    def _state_identity(self) -> str:
        """What a saved model state depends on besides its tokens: the model file (its content, as far as
        size and time tell), the llama.cpp build, its metadata overrides, and the settings that shape the
        state (a V cache is laid out differently with flash attention; a state must fit the context)."""
        from importlib.metadata import version

        stat = self.model_path.stat() if self.model_path.exists() else None
        return json.dumps({"model": str(self.model_path.resolve()), "size": stat.st_size if stat else None,
                           "mtime_ns": stat.st_mtime_ns if stat else None,
                           "llama_cpp_python": version("llama-cpp-python"), "n_ctx": self.n_ctx,
                           "flash_attn": self.flash_attn, "overrides": self.metadata_overrides},
                          sort_keys=True, default=str)

    def load(self) -> None:
        """Load the model now (servers do this at startup so a bad file fails fast)."""
        self._ensure_loaded()

    def check(self) -> None:
        """Fail now, naming the file, when the model is missing, corrupt or of an architecture this build
        cannot load: reads its header and vocabulary only, so it is fast even for a 20 GB file."""
        read_metadata(self.model_path)

    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        """Load the model and evaluate the system message of each prompt, keeping a snapshot of each: the
        first call of every spec then costs no more than a later one. Calls wait while a prompt is read. With
        a prompt store, a prompt read by an earlier process is loaded instead, and a new one is saved."""
        self._ensure_loaded()
        for messages in prompts:
            tokens = self._transcript_tokens(messages[:1])
            key = system_key(tokens)
            decoder, codec = self._decoder, self._codec
            if len(tokens) <= 1 or decoder is None or codec is None or key in decoder.states:
                continue
            store = self.prompt_store
            saved = store.get(tokens) if store is not None else None
            if store is not None and saved is not None:
                decoder.states.put(key, saved)
                logger.info("system prompt of %d tokens loaded from %s", len(tokens), store.folder)
                continue
            warm_system_prompt(decoder, tokens, key, codec)
            read = decoder.states.get(key)
            if store is not None and read is not None:
                store.put(tokens, read)

    def forget(self) -> None:
        """Drop every evaluated state the slots hold (not the snapshots): the next call reads its prompt from
        the start or from a snapshot, as a cold engine would. For tests and benchmarks."""
        if self._decoder is not None:
            self._decoder.forget()

    def close(self) -> None:
        """Free the model and its context."""
        with self._load_lock:
            if self._decoder is not None:
                self._decoder.close()
            for handle in (self._context, self._model, self._vocab_model):
                if handle is not None:
                    handle.close()
            self._vocab_model = self._model = self._decoder = self._context = self._codec = None

    def _ensure_loaded(self) -> Any:
        if self._model is not None:
            return self._model
        with self._load_lock:
            if self._model is None:
                self._load()
        return self._model

    def _load(self) -> None:
        check_gguf_file(self.model_path)
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        gpu_layers = self.n_gpu_layers
        if gpu_layers is None:
            gpu_layers = -1 if gpu_offload_supported() else 0
        plan = plan_load(self.model_path, self.metadata_overrides)
        if plan.findings:
            logger.warning("loading %s with metadata overrides: %s", self.model_path.name, "; ".join(plan.findings))
        started = time.perf_counter()
        try:
            model = self._open(gpu_layers, plan.overrides)
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
        self._model = model  # last: other threads take a set _model as a model ready to use

    def _open(self, gpu_layers: int, overrides: dict[str, OverrideValue]) -> Any:
        """The model, one context of `slots` sequences (each with room for n_ctx tokens) and its decoder."""
        repack = cpu_repack(self.cpu_repack)
        logger.info("CPU weight repacking %s", repack.reason)
        model, context = open_context(self.model_path, self.n_ctx, self.slots, self.n_threads, gpu_layers,
                                      self.flash_attn, self.verbose, overrides, extra_bufts=repack.use_extra_bufts)
        self._context = context
        recurrent = is_recurrent(model)
        self._decoder = BatchDecoder(context, model.vocab, self.slots, self.states, recurrent,
                                     self.context_shift and not recurrent and memory_can_shift(context.ctx))
        spans = ForcedSpans(model.vocab, lambda text: list(model.tokenize(text.encode("utf-8"), add_bos=False,
                                                                          special=False)),
                            lambda tokens: model.detokenize(tokens, special=False))
        self._codec = Codec(detokenize=lambda tokens, special: model.detokenize(tokens, special=special),
                            encode=lambda text: list(model.tokenize(text.encode("utf-8"), add_bos=False,
                                                                    special=True)),
                            # Read when each job starts, so a changed lazy_grammar or jump_forward holds from
                            # the next call.
                            sampler=lambda request, grammar: LazyGrammarSampler(
                                context.ctx, model.vocab, request, grammar, self.seed or LLAMA_DEFAULT_SEED,
                                lazy=self.lazy_grammar, spans=spans if self.jump_forward else None))
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
        decoder, codec = self._decoder, self._codec
        if decoder is None or codec is None:  # closed while this call was prepared: the server is shutting down
            raise EngineError("the model was unloaded before this call was decoded (the server is shutting down)")
        return decoder.run(self._job(request, tokens, stops, prompt_text, decoder, codec))

    def _grammar(self, request: GenerationRequest) -> str | None:
        if request.json_schema is None:
            return None
        return self._grammars.get(request.schema_key or json.dumps(request.json_schema, sort_keys=True),
                                  request.json_schema, fixed_layout=self.jump_forward)

    def _job(self, request: GenerationRequest, tokens: list[int], stops: list[str], prompt_text: str,
             decoder: BatchDecoder, codec: Codec) -> Job:
        grammar = self._grammar(request)
        think_open = opening_tokens(prompt_text, codec.encode) if request.think else None
        checkpoints = plan_checkpoints(request, tokens, self._transcript_tokens, decoder.recurrent)
        return Job(request, tokens, stops, grammar, checkpoints, codec, think_open)
