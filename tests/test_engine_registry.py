"""Engines are chosen through one registry (mcp_sim/engines/registry.py): a kind added there is what --engine,
`doctor`, the response cache and `eval --judge-model` all use; nothing else names engines."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from mcp_sim.app import assemble
from mcp_sim.app.doctor import diagnose
from mcp_sim.base.errors import McpSimError
from mcp_sim.core.engine_setup import build_engine, prepare
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import ChatMessage, EngineIdentity, Generation, GenerationRequest
from mcp_sim.engines.kind import OK, Check, ModelChoice, SummaryFor
from mcp_sim.engines.registry import ENGINES, engine_kind
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.models.bundled import default_model_path
from mcp_sim.rehearsal.settings import RehearsalSettings
from tests.conftest import SPECS


class EchoEngine:
    """An engine a user might add: answers every call with the same text."""

    name = "echo"
    capacity = 1
    context_size = 4096

    def load(self) -> None:
        pass

    def close(self) -> None:
        pass

    def generate(self, request: GenerationRequest) -> Generation:
        return Generation('{"echo": true}', 1, 1, "stop")

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        return sum(len(m.content) for m in messages) // 3

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        return None

    def identity(self) -> EngineIdentity:
        return EngineIdentity(described={"engine": "echo"})


class EchoKind:
    """Its registration: everything the registry asks of a kind, in one class."""

    name = "echo"
    summary = "the same answer to every call"
    options = ()
    in_process = False  # nothing native to crash: it answers in the server's own process

    def choose(self, settings: EngineSettings, download: bool) -> ModelChoice:
        return ModelChoice(None, label="echo")

    def offline_choice(self, settings: EngineSettings) -> ModelChoice:
        return ModelChoice(None)

    def build(self, settings: EngineSettings, choice: ModelChoice, ctx: int) -> EchoEngine:
        return EchoEngine()

    def checking_engine(self, ctx: int) -> EchoEngine:
        return EchoEngine()

    def doctor(self, settings: EngineSettings, summary_for: SummaryFor) -> list[Check]:
        return [Check("echo", OK, f"answers the same, context {summary_for(None).ctx}")]


@pytest.fixture
def echo_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENGINES, "echo", EchoKind())


@pytest.mark.usefixtures("echo_registered")
def test_a_registered_kind_is_built_diagnosed_and_keyed_like_the_built_in_ones(tmp_path: Path) -> None:
    prepared = prepare(EngineSettings(engine="echo", ctx=4096))
    assert isinstance(prepared.engine, EchoEngine)
    checks = diagnose(EngineSettings(engine="echo", ctx=4096))
    assert [c.name for c in checks] == ["python", "echo"] and "context 4096" in checks[1].detail
    simulator = assemble(load_catalog([str(SPECS / "weather.yaml")]), prepared.engine, prepared.options,
                         rehearsal=RehearsalSettings(cache=tmp_path / "cache.sqlite3"))
    assert simulator.sources, "the cache was attached, keyed by the engine's identity"


def test_an_unknown_engine_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(McpSimError, match=r"unknown engine 'vllm': use one of llama, openai"):
        prepare(EngineSettings(engine="vllm"))


def test_every_kind_names_options_that_exist() -> None:
    fields = {f.name for f in dataclasses.fields(EngineSettings)}
    for kind in ENGINES.values():
        assert set(kind.options) <= fields, kind.name


def test_the_judge_model_takes_registry_names() -> None:
    # The bundled model's registry name, resolved as --model resolves it: nothing is downloaded or loaded.
    judge = build_engine(EngineSettings(model="smollm2-135m"), 2048)
    assert judge.identity().model_file == default_model_path() and judge.context_size == 2048
    assert engine_kind("llama").checking_engine(1024).context_size == 1024
