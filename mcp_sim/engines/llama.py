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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_sim.engines.base import ChatMessage, Generation, GenerationRequest
from mcp_sim.errors import EngineError, ModelFileError
from mcp_sim.model_file import check_gguf_file, gguf_architecture
from mcp_sim.state_cache import Snapshot, StateCache, common_prefix

logger = logging.getLogger(__name__)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
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


@dataclass(frozen=True)
class _Thought:
    prompt: list[int]  # the prompt for the answer phase: ends with the closed think block
    text: str
    tokens: int
    cancelled: bool


def _load_vocabulary(path: Path) -> Any:
    """The model's vocabulary and metadata without its weights (llama.cpp's vocab_only load)."""
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    return LlamaModel(path_model=str(path), params=params, verbose=False)


def read_metadata(path: Path) -> dict[str, str]:
    """The GGUF's metadata as llama.cpp reads it, loading the vocabulary only (fast even for 20 GB files).

    Raises ModelFileError when this llama.cpp build cannot load the file, e.g. an unknown architecture."""
    check_gguf_file(path)
    try:
        model = _load_vocabulary(path)
    except (ValueError, RuntimeError) as exc:
        architecture = gguf_architecture(path) or "unknown"
        raise ModelFileError(f"this llama.cpp build cannot load {path} (architecture {architecture}): {exc}. "
                             "The file may be damaged, or its architecture newer than the build: upgrade "
                             "llama-cpp-python (see docs/MODELS.md)") from exc
    try:
        return dict(model.metadata())
    finally:
        model.close()


