"""`mcp-sim cache stats|export|clear` through click's runner, on a group of our own."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mcp_sim.cli.cache import register
from mcp_sim.rehearsal.cache import ResponseCache


@click.group()
def cli() -> None:
    """A stand-in for mcp-sim's own group."""


register(cli)


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    path = tmp_path / "cache.db"
    with ResponseCache(path) as cache:
        for number, tool in enumerate(["get_weather", "get_weather", "get_forecast"]):
            cache.put(f"k{number}", json.dumps({"n": number, "city": "Tromsø"}).encode(), model_hash="ab" * 32,
                      model_name="tiny", tool=tool, arguments={"n": number}, world="w")
    return path


def test_stats_counts_entries_per_tool_and_model(filled: Path) -> None:
    result = CliRunner().invoke(cli, ["cache", "stats", str(filled)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{filled}: 3 entries, ")
    assert "  tool get_forecast: 1\n  tool get_weather: 2\n" in result.output
    assert "  model tiny (sha256 abababababab): 3" in result.output
    figures = json.loads(CliRunner().invoke(cli, ["cache", "stats", str(filled), "--json"]).output)
    assert figures["entries"] == 3 and figures["size_bytes"] > 0


def test_export_writes_one_entry_per_line(filled: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    result = CliRunner().invoke(cli, ["cache", "export", str(filled), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == f"3 entries written to {out}\n"
    entries = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    first = entries[0]
    assert (first["key"], first["tool"], first["result"]) == ("k0", "get_weather", {"n": 0, "city": "Tromsø"})
    assert {e["model_name"] for e in entries} == {"tiny"} and len(entries) == 3


def test_clear_asks_first_then_empties(filled: Path) -> None:
    refused = CliRunner().invoke(cli, ["cache", "clear", str(filled)], input="n\n")
    assert refused.exit_code == 1 and "Remove all 3 entries" in refused.output
    result = CliRunner().invoke(cli, ["cache", "clear", str(filled), "--yes"])
    assert result.exit_code == 0 and result.output == f"3 entries removed from {filled}\n"
    with ResponseCache(filled) as cache:
        assert cache.stats()["entries"] == 0 and cache.model_for_name("tiny") is None


def test_bad_paths_are_one_line_errors_and_create_nothing(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a cache")
    for command in (["stats", str(notes)], ["clear", "--yes", str(notes)], ["stats", str(tmp_path / "none.db")]):
        result = CliRunner().invoke(cli, ["cache", *command])
        assert result.exit_code == 1
        assert result.output.startswith("Error: ") and "Traceback" not in result.output
    assert not (tmp_path / "none.db").exists() and notes.read_text() == "not a cache"


def test_export_to_an_unwritable_place_is_a_clear_error(filled: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["cache", "export", str(filled), "--out", str(tmp_path / "no" / "x.jsonl")])
    assert result.exit_code == 1
    assert result.output == f"Error: {tmp_path / 'no' / 'x.jsonl'}: No such file or directory\n"
