"""A missing, corrupt or truncated model file fails fast with a message naming the path and the fix."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mcp_sim.base.errors import ModelFileError
from mcp_sim.engines.llama import LlamaEngine
from tests.conftest import SPECS, mcp_sim_command, subprocess_env


def truncated_copy(model_path: Path, tmp_path: Path, size: int) -> Path:
    target = tmp_path / "truncated.gguf"
    with model_path.open("rb") as source:
        target.write_bytes(source.read(size))
    return target


@pytest.mark.parametrize(("make", "expected"), [
    (lambda tmp, model: tmp / "absent.gguf", "does not exist"),
    (lambda tmp, model: tmp, "is not a file"),
    (lambda tmp, model: (tmp / "notes.gguf", (tmp / "notes.gguf").write_text("hello world, not a model"))[0],
     "is not a GGUF file"),
    (lambda tmp, model: (tmp / "tiny.gguf", (tmp / "tiny.gguf").write_bytes(b"GGUF"))[0], "is truncated"),
    (lambda tmp, model: truncated_copy(model, tmp, 2_000_000), "could not load the model"),
], ids=["missing", "directory", "not-gguf", "header-cut", "body-cut"])
def test_bad_model_files_fail_with_a_clear_message(tmp_path: Path, model_path: Path, make: object,
                                                   expected: str) -> None:
    path = make(tmp_path, model_path)  # type: ignore[operator]
    engine = LlamaEngine(path, n_ctx=512)
    with pytest.raises(ModelFileError) as caught:
        engine.load()
    assert expected in str(caught.value) and str(path) in str(caught.value)


def test_serve_fails_fast_at_startup_naming_the_model(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_text("definitely not gguf")
    completed = subprocess.run(mcp_sim_command("serve", str(SPECS), "--model", str(bogus)), env=subprocess_env(),
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert completed.returncode == 1
    assert f"Error: model file {bogus} is not a GGUF file" in completed.stderr
    assert "Traceback" not in completed.stderr and completed.stdout == ""
