"""The application module (mcp_sim/app/__init__.py): typed settings in, a finished simulator out; nothing in the
package changes a simulator after it is built."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import mcp_sim
from mcp_sim.app import AppSettings, build_simulator
from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.rehearsal.fault_hook import FaultInjector
from mcp_sim.rehearsal.ledger_observer import LedgerRecorder
from mcp_sim.rehearsal.settings import RehearsalSettings
from tests.conftest import SPECS

PACKAGE = Path(mcp_sim.__file__).parent
# A simulator's parts handed over after construction: what the application module exists to prevent.
MUTATION = re.compile(r"\bsim(ulator)?\.(sources|observers)\.(append|extend|insert)\("
                      r"|\bsim(ulator)?\.(faults|replay_only|model|sources|observers)\s*=[^=]")


class Watcher:
    def observed(self, call: Call, result: SimulationResult, source: str) -> None:
        pass


def test_settings_in_a_finished_simulator_out(tmp_path: Path) -> None:
    faults = tmp_path / "faults.yaml"
    faults.write_text(yaml.safe_dump({"faults": [{"tool": "get_weather", "kind": "latency", "nth": 1}]}))
    watcher = Watcher()
    settings = AppSettings(EngineSettings(ctx=4096),
                           RehearsalSettings(replay_only=True, faults=faults, ledger=tmp_path / "ledger.jsonl"),
                           observers=[watcher])
    simulator = build_simulator(load_catalog([SPECS / "weather.yaml"]), settings)
    assert simulator.replay_only and isinstance(simulator.faults, FaultInjector)
    assert simulator.faults.model is simulator.model  # the hook writes failures with the simulator's own model
    assert [type(o) for o in simulator.observers] == [LedgerRecorder, Watcher]
    result = simulator.simulate("get_weather", {"city": "Oslo"})
    assert result.is_error and result.simulation.stage == "replay"  # a miss: the model was never loaded


def test_nothing_in_the_package_changes_a_simulator_after_it_is_built() -> None:
    offenders = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if MUTATION.search(line)]
    assert not offenders, "\n".join(offenders)
    assert MUTATION.search("simulator.observers.append(x)") and MUTATION.search("simulator.faults = hook")
