"""`mcp-sim` as on a CI machine that holds no model: the bundled SmolLM2 cannot be found, and a model
that were somehow constructed could not load.

    python tests/no_model_mcp_sim.py serve SPEC --cache C.db --replay-only
"""

from __future__ import annotations

from typing import NoReturn

from mcp_sim.base.errors import ModelFileError


def absent(*args: object) -> NoReturn:
    raise ModelFileError("no model on this machine (tests/no_model_mcp_sim.py)")


def main() -> None:
    from mcp_sim.engines.llama import LlamaEngine
    from mcp_sim.models import bundled, hub

    bundled.default_model_path = absent  # type: ignore[assignment]
    hub.default_model_path = absent  # type: ignore[assignment]
    LlamaEngine.load = absent  # type: ignore[method-assign]
    LlamaEngine.generate = absent  # type: ignore[method-assign]

    from mcp_sim.cli import main as mcp_sim

    mcp_sim()


if __name__ == "__main__":
    main()
