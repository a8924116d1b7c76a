"""A transport is one class and its line in the registry: `serve` offers it and runs it with nothing else changed."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mcp_sim.cli import cli
from mcp_sim.serving.transport_kinds import TRANSPORTS, Endpoint, Launch, Serving

TODO = Path(__file__).resolve().parent.parent / "examples" / "todo.yaml"


class Recording:
    """A transport that serves nothing: it keeps what serve handed it and returns at once."""

    name = "recording"
    summary = "a test transport"
    world_hint = "a test picks a world"

    def __init__(self) -> None:
        self.checked: list[Endpoint] = []
        self.launched: list[Launch] = []

    def check(self, endpoint: Endpoint) -> None:
        self.checked.append(endpoint)

    def where(self, endpoint: Endpoint) -> str:
        return f"recording at {endpoint.host}"

    def page(self, endpoint: Endpoint) -> str | None:
        return None  # no world page

    def serving(self, endpoint: Endpoint, launch: Launch) -> Serving:
        async def run() -> None:
            self.launched.append(launch)
            launch.announce()

        return run


def test_the_transport_choices_are_the_registry() -> None:
    option = next(p for p in cli.commands["serve"].params if p.name == "transport")
    assert isinstance(option.type, click.Choice) and list(option.type.choices) == list(TRANSPORTS) == ["stdio", "http"]


def test_a_registered_transport_is_served_with_no_other_change(monkeypatch: pytest.MonkeyPatch) -> None:
    kind = Recording()
    monkeypatch.setitem(TRANSPORTS, kind.name, kind)
    option = next(p for p in cli.commands["serve"].params if p.name == "transport")
    monkeypatch.setattr(option, "type", click.Choice(list(TRANSPORTS)))
    result = CliRunner().invoke(cli, ["serve", str(TODO), "--transport", "recording", "--replay-only",
                                       "--host", "127.0.0.9"])
    assert result.exit_code == 0, result.output
    assert [endpoint.host for endpoint in kind.checked] == ["127.0.0.9"]
    (launch,) = kind.launched
    assert launch.server is not None and launch.on_ready is None  # a replay loads no model: nothing to warm
    assert "mcp-sim recording at 127.0.0.9" in result.output and "a test picks a world" in result.output
