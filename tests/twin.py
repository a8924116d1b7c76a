"""A tiny twin of the reference model (Qwen-AgentWorld-35B-A3B, architecture qwen35moe), written by the tests.

Same architecture, tensor names, layer pattern and metadata keys as the published GGUF, at toy sizes with
random weights, so every code path the reference model takes in llama.cpp (Gated DeltaNet recurrent
layers, gated attention with interleaved multi-section RoPE, mixture-of-experts with a shared expert, the
hybrid memory) runs in the tests in seconds. Built with `gguf`, llama.cpp's own writer; never committed.

The shapes follow what the vendored llama.cpp (llama-cpp-python 0.3.36, src/models/qwen35moe.cpp) asks of
a qwen35moe file: attention layers project Q and its gate together (attn_q is twice the heads), recurrent
layers hold attn_qkv, attn_gate and ssm_*; `full_attention_interval` 4 makes three Gated DeltaNet layers
then one attention layer, as in the real 10 x (3 + 1).

The weights are random except for two planted preferences, so that behaviour (not text quality) can be
asserted on them:
- after the newline that opens a think block the greedy continuation is THOUGHT (a token of its own,
  which loses to JSON punctuation anywhere else) and then </think> (a bigram written into the embedding and output
  matrices), so a think budget of 2 or more ends by the model's own choice and a budget of 1 cuts it off;
- JSON's punctuation, then digits, and the end of turn are preferred wherever a grammar allows them (a
  constant embedding dimension read by their output rows), so schema-bound answers stay short instead of
  running to max_tokens on digits or spaces; which digit or enum value comes out is the random weights'
  choice, nudged by the context through the layers (kept small, so the preferences hold).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

ARCH = "qwen35moe"
LAYERS = 8  # two groups of 3 Gated DeltaNet + 1 gated attention
EMBED = 64
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
ROPE_DIMS, ROPE_SECTIONS = 8, [2, 1, 1, 0]  # the real file: 64 of 256 dims, sections [11, 11, 10, 0]
EXPERTS, EXPERTS_USED, EXPERT_FF, SHARED_FF = 8, 2, 32, 32
SSM_CONV, SSM_STATE, SSM_GROUPS, SSM_V_HEADS = 4, 16, 2, 4  # key heads 2, value heads 4, head dim 16
CONTEXT = 65536

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # control tokens, as in Qwen's tokenizer
USER_DEFINED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]  # plain added tokens in Qwen's
THOUGHT = "hmm"  # what the twin thinks (one token), greedily, before it closes the block itself
PREFERRED = {"<|im_end|>": 4.0, "{": 3.0, "}": 3.0, "[": 3.0, "]": 3.0, '"': 3.0, ",": 3.0,
             **dict.fromkeys("0123456789", 2.0)}  # a number is one digit, never negative

# Qwen3.5's chat template, reduced to what mcp-sim renders: plain system/user/assistant turns, earlier
# reasoning dropped, and a think block opened (thinking on) or left empty (enable_thinking false).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- set content = message['content'] %}"
    "{%- if message['role'] == 'assistant' and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}"
)

# Text the byte-level merges are learned from, so prompts take fewer tokens than one per byte.
_CORPUS = (
    'You are a Tool World Model, a virtual environment simulator that faithfully simulates the execution of '
    'tool calls. {"name": "get_weather", "arguments": {"city": "Lisbon"}} {"type": "object", "properties": '
    '{"temperature": {"type": "number"}, "description": "string"}, "required": ["city"]} the tool returns the '
    'result of the call as JSON; predict the exact response of the tool, following its output schema. '
    'Error calling tool: validation errors for call. ### Turn **Action:** **Environment Observation:** '
)


def _byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode table: the 256 byte tokens of a byte-level BPE vocabulary."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    table = dict(zip(printable, codes, strict=True))
    return [chr(table[byte]) for byte in range(256)]


def _learn_merges(count: int) -> list[tuple[str, str]]:
    """A few BPE merges over the corpus's words (spaces joined to the following word, as GPT-2 does);
    newlines are never merged, so a think block's opening newline stays one token."""
    symbols = _byte_symbols()
    words = Counter(tuple(symbols[b] for b in (" " + w if i else w).encode()) for i, w in
                    enumerate(_CORPUS.split(" ")) if w)
    merges: list[tuple[str, str]] = []
    for _ in range(count):
        pairs: Counter[tuple[str, str]] = Counter()
        for word, n in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        if pairs[best] < 2:
            break
        merges.append(best)
        joined = best[0] + best[1]
        updated: Counter[tuple[str, ...]] = Counter()
        for word, n in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            updated[tuple(out)] += n
        words = updated
    return merges


