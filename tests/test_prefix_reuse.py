"""Prefix reuse on the real engine: interleaved sessions resume their own saved state, evaluate only
their new tokens, and answer exactly as they would from a cold start."""

from __future__ import annotations

from pathlib import Path

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from tests.conftest import SPECS

OPTIONS = SimOptions(temperature=0.0, max_tokens=96, attempts=1)
SESSIONS = ("red", "blue")


def run_interleaved(simulator: Simulator, cold: bool) -> list[tuple[str, int, str]]:
    answers = []
    for step in range(4):
        for session in SESSIONS:
            if cold:  # forget every evaluated state: the reference answer from a full prompt evaluation
                engine = simulator.engine
                assert isinstance(engine, LlamaEngine)
                engine.forget()
            # The smallest shipped prompt (weather): the cold reference reads it whole on every call.
            result = simulator.simulate("get_weather", {"city": f"{session.title()} Harbour {step}"}, world=session)
            assert not result.is_error, result.text
            answers.append((session, result.meta[META_KEY]["evaluated_tokens"], result.text))
    return answers


def test_interleaved_sessions_resume_their_own_state(model_path: Path) -> None:
    catalog = load_catalog([SPECS / "weather.yaml"])
    warm_engine = LlamaEngine(model_path, n_ctx=4096, n_threads=2, state_cache_mb=512)
    cold_engine = LlamaEngine(model_path, n_ctx=4096, n_threads=2, state_cache_mb=0)
    cold_engine.load()
    warm = run_interleaved(Simulator(catalog, warm_engine, OPTIONS), cold=False)
    cold = run_interleaved(Simulator(catalog, cold_engine, OPTIONS), cold=True)

    # Same answers, token for token: a wrong or stale state would change what greedy decoding produces.
    assert [text for *_, text in warm] == [text for *_, text in cold]
    # The warm engine evaluated only the new turns; the cold one re-read the whole prompt each time.
    n = len(SESSIONS)
    warm_late = [evaluated for _, evaluated, _ in warm[n:]]
    cold_late = [evaluated for _, evaluated, _ in cold[n:]]
    assert max(warm_late) < min(cold_late) / 5
    # Flat from the second call on: the last round costs no more than the first resumed one, give or take
    # the length of the answers (which differ by session), while the cold prompts grew by two turns.
    warm_rounds = [sum(e for _, e, _ in warm[n * r: n * r + n]) for r in (1, 3)]
    cold_rounds = [sum(e for _, e, _ in cold[n * r: n * r + n]) for r in (1, 3)]
    assert warm_rounds[1] <= 1.3 * warm_rounds[0]
    assert cold_rounds[1] - cold_rounds[0] > warm_rounds[1]
    # Saved: the shared system prompt, and each session's state, parked when another one took the model.
    saved = set(warm_engine.states._entries)
    assert len([key for key in saved if key.startswith("system:")]) == 1
    assert {key.split("|")[0] for key in saved if key.startswith("conversation:")} == {
        f"conversation:{session}" for session in SESSIONS}