class LlamaEngine:
    """Runs one GGUF model with llama-cpp-python."""

    def __init__(self, model_path: str | Path, n_ctx: int = 4096, n_threads: int | None = None,
                 n_gpu_layers: int | None = None, seed: int = 0,
                 template_kwargs: dict[str, Any] | None = None, verbose: bool = False,
                 chat_template: str | None = None, state_cache_mb: int = 1024):
        self.model_path = Path(model_path)
        self.name = self.model_path.name
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_gpu_layers = n_gpu_layers
        self.seed = seed
        self.template_kwargs = template_kwargs or {}
        # Overrides the GGUF's own chat template (some files ship a broken or missing one).
        self.chat_template = chat_template
        self.verbose = verbose
        self._llama: Any = None
        self._formatter: Any = None
        self._transcript_formatter: Any = None
        # Recurrent and hybrid models (qwen35moe) cannot roll their state back to an earlier token.
        self._recurrent = False
        self.states = StateCache(state_cache_mb * 1024 * 1024)
        # The conversation whose state the model holds now (None: none, or a cache-less call).
        self._live_key: str | None = None
        self._grammars: dict[str, Any] = {}
        self._vocab_model: Any = None  # a vocabulary-only load, to check grammars before the model loads
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
        template = self.chat_template or llama.metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
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

    def _tokenize(self, messages: list[ChatMessage], think: bool = False,
                  generation_prompt: bool = True) -> tuple[list[int], list[str], str]:
        llama = self._ensure_loaded()
        formatter = self._formatter if generation_prompt else self._transcript_formatter
        # Templates that can think (Qwen3 and kin) read enable_thinking; the others ignore it.
        formatted = formatter(messages=[{"role": m.role, "content": m.content} for m in messages],
                              **{**self.template_kwargs, "enable_thinking": think})
        tokens = llama.tokenize(formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special,
                                special=True)
        stops = [s for s in (formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]) if s]
        return tokens, stops, formatted.prompt

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        with self._lock:
            return len(self._tokenize(messages)[0])

    def render_prompt(self, messages: list[ChatMessage], think: bool = False) -> str:
        """The prompt text the model sees, through its own chat template (for debugging)."""
        with self._lock:
            return self._tokenize(messages, think)[2]

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
            self._check_grammar(grammar._grammar)
            self._grammars[key] = grammar
        return grammar

    def _check_grammar(self, text: str) -> None:
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

    def _vocab(self) -> Any:
        if self._llama is not None:
            return self._llama._model.vocab
        if self._vocab_model is None and self.model_path.is_file():
            with contextlib.suppress(ValueError, RuntimeError):  # a bad file is reported when it is loaded
                self._vocab_model = _load_vocabulary(self.model_path)
        return self._vocab_model.vocab if self._vocab_model is not None else None

    def generate(self, request: GenerationRequest) -> Generation:
        with self._lock:
            return self._generate(request)

    def _generate(self, request: GenerationRequest) -> Generation:
        llama = self._ensure_loaded()
        tokens, stops, prompt_text = self._tokenize(request.messages, request.think)
        budget = request.think_budget if request.think else 0
        if len(tokens) + budget + request.max_tokens > self.n_ctx:
            thinking = f" plus the thinking budget ({budget})" if budget else ""
            raise EngineError(f"the prompt ({len(tokens)} tokens){thinking} plus max_tokens "
                              f"({request.max_tokens}) exceeds the context of {self.n_ctx}; raise --ctx")
        checkpoints = self._checkpoints(request, tokens)
        conversation = _conversation_key(request.cache_key)
        self._park_live_state(conversation)
        self._resume(tokens, [key for _, key in checkpoints] + ([conversation] if conversation else []))
        self._live_key = conversation
        evaluated = self._prefill(tokens, checkpoints, request.cancel)
        if request.cancel.is_set():
            return Generation("", len(tokens), 0, "cancelled", evaluated)
        # The model state now holds all but the last prompt token: what follows evaluates just that one.
        answer_prompt, thought = tokens, None
        if request.think:
            thought = self._think(llama, tokens, prompt_text, stops, request)
            if thought.cancelled:
                return Generation(text="", prompt_tokens=len(tokens), completion_tokens=thought.tokens,
                                  finish_reason="cancelled", evaluated_tokens=evaluated + 1,
                                  reasoning=thought.text, reasoning_tokens=thought.tokens)
            answer_prompt = thought.prompt
        grammar = None
        if request.json_schema is not None:
            grammar = self._grammar(request.schema_key or json.dumps(request.json_schema, sort_keys=True),
                                    request.json_schema)
        offset = thought.tokens if thought else 0
        text, finish_reason, produced = self._decode(llama, answer_prompt, stops, grammar, request, offset)
        # A final chunk may carry only the finish reason.
        answer_tokens = max(0, llama.n_tokens - len(answer_prompt)) or produced
        return Generation(text=text, prompt_tokens=len(tokens), completion_tokens=offset + answer_tokens,
                          finish_reason=finish_reason, evaluated_tokens=evaluated + 1,
                          reasoning=thought.text if thought else None, reasoning_tokens=offset)

    def _decode(self, llama: Any, prompt: list[int], stops: list[str], grammar: Any,
                request: GenerationRequest, offset: int) -> tuple[str, str, int]:
        """Stream one answer, reporting tokens and stopping between tokens when cancelled."""
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

    def _think(self, llama: Any, prompt: list[int], prompt_text: str, stops: list[str],
               request: GenerationRequest) -> _Thought:
        """Phase one of a thinking answer: free decoding inside <think> until the model closes it or the
        budget runs out. No grammar here, so the schema never forces JSON into the reasoning; the answer
        prompt that comes back ends with a closed think block, ready for the grammar-constrained phase."""
        import llama_cpp

        # Some templates open the block themselves when thinking is on; otherwise we do.
        opened = prompt_text.rstrip().endswith(THINK_OPEN)
        prefix = prompt + ([] if opened else self._encode(THINK_OPEN + "\n"))
        generated: list[int] = []
        closed = cancelled = False
        if request.think_budget > 0:
            if request.seed is not None:
                llama.set_seed(request.seed)
            tokens = llama.generate(prefix, top_k=request.top_k, top_p=request.top_p,
                                    temp=request.temperature, repeat_penalty=request.repeat_penalty)
            try:
                for token in tokens:
                    if llama_cpp.llama_vocab_is_eog(llama._model.vocab, token):
                        break  # the model ended its turn while thinking; the answer phase still follows
                    generated.append(token)
                    if request.on_token is not None:
                        request.on_token(len(generated))
                    # A tail window is enough to see the closing tag or a stop string appear.
                    tail = llama.detokenize(generated[-8:], special=True).decode("utf-8", errors="ignore")
                    if THINK_CLOSE in tail:
                        closed = True
                        break
                    if request.cancel.is_set():
                        cancelled = True
                        break
                    if any(stop in tail for stop in stops) or len(generated) >= request.think_budget:
                        break
            finally:
                tokens.close()
        text = llama.detokenize(generated, special=True).decode("utf-8", errors="replace")
        reasoning = text.split(THINK_CLOSE, 1)[0].strip()
        logger.debug("reasoning (%d tokens, %s): %s", len(generated), "closed" if closed else "budget or end",
                     reasoning)
        # Extending the evaluated tokens (never re-tokenizing them) keeps the cache valid, which matters
        # for recurrent models (qwen35moe) whose state cannot be rolled back to a shorter prefix.
        suffix = "\n\n" if closed else ("" if text.endswith("\n") else "\n") + THINK_CLOSE + "\n\n"
        return _Thought(prefix + generated + self._encode(suffix), reasoning, len(generated), cancelled)

    def _encode(self, text: str) -> list[int]:
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _checkpoints(self, request: GenerationRequest, tokens: list[int]) -> list[tuple[int, str]]:
        """Where to snapshot on the way through this prompt: the end of the system prompt, shared by every
        session of a spec; for recurrent models also the end of this conversation's finished turns."""
        messages = request.messages
        boundaries: list[tuple[int, str]] = []
        system_end = self._prefix_length(messages[:1], tokens)
        if system_end:
            boundaries.append((system_end, "system:" + _digest(tokens[:system_end])))
        # Attention models resume from the state parked after their last answer (see _park_live_state);
        # recurrent state can only resume from an exact prefix, which the end of the finished turns is.
        if self._recurrent and request.cache_key is not None and len(messages) > 2:
            history_end = self._prefix_length(messages[:-1], tokens)
            if history_end > system_end:
                boundaries.append((history_end, "turns:" + request.cache_key))
        return boundaries

    def _park_live_state(self, incoming: str | None) -> None:
        """Before another conversation takes the model, save the live one's state (its prompt and answer).

        Taken only on a switch, so a session calling alone pays nothing; its next prompt extends what it
        just generated, so it resumes with only the new call to read."""
        if self._live_key is None or self._live_key == incoming or self._recurrent or not self._llama.n_tokens:
            return
        self.states.put(self._live_key, self._snapshot())

    def _prefix_length(self, messages: list[ChatMessage], tokens: list[int]) -> int:
        """How many of `tokens` render `messages` as a finished transcript; 0 when the template renders
        that part differently inside the whole prompt (then there is no usable boundary there)."""
        prefix = self._tokenize(messages, generation_prompt=False)[0]
        if 0 < len(prefix) < len(tokens) - 1 and tokens[: len(prefix)] == prefix:
            return len(prefix)
        return 0

    def _resume(self, tokens: list[int], keys: list[str]) -> None:
        """Bring the model state to the longest prefix of `tokens` we can, live state or a snapshot, but
        never past the prompt's last token: the first answer token must be sampled from logits of this
        prompt's last token, evaluated now. A state covering the whole prompt (another session that began
        with the same call) would leave llama-cpp-python sampling from the logits of whatever that state
        evaluated last (issue 8)."""
        llama = self._llama
        target = tokens[:-1]
        current = llama._input_ids.tolist()
        shared = common_prefix(current, target)
        usable = shared if not self._recurrent or shared == len(current) else 0
        best = self.states.best(keys, target, exact=self._recurrent)
        if best is not None and best[2] > usable:
            _, snapshot, usable = best
            self._restore(snapshot)
        if llama.n_tokens > usable:
            if self._recurrent or not llama._ctx.kv_cache_seq_rm(-1, usable, -1):
                llama.reset()
                return
            self._set_evaluated(usable)

    def _set_evaluated(self, count: int) -> None:
        """Declare the first `count` input tokens evaluated. The logits in the context then belong to no
        token of the new prompt, so llama-cpp-python must not sample from them before evaluating one."""
        self._llama.n_tokens = count
        self._llama._requires_eval = True

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
        # The ctypes buffer is kept as it is: copying tens of MB into bytes (and back) doubled the cost.
        return Snapshot(tuple(self._llama._input_ids.tolist()), memoryview(buffer)[:written])

    def _restore(self, snapshot: Snapshot) -> None:
        import llama_cpp

        llama = self._llama
        size = snapshot.state.nbytes
        buffer = (ctypes.c_uint8 * size).from_buffer(snapshot.state.obj)  # shares the memory: no copy
        if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, buffer, size, 0) != size:
            logger.warning("could not restore a state snapshot; evaluating the prompt from the start")
            llama.reset()
            return
        count = len(snapshot.tokens)
        llama.input_ids[:count] = snapshot.tokens
        self._set_evaluated(count)


def _conversation_key(cache_key: str | None) -> str | None:
    return None if cache_key is None else "conversation:" + cache_key


def _digest(tokens: list[int]) -> str:
    return hashlib.sha256(array("i", tokens).tobytes()).hexdigest()[:16]


def default_threads() -> int | None:
    """llama.cpp's default is half the cores; on small machines every core helps."""
    cores = os.cpu_count() or 1
    return cores if cores <= 4 else None
