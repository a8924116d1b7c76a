"""`doctor`'s memory math (issues 14 and 23): weights, KV cache and recurrent state per sequence, attention and
logits buffers, llama.cpp's runtime and the saved-state budget. The arithmetic only; tests/test_twin_memory.py
checks the sum against a measured process."""

from __future__ import annotations

from mcp_sim.engines.llama.doctor import (
    KV_CELL_BYTES,
    RUNTIME_OVERHEAD,
    ModelMemory,
    attention_bytes,
    kv_cache_bytes,
    memory_estimate,
    recurrent_state_bytes,
)

GIB = 1024**3
MIB = 1024**2
BATCH = 512  # mcp-sim's batch (BATCH_TOKENS)

# Shapes like the reference model's (qwen35moe, 35B-A3B): 40 layers, one full-attention layer in 4 with 16
# query and 2 KV heads of 256 dimensions; Gated DeltaNet layers with 16 key and 32 value heads of 128.
QWEN35MOE = {"general.architecture": "qwen35moe", "qwen35moe.block_count": "40",
             "qwen35moe.attention.head_count": "16", "qwen35moe.attention.head_count_kv": "2",
             "qwen35moe.attention.key_length": "256", "qwen35moe.attention.value_length": "256",
             "qwen35moe.full_attention_interval": "4", "qwen35moe.ssm.conv_kernel": "4",
             "qwen35moe.ssm.state_size": "128", "qwen35moe.ssm.inner_size": "4096", "qwen35moe.ssm.group_count": "16"}
KV_PER_TOKEN = 10 * 2 * 512 * 2  # 10 attention layers x 2 KV heads x (256 + 256) x 2 bytes = 20 KiB
RECURRENT = 30 * (3 * (4096 + 2 * 16 * 128) + 128 * 4096) * 4  # 30 layers: convolution window + state, f32
VOCABULARY = 248_320


def model(weights: int = 20 * GIB, kv_per_token: int = KV_PER_TOKEN, recurrent: int = RECURRENT,
          heads: int = 16) -> ModelMemory:
    return ModelMemory(weights=weights, kv_per_token=kv_per_token, recurrent_state=recurrent, query_heads=heads,
                       vocabulary=VOCABULARY)


def test_a_hybrid_model_keeps_kv_only_for_its_full_attention_layers() -> None:
    assert kv_cache_bytes(QWEN35MOE, 32768) == KV_PER_TOKEN * 32768  # 640 MiB


def test_the_recurrent_state_is_what_llama_cpp_sizes_per_sequence() -> None:
    assert recurrent_state_bytes(QWEN35MOE) == RECURRENT  # ~63 MiB a sequence, whatever the context
    # The twin (tests/twin.py): 6 recurrent layers x (3 x (64 + 2 x 2 x 16) + 16 x 64) x 4 bytes, llama.cpp's
    # "RS buffer size = 0.03 MiB".
    twin = {"general.architecture": "qwen35moe", "qwen35moe.block_count": "8", "qwen35moe.full_attention_interval": "4",
            "qwen35moe.ssm.conv_kernel": "4", "qwen35moe.ssm.state_size": "16", "qwen35moe.ssm.inner_size": "64",
            "qwen35moe.ssm.group_count": "2"}
    assert recurrent_state_bytes(twin) == 33792
    assert recurrent_state_bytes({"general.architecture": "llama", "llama.block_count": "30"}) == 0


def test_attention_without_flash_attention_holds_the_scores_of_a_batch() -> None:
    # f32 scores, their f16 copy and the f32 mask of a 512-token batch over 32768 tokens, 16 query heads.
    assert attention_bytes(32768, 16, flash_attn=False) == 32768 * BATCH * (16 * (4 + 2) + 4)
    assert 32768 * BATCH * 16 * 4 == GIB  # the scores alone
    # Flash attention keeps only its f16 mask.
    assert attention_bytes(32768, 16, flash_attn=True) == 32768 * BATCH * 2 == 32 * MIB


def test_on_the_cpu_instances_share_the_mapped_weights_and_hold_the_rest_each() -> None:
    needed, detail = memory_estimate(model(), 32768, instances=2, slots=1, state_cache=0, gpu=False,
                                     flash_attn=True)
    kv = (KV_PER_TOKEN + KV_CELL_BYTES) * 32768
    per_instance = 32 * MIB + VOCABULARY * 4 + RUNTIME_OVERHEAD  # one row of logits: the CPU writes no more
    assert needed == 20 * GIB + 2 * (kv + RECURRENT) + 2 * per_instance
    assert detail.startswith("~21.51 GiB estimated = 1 x weights 20.00 GiB + 2 x KV cache 0.63 GiB")


def test_a_gpu_holds_one_copy_of_the_weights_per_instance_and_a_batch_of_logits() -> None:
    needed, detail = memory_estimate(model(), 32768, instances=2, slots=1, state_cache=GIB, gpu=True,
                                     flash_attn=False)
    kv = (KV_PER_TOKEN + KV_CELL_BYTES) * 32768
    per_instance = attention_bytes(32768, 16, False) + VOCABULARY * 4 * BATCH + RUNTIME_OVERHEAD + GIB
    assert needed == 2 * 20 * GIB + 2 * (kv + RECURRENT) + 2 * per_instance
    assert "2 x weights 20.00 GiB + 2 x KV cache 0.63 GiB" in detail
    assert "2 x attention buffers 1.56 GiB (a 512-token batch over 32768 tokens, no flash attention" in detail
    assert "2 x logits 0.47 GiB (248320-token vocabulary x 512 rows" in detail
    assert "2 x state cache up to 1.00 GiB (--state-cache-mb)" in detail


def test_slots_hold_a_kv_cache_and_a_recurrent_state_each_in_one_instance() -> None:
    # The 35B MoE on one GPU with 8 slots: one copy of the weights, 8 sequences' KV and state, one compute buffer.
    needed, detail = memory_estimate(model(), 16384, instances=1, slots=8, state_cache=0, gpu=True,
                                     flash_attn=True)
    kv = (KV_PER_TOKEN + KV_CELL_BYTES) * 16384
    assert needed == 20 * GIB + 8 * (kv + RECURRENT) + 16384 * BATCH * 2 + VOCABULARY * 4 * BATCH + RUNTIME_OVERHEAD
    assert ("1 x weights 20.00 GiB + 8 x KV cache 0.31 GiB for the context (f16 and 144 bytes of bookkeeping a "
            "cell, per slot) + 8 x recurrent state 62.8 MiB (per slot)") in detail


def test_a_model_without_recurrent_layers_prints_no_state_term() -> None:
    _, detail = memory_estimate(model(weights=GIB, recurrent=0), 8192, instances=1, slots=1, state_cache=0,
                                gpu=False, flash_attn=False)
    assert "recurrent" not in detail
    assert "llama.cpp runtime" in detail