def _vocabulary() -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges): bytes, merged pieces, then the special tokens."""
    tokens = _byte_symbols()
    merges = _learn_merges(200)
    tokens += [a + b for a, b in merges] + [THOUGHT]  # no merge makes THOUGHT: only the model writes it
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    tokens += SPECIALS + USER_DEFINED
    types += [int(gguf.TokenType.CONTROL)] * len(SPECIALS) + [int(gguf.TokenType.USER_DEFINED)] * len(USER_DEFINED)
    return tokens, types, [f"{a} {b}" for a, b in merges]


def _name(tensor: gguf.MODEL_TENSOR, layer: int | None = None, suffix: str = ".weight") -> str:
    return gguf.TENSOR_NAMES[tensor].format(bid=layer) + suffix


def is_recurrent_layer(layer: int) -> bool:
    return (layer + 1) % 4 != 0


def build_twin(path: Path, *, off_by_one: bool = False, seed: int = 0,
               extra: Callable[[gguf.GGUFWriter], None] | None = None) -> Path:
    """Write the twin to `path`. off_by_one: declare one block more than the file holds, as the published
    Qwen-AgentWorld GGUF does (block_count 41 for 40 layers; llama.cpp: missing tensor 'blk.40...').
    `extra` may add metadata (other shapes of the defect)."""
    rng = np.random.default_rng(seed)
    tokens, types, merges = _vocabulary()
    vocab = len(tokens)
    T = gguf.MODEL_TENSOR

    def rand(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def out(*shape: int) -> np.ndarray:
        """A projection back into the residual stream: small, so the planted preferences hold whatever the
        layers compute (which still shifts the choice among tokens the preferences leave equal)."""
        return rand(*shape, scale=0.01)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    writer = gguf.GGUFWriter(str(path), ARCH)
    writer.add_name("Qwen-AgentWorld twin (random weights)")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(LAYERS + 1 if off_by_one else LAYERS)
    writer.add_feed_forward_length(EXPERT_FF)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(10_000_000.0)
    writer.add_rope_dimension_count(ROPE_DIMS)
    writer.add_rope_dimension_sections(ROPE_SECTIONS)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_expert_count(EXPERTS)
    writer.add_expert_used_count(EXPERTS_USED)
    writer.add_expert_feed_forward_length(EXPERT_FF)
    writer.add_expert_shared_feed_forward_length(SHARED_FF)
    writer.add_ssm_conv_kernel(SSM_CONV)
    writer.add_ssm_state_size(SSM_STATE)
    writer.add_ssm_group_count(SSM_GROUPS)
    writer.add_ssm_time_step_rank(SSM_V_HEADS)
    writer.add_ssm_inner_size(SSM_STATE * SSM_V_HEADS)
    writer.add_full_attention_interval(4)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    if extra is not None:
        extra(writer)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen35")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    # The planted thinking path: each chain token owns one embedding dimension, and the output row of its
    # successor reads that dimension strongly, so the greedy successor of "\n" is THOUGHT[0], and so on.
    embedding = rand(vocab, EMBED)
    output = rand(vocab, EMBED)
    symbols = _byte_symbols()
    newline, thought, close = tokens.index(symbols[ord("\n")]), tokens.index(THOUGHT), tokens.index("</think>")
    embedding[newline, 0] = embedding[thought, 1] = 1.0
    output[thought, 0] = 12.0
    output[close, 1] = 8.0
    embedding[:, -1] = 1.0
    for piece, weight in PREFERRED.items():
        token = tokens.index(piece) if piece in tokens else tokens.index(symbols[ord(piece)])
        output[token, -1] = weight
    writer.add_tensor(_name(T.TOKEN_EMBD), embedding)
    writer.add_tensor(_name(T.OUTPUT_NORM), ones(EMBED))
    writer.add_tensor(_name(T.OUTPUT), output)

    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    key_dim, value_dim = SSM_STATE * SSM_GROUPS, SSM_STATE * SSM_V_HEADS
    for layer in range(LAYERS):
        # numpy shapes are llama.cpp's dimensions reversed: {n_embd, n_out} is (n_out, n_embd).
        tensors = {_name(T.ATTN_NORM, layer): ones(EMBED), _name(T.ATTN_POST_NORM, layer): ones(EMBED)}
        if is_recurrent_layer(layer):
            tensors |= {
                _name(T.ATTN_QKV, layer): rand(key_dim * 2 + value_dim, EMBED),
                _name(T.ATTN_GATE, layer): rand(value_dim, EMBED),
                _name(T.SSM_CONV1D, layer): rand(key_dim * 2 + value_dim, SSM_CONV, scale=0.3),
                _name(T.SSM_DT, layer, ".bias"): rand(SSM_V_HEADS, scale=0.5),
                _name(T.SSM_A, layer, ""): -np.exp(rand(SSM_V_HEADS, scale=0.5)),
                _name(T.SSM_BETA, layer): rand(SSM_V_HEADS, EMBED),
                _name(T.SSM_ALPHA, layer): rand(SSM_V_HEADS, EMBED),
                _name(T.SSM_NORM, layer): ones(SSM_STATE),
                _name(T.SSM_OUT, layer): out(EMBED, value_dim),
            }
        else:
            tensors |= {
                _name(T.ATTN_Q, layer): rand(q_dim * 2, EMBED),  # queries and their output gate together
                _name(T.ATTN_K, layer): rand(kv_dim, EMBED),
                _name(T.ATTN_V, layer): rand(kv_dim, EMBED),
                _name(T.ATTN_OUT, layer): out(EMBED, q_dim),
                _name(T.ATTN_Q_NORM, layer): ones(HEAD_DIM),
                _name(T.ATTN_K_NORM, layer): ones(HEAD_DIM),
            }
        tensors |= {
            _name(T.FFN_GATE_INP, layer): rand(EXPERTS, EMBED),
            _name(T.FFN_GATE_EXP, layer): rand(EXPERTS, EXPERT_FF, EMBED),
            _name(T.FFN_UP_EXP, layer): rand(EXPERTS, EXPERT_FF, EMBED),
            _name(T.FFN_DOWN_EXP, layer): out(EXPERTS, EMBED, EXPERT_FF),
            _name(T.FFN_GATE_INP_SHEXP, layer): rand(EMBED),
            _name(T.FFN_GATE_SHEXP, layer): rand(SHARED_FF, EMBED),
            _name(T.FFN_UP_SHEXP, layer): rand(SHARED_FF, EMBED),
            _name(T.FFN_DOWN_SHEXP, layer): out(EMBED, SHARED_FF),
        }
        for name, data in tensors.items():
            writer.add_tensor(name, data)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
