"""`mcp-sim doctor`: what would run, on what, and whether anything blocks serving. The checks past Python's are
the engine kind's own (mcp_sim/engines/registry.py)."""

from __future__ import annotations

import platform
import sys

from mcp_sim.core.engine_setup import sim_options
from mcp_sim.engines.kind import FAIL, OK, WARN, Check, SettingsSummary
from mcp_sim.engines.registry import engine_kind
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.models.registry import Manifest

__all__ = ["FAIL", "OK", "WARN", "Check", "blocking", "diagnose"]


def diagnose(settings: EngineSettings) -> list[Check]:
    """Every check for SETTINGS, in reading order."""
    kind = engine_kind(settings.engine)

    def summary_for(manifest: Manifest | None) -> SettingsSummary:
        options, ctx = sim_options(settings, manifest)
        thinking = f"on, budget {options.think_budget} tokens" if options.think else "off"
        return SettingsSummary(ctx, f"prompt style {options.prompt_style}, thinking {thinking}",
                               f"answers up to {options.max_tokens} tokens, temperature {options.temperature:g}, "
                               f"top_p {options.top_p:g}, top_k {options.top_k}")

    return [_python(), *kind.doctor(settings, summary_for)]


def blocking(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)


def _python() -> Check:
    version = platform.python_version()
    status = OK if sys.version_info >= (3, 10) else FAIL
    return Check("python", status, f"{version} ({sys.executable})")
