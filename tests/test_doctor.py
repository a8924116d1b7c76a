"""`mcp-sim doctor` on this machine: what it reports, and when it says serving is blocked."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import llama_cpp
import pytest
from click.testing import CliRunner

from mcp_sim.cli import cli
from mcp_sim.engines.llama.doctor import backend_name, kv_cache_bytes
from tests.conftest import mcp_sim_command, subprocess_env


def doctor(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["doctor", *args])
    return result.exit_code, result.output


def test_doctor_reports_this_build_and_the_default_model(model_path: Path) -> None:
    code, output = doctor()
    assert code == 0, output
    expected_backend = "CPU" if not llama_cpp.llama_supports_gpu_offload() else ""
    assert f"backend {expected_backend}" in output
    if expected_backend == "CPU":  # this machine: no GPU, and the build says so
        assert "GPU offload not supported by this build" in output
    assert f"model: {model_path.name} (smollm2-135m:Q4_1)" in output
    assert "architecture: llama" in output
    # SmolLM2 at 8192 tokens: 30 layers x 3 KV heads x (64 + 64) x 2 bytes per token.
    assert "KV cache 0.18 GiB" in output
    assert output.rstrip().endswith("Ready to serve.")


def test_doctor_as_a_command_exits_zero() -> None:
    done = subprocess.run(mcp_sim_command("doctor", "--ctx", "4096"), env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "Ready to serve."
    checks = dict(line.split(": ", 1) for line in lines[:-1])
    assert all(check.startswith(("[ ok ]", "[warn]")) for check in checks), checks
    assert checks["[ ok ] context"] == "4096 tokens (trained for 8192)"
    assert checks["[ ok ] model"].startswith("SmolLM2-135M-Instruct.Q4_1.gguf (smollm2-135m:Q4_1)")
    assert {"python", "llama.cpp", "architecture", "memory"} <= {key.split("] ")[1] for key in checks}


def test_missing_model_blocks_serving_and_names_the_pull_command(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, output = doctor("--model", "qwen-agentworld-35b-a3b:Q4_K_M")
    assert code == 1
    assert "[FAIL] model:" in output and "mcp-sim models pull qwen-agentworld-35b-a3b" in output
    assert "Something above blocks serving." in output


def test_broken_files_and_impossible_budgets_block_serving(tmp_path: Path, model_path: Path) -> None:
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"PK\x03\x04" + bytes(40))
    code, output = doctor("--model", str(not_gguf))
    assert code == 1 and "is not a GGUF file" in output
    unknown = tmp_path / "future.gguf"
    header = struct.pack("<4sIQQ", b"GGUF", 3, 1, 1)
    unknown.write_bytes(header + _string_kv("general.architecture", "zorblax"))
    code, output = doctor("--model", str(unknown))
    assert code == 1 and "[FAIL] architecture" in output and "architecture zorblax" in output
    code, output = doctor("--model", str(model_path), "--think", "--think-budget", "4096", "--ctx", "2048")
    assert code == 1 and "[FAIL] context" in output and "--think-budget" in output


def test_kv_cache_estimate_counts_only_attention_layers_of_hybrid_models() -> None:
    dense = {"general.architecture": "llama", "llama.block_count": "30", "llama.attention.head_count": "9",
             "llama.attention.head_count_kv": "3", "llama.embedding_length": "576"}
    assert kv_cache_bytes(dense, 8192) == 30 * 8192 * 3 * (64 + 64) * 2
    hybrid = {"general.architecture": "qwen35moe", "qwen35moe.block_count": "40",
              "qwen35moe.attention.head_count": "16", "qwen35moe.attention.head_count_kv": "2",
              "qwen35moe.attention.key_length": "256", "qwen35moe.attention.value_length": "256",
              "qwen35moe.embedding_length": "2048", "qwen35moe.full_attention_interval": "4"}
    assert kv_cache_bytes(hybrid, 32768) == 10 * 32768 * 2 * 512 * 2
    assert kv_cache_bytes({"general.architecture": "odd"}, 1024) is None


def test_backend_names_come_from_the_build_info() -> None:
    assert backend_name("CPU : SSE3 = 1 | AVX2 = 1 |", False) == "CPU"
    assert backend_name("CUDA : ARCHS = 890 | USE_GRAPHS = 1 | CPU : AVX2 = 1", True) == "CUDA"
    assert backend_name("Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1", True) == "Metal"


def _string_kv(key: str, value: str) -> bytes:
    return (struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", 8)
            + struct.pack("<Q", len(value)) + value.encode())
