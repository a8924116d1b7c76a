"""The openai engine as the registry knows it: an OpenAI-compatible server at --base-url does the decoding."""

from __future__ import annotations

import os

from mcp_sim.base.errors import McpSimError
from mcp_sim.engines.base import Engine
from mcp_sim.engines.kind import FAIL, OK, Check, ModelChoice, SummaryFor
from mcp_sim.engines.openai import OpenAIEngine
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.models.registry import find_manifest


class OpenAIKind:
    name = "openai"
    summary = "an OpenAI-compatible server at --base-url"
    in_process = False
    options = ("base_url", "api_key_env", "max_inflight", "timeout")

    def choose(self, settings: EngineSettings, download: bool) -> ModelChoice:
        _server(settings)
        return self.offline_choice(settings)

    def offline_choice(self, settings: EngineSettings) -> ModelChoice:
        # The server holds the model: its manifest, found by the name it is served under, is all there is here.
        return ModelChoice(find_manifest(settings.model) if settings.model else None,
                           label=f"{settings.model} at {settings.base_url}")

    def build(self, settings: EngineSettings, choice: ModelChoice, ctx: int) -> Engine:
        return self._build(settings, ctx)

    def checking_engine(self, ctx: int) -> Engine:
        # Nothing to count with or check against without a server: estimates, and every schema taken.
        return OpenAIEngine("http://localhost/v1", "unknown", n_ctx=ctx)

    def doctor(self, settings: EngineSettings, summary_for: SummaryFor) -> list[Check]:
        try:
            choice = self.choose(settings, download=False)
            summary = summary_for(choice.manifest)
            engine = self._build(settings, summary.ctx)
            models = engine.served_models()
            engine.load()
        except McpSimError as exc:
            return [Check("server", FAIL, str(exc))]
        served = ", ".join(str(m.get("id")) for m in models or []) or "(no model list)"
        registry = f" ({choice.manifest.name} in the registry)" if choice.manifest else " (not in the registry)"
        return [Check("server", OK, f"{engine.base_url} serves {served}"),
                Check("model", OK, f"{engine.model}{registry}"),
                Check("settings", OK, f"{summary.style}, context {engine.context_size} tokens, at most "
                                      f"{settings.max_inflight} calls in flight")]

    def _build(self, settings: EngineSettings, ctx: int) -> OpenAIEngine:
        base_url, model = _server(settings)
        api_key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
        return OpenAIEngine(base_url, model, api_key=api_key, n_ctx=ctx, timeout=settings.timeout,
                            max_inflight=settings.max_inflight)


def _server(settings: EngineSettings) -> tuple[str, str]:
    """The server's root and the model name it serves; both must be given."""
    if not settings.base_url:
        raise McpSimError("--engine openai needs --base-url, e.g. --base-url http://gpu-box:8000/v1")
    if not settings.model:
        raise McpSimError("--engine openai needs --model: the model name the server serves "
                          "(see GET /v1/models)")
    return settings.base_url, settings.model


OPENAI = OpenAIKind()
