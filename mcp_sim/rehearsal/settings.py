"""The rehearsal options of `serve` and `call` as one value, below the modules that act on them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RehearsalSettings:
    """The rehearsal options of `serve` and `call` (see cli/options.py)."""

    cache: Path | None = None  # --cache: answers stored and answered again (SQLite)
    replay_only: bool = False  # --replay-only: a call no source answers is a miss; the model never loads
    replay: list[Path] = field(default_factory=list)  # --replay: cassettes of real traces
    strict: bool = False  # --strict: only fixtures, cassettes and the cache answer
    faults: Path | None = None  # --faults: a fault rule file
    ledger: Path | None = None  # --ledger: calls that may change the world, appended
    model: str | None = None  # the --model argument: the cache records answers under it
