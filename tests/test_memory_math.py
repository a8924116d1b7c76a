"""`doctor`'s memory math (issue 14): weights + N x KV at the context size + the saved-state budget."""

from __future__ import annotations

from mcp_sim.engines.llama.doctor import kv_cache_bytes, memory_estimate

GIB = 1024**3


def test_a_gpu_holds_one_copy_of_the_weights_per_instance_and_a_kv_cache_each() -> None:
    needed, detail = memory_estimate(weights=20 * GIB, kv=GIB, instances=2, state_cache=GIB, gpu=True)
    assert needed == int((2 * 20 + 2 * 1) * GIB * 1.1) + 2 * GIB
    assert "2 x weights 20.0 GiB + 2 x KV cache 1.00 GiB" in detail


def test_on_the_cpu_instances_share_the_mapped_weights() -> None:
    needed, detail = memory_estimate(weights=20 * GIB, kv=GIB, instances=2, state_cache=0, gpu=False)
    assert needed == int((20 + 2) * GIB * 1.1)
    assert detail.startswith("~24.2 GiB estimated = 1 x weights")


def test_a_hybrid_model_keeps_kv_only_for_its_full_attention_layers() -> None:
    hybrid = {"general.architecture": "qwen35moe", "qwen35moe.block_count": "40",
              "qwen35moe.attention.head_count": "16", "qwen35moe.attention.head_count_kv": "2",
              "qwen35moe.attention.key_length": "256", "qwen35moe.attention.value_length": "256",
              "qwen35moe.full_attention_interval": "4"}
    # 10 attention layers x 2 KV heads x (256 + 256) x 2 bytes = 20 KiB per token.
    assert kv_cache_bytes(hybrid, 32768) == 10 * 2 * 512 * 2 * 32768


def test_slots_hold_a_kv_cache_each_in_one_instance() -> None:
    # The 35B MoE on one GPU with 8 slots: one copy of the weights, 8 contexts' worth of KV.
    needed, detail = memory_estimate(weights=20 * GIB, kv=GIB // 2, instances=1, state_cache=0, gpu=True, slots=8)
    assert needed == int((20 + 8 * 0.5) * GIB * 1.1)
    assert "1 x weights 20.0 GiB + 8 x KV cache 0.50 GiB for the context (f16, per slot)" in detail
