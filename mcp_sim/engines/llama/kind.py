"""The llama engine as the registry knows it: a GGUF run in-process, `--parallel` instances of it."""

from __future__ import annotations

from pathlib import Path

from mcp_sim.base.errors import McpSimError
from mcp_sim.engines.base import Engine
from mcp_sim.engines.kind import Check, ModelChoice, SummaryFor
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.llama.doctor import llama_checks
from mcp_sim.engines.llama.prompt_store import default_folder
from mcp_sim.engines.pool import EnginePool
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.models.hub import DEFAULT_MODEL, find_manifest_for_file, resolve
from mcp_sim.models.registry import find_manifest

# What `check` reads vocabularies from when no model is on this machine: grammars are then converted, not parsed.
NO_MODEL = Path("no-model.gguf")


class LlamaKind:
    name = "llama"
    summary = "run the GGUF with llama.cpp on this machine"
    in_process = True
    options = ("threads", "gpu_layers", "parallel", "slots", "context_shift", "flash_attn", "lazy_grammar",
               "jump_forward", "cpu_repack", "state_cache_mb", "prompt_cache_mb", "prompt_cache_dir")

    def choose(self, settings: EngineSettings, download: bool) -> ModelChoice:
        resolved = resolve(settings.model, download=download)
        label = f"{resolved.path.name} ({resolved.manifest.name if resolved.manifest else 'not in the registry'})"
        return ModelChoice(resolved.manifest, resolved.path, f"{label} from {resolved.source}")

    def offline_choice(self, settings: EngineSettings) -> ModelChoice:
        try:
            return self.choose(settings, download=False)
        except McpSimError:
            spec = settings.model
            if spec is None:
                return ModelChoice(find_manifest(DEFAULT_MODEL))
            return ModelChoice(find_manifest(spec.partition(":")[0]) or find_manifest_for_file(Path(spec).name))

    def build(self, settings: EngineSettings, choice: ModelChoice, ctx: int) -> Engine:
        if choice.path is None:
            raise McpSimError(f"the model {settings.model or DEFAULT_MODEL} is not on this machine")
        manifest = choice.manifest
        engines = [LlamaEngine(choice.path, n_ctx=ctx, n_threads=settings.threads, n_gpu_layers=settings.gpu_layers,
                               seed=settings.seed, state_cache_mb=settings.state_cache_mb, slots=settings.slots,
                               context_shift=settings.context_shift, flash_attn=settings.flash_attn,
                               lazy_grammar=settings.lazy_grammar,
                               jump_forward=settings.jump_forward, cpu_repack=settings.cpu_repack,
                               metadata_overrides=manifest.metadata_overrides if manifest else None,
                               prompt_cache_dir=settings.prompt_cache_dir or default_folder(),
                               prompt_cache_mb=settings.prompt_cache_mb)
                   for _ in range(settings.parallel)]
        return engines[0] if settings.parallel == 1 else EnginePool(engines)

    def checking_engine(self, ctx: int) -> Engine:
        try:
            path = resolve(None, download=False).path
        except McpSimError:
            path = NO_MODEL
        return LlamaEngine(path, n_ctx=ctx)

    def doctor(self, settings: EngineSettings, summary_for: SummaryFor) -> list[Check]:
        return llama_checks(settings, summary_for)


LLAMA = LlamaKind()
