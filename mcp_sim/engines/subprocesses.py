"""Starting a module of this package in a child Python process (the model process, doctor's probe), so that
the child imports the same mcp_sim as its parent, installed or not."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The folder that holds the mcp_sim package.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def module_command(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def child_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(part for part in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if part)
    return env
