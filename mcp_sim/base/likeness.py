"""How alike two calls' arguments are: 1 - the Jaccard similarity of their leaf `path=value` pairs.

learn picks examples far apart with it; a text tool that lost its way answers in the shape of the
nearest example (core.echoes)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def features(arguments: Any, is_error: bool = False) -> set[str]:
    """The leaf `path=value` pairs of ARGUMENTS, and whether the call failed."""
    found = {f"error={bool(is_error)}"}
    stack: list[tuple[str, Any]] = [("", arguments)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}/{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}/[]", v) for v in value)
        else:
            found.add(f"{path}={json.dumps(value)}")
    return found


def distance(mine: set[str], others: Sequence[set[str]]) -> float:
    """Distance from the features MINE to the nearest of OTHERS (1.0 when there are none)."""
    return min((1 - len(mine & other) / len(mine | other) for other in others), default=1.0)
