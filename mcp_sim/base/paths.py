"""Where mcp-sim keeps what it caches for the user, read from the environment at call time."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """The user's cache folder: $XDG_CACHE_HOME, else ~/.cache."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg).expanduser() if xdg else Path.home() / ".cache"
