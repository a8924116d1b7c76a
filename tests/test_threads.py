"""--threads left out: the count README and --help promise, whatever the number of slots."""

from __future__ import annotations

import pytest

from mcp_sim.engines.llama import LlamaEngine, build, default_threads


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 2), (4, 4), (6, 4), (8, 4), (12, 6), (64, 32)])
def test_every_core_up_to_4_then_half_of_them_never_fewer_than_4(monkeypatch: pytest.MonkeyPatch, cores: int,
                                                                   threads: int) -> None:
    monkeypatch.setattr(build.os, "cpu_count", lambda: cores)
    assert default_threads() == threads


@pytest.mark.parametrize("slots", [1, 4])
def test_any_number_of_slots_gets_the_default_count(monkeypatch: pytest.MonkeyPatch, slots: int) -> None:
    monkeypatch.setattr(build.os, "cpu_count", lambda: 16)
    # Built, not loaded: one slot or four, the decoder reads the same resolved count.
    assert LlamaEngine("unused.gguf", slots=slots).n_threads == 8
    assert LlamaEngine("unused.gguf", slots=slots, n_threads=3).n_threads == 3
