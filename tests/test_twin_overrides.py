"""The load fix without running a model: the defect read from GGUF headers, and manifests' overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_sim.base.errors import ModelFileError, RegistryError
from mcp_sim.engines.llama.gguf import read_header
from mcp_sim.engines.llama.overrides import layer_count_fix, plan_load
from mcp_sim.models.registry import load_manifest
from tests.twin import LAYERS, build_twin

MANIFEST = """
name = "twin"
repo = "someone/twin-GGUF"
architecture = "qwen35moe"
context_length = 65536
license = "apache-2.0"
prompt_style = "agentworld"
thinks = true
default_quant = "F32"
[sampling]
temperature = 0.6
top_p = 0.95
top_k = 20
[quants.F32]
file = "twin.gguf"
[metadata_overrides]
"""


def test_the_header_names_every_tensor_and_scalar(tmp_path: Path) -> None:
    header = read_header(build_twin(tmp_path / "twin.gguf"))
    assert header.architecture == "qwen35moe" and header.metadata["qwen35moe.block_count"] == LAYERS
    assert header.array_lengths["tokenizer.ggml.tokens"] == 333  # 256 bytes, 69 merged pieces, THOUGHT, 7 specials
    assert f"blk.{LAYERS - 1}.ffn_down_exps.weight" in header.tensors
    assert "blk.0.ssm_a" in header.tensors and "blk.3.attn_q.weight" in header.tensors  # 3 recurrent, 1 attention


def test_a_counted_prediction_layer_is_dropped_with_the_count(tmp_path: Path) -> None:
    path = build_twin(tmp_path / "mtp.gguf", off_by_one=True, extra=lambda w: w.add_nextn_predict_layers(1))
    fix = layer_count_fix(read_header(path))
    assert fix is not None and fix[0] == {"qwen35moe.block_count": LAYERS, "qwen35moe.nextn_predict_layers": 0}


def test_per_layer_arrays_sized_for_the_missing_layer_cannot_be_overridden(tmp_path: Path) -> None:
    pattern = [(i + 1) % 4 != 0 for i in range(LAYERS)] + [False]
    path = build_twin(tmp_path / "arrays.gguf", off_by_one=True,
                      extra=lambda w: w.add_array("qwen35moe.attention.recurrent_layers", pattern))
    with pytest.raises(ModelFileError, match=r"attention.recurrent_layers.*download a fixed file"):
        plan_load(path)


def test_a_manifest_carries_overrides_that_win_over_the_detected_ones(tmp_path: Path) -> None:
    manifest_path = tmp_path / "twin.toml"
    manifest_path.write_text(MANIFEST + '"qwen35moe.block_count" = 7\n"general.name" = "renamed"\n')
    manifest = load_manifest(manifest_path)
    assert manifest.metadata_overrides == {"qwen35moe.block_count": 7, "general.name": "renamed"}
    plan = plan_load(build_twin(tmp_path / "twin.gguf", off_by_one=True), manifest.metadata_overrides)
    assert plan.overrides == {"qwen35moe.block_count": 7, "general.name": "renamed"}
    assert len(plan.findings) == 2 and "manifest sets qwen35moe.block_count=7" in plan.findings[1]
    assert plan_load(build_twin(tmp_path / "good.gguf")).overrides == {}


def test_an_override_that_is_no_scalar_is_a_manifest_problem(tmp_path: Path) -> None:
    manifest_path = tmp_path / "twin.toml"
    manifest_path.write_text(MANIFEST + '"qwen35moe.block_count" = [40]\n')
    with pytest.raises(RegistryError, match=r"metadata_overrides.qwen35moe.block_count must be a boolean, number"):
        load_manifest(manifest_path)
