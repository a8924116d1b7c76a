"""Every shell block of the README runs as written (from a copy of the checkout, as a fresh clone would),
except blocks whose first line says `# not run by tests: WHY` (a server that runs until stopped, a
download, a GPU)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, subprocess_env

SKIP = "# not run by tests:"
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)


def shell_blocks() -> list[str]:
    return BLOCK.findall((REPO / "README.md").read_text())


def runnable() -> list[str]:
    return [block for block in shell_blocks() if not block.startswith(SKIP)]


def test_every_block_is_run_or_says_why_not() -> None:
    skipped = [block for block in shell_blocks() if block.startswith(SKIP)]
    assert all(block.splitlines()[0].removeprefix(SKIP).strip() for block in skipped)
    assert len(runnable()) >= 8 and "mcp-sim call" in "".join(runnable())


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout as a user has it after scripts/install.sh; files the commands write land here only."""
    root = tmp_path_factory.mktemp("clone")
    for entry in REPO.iterdir():
        if entry.name not in (".git", ".mypy_cache", ".ruff_cache", ".pytest_cache"):
            (root / entry.name).symlink_to(entry)
    return root


@pytest.mark.parametrize("index", range(len(runnable())))
def test_readme_block_runs_as_written(index: int, clone: Path, tmp_path: Path) -> None:
    block = runnable()[index]
    env = subprocess_env(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"),
                         HF_HUB_OFFLINE="1", PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"README block failed:\n{block}\nstdout:\n{done.stdout[-3000:]}\n" \
                                 f"stderr:\n{done.stderr[-3000:]}"
