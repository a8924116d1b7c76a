"""Scenarios: named starting states of a spec file's world (an outage, a full disk, a locked account).

A spec's `world` has a description and seed data, the `default` scenario. Each entry of `world.scenarios`
adds a description of its own and changes the seed data as a JSON Merge Patch (RFC 7386): keys it sets
replace the default's, keys set to null are removed, everything else stays as the default has it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

DEFAULT_SCENARIO = "default"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str | None = None
    # A JSON Merge Patch over the default scenario's data (None: the default data as it is).
    data_patch: Any = None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: apply `patch` to `target`, returning a new value."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def parse_scenarios(raw: Any, where: str, problems: list[str]) -> dict[str, Scenario]:
    """`world.scenarios`: a mapping of name to {description, data}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping of scenario name to {{description, data}}")
        return {}
    scenarios = {}
    for name, body in raw.items():
        label = f"{where}/{name}"
        if not isinstance(name, str) or not _NAME.match(name) or name == DEFAULT_SCENARIO:
            problems.append(f"{label}: a scenario name is 1-128 letters, digits or . _ : @ - and not "
                            f"{DEFAULT_SCENARIO!r} (the world's own description and data)")
            continue
        if not isinstance(body, dict) or set(body) - {"description", "data"}:
            problems.append(f"{label}: must be a mapping with 'description' and/or 'data'")
            continue
        description = body.get("description")
        if description is not None and not isinstance(description, str):
            problems.append(f"{label}/description: must be text")
            continue
        try:
            json.dumps(body.get("data"))
        except (TypeError, ValueError):
            problems.append(f"{label}/data: must be JSON data")
            continue
        scenarios[name] = Scenario(name, description, body.get("data"))
    return scenarios


WORLD_FIELDS = {"description", "data", "scenarios", "default_scenario"}


def parse_world(raw: Any, source: str,
                 problems: list[str]) -> tuple[str | None, Any, dict[str, Scenario], str]:
    """`world`: text, or {description, data, scenarios, default_scenario}."""
    if raw is None or isinstance(raw, str):
        return raw, None, {}, DEFAULT_SCENARIO
    if not isinstance(raw, dict):
        problems.append(f"{source}#/world: must be text or a mapping with 'description' and 'data'")
        return None, None, {}, DEFAULT_SCENARIO
    unknown = set(raw) - WORLD_FIELDS
    if unknown:
        problems.append(f"{source}#/world: unknown field(s) {sorted(unknown)}; use {', '.join(sorted(WORLD_FIELDS))}")
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        problems.append(f"{source}#/world/description: must be text")
        description = None
    data = raw.get("data")
    try:
        json.dumps(data)
    except (TypeError, ValueError):
        problems.append(f"{source}#/world/data: must be JSON data (objects, arrays, strings, numbers)")
    scenarios = parse_scenarios(raw.get("scenarios"), f"{source}#/world/scenarios", problems)
    default = raw.get("default_scenario", DEFAULT_SCENARIO)
    if default != DEFAULT_SCENARIO and default not in scenarios:
        problems.append(f"{source}#/world/default_scenario: {default!r} is not one of world.scenarios")
        default = DEFAULT_SCENARIO
    return description, data, scenarios, default
