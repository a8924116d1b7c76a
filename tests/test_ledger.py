"""The ledger: what it records, that it survives kill -9 and concurrent writers, its CLI and its HTML page."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mcp_sim.cli.rehearsal import register
from mcp_sim.core.specs import load_catalog
from mcp_sim.rehearsal.ledger import (
    Ledger,
    LedgerEntry,
    LedgerError,
    is_destructive,
    read_ledger,
    summarize,
    writes_world,
)
from mcp_sim.rehearsal.ledger_report import render_html
from tests.conftest import SPECS, subprocess_env

# Appends COUNT entries (0: until killed), printing the running count after each append has returned.
WRITER = """
import sys
from mcp_sim.rehearsal.ledger import Ledger, LedgerEntry
ledger, writer, count, pad = Ledger(sys.argv[1]), sys.argv[2], int(sys.argv[3]), "x" * int(sys.argv[4])
i = 0
while count == 0 or i < count:
    ledger.append(LedgerEntry(world="files", tool="write_file", arguments={"writer": writer, "i": i, "pad": pad},
                              is_error=False, result="ok", destructive=True))
    i += 1
    print(i, flush=True)
"""

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=timezone.utc)


def entry(tool: str = "write_file", world: str = "files", destructive: bool = False, is_error: bool = False,
          seconds: int = 0, **extra: object) -> LedgerEntry:
    fields: dict = dict(time=T0 + timedelta(seconds=seconds), world=world, tool=tool, arguments={"path": "/a"},
                        is_error=is_error, result="disk full" if is_error else "ok", destructive=destructive)
    return LedgerEntry(**(fields | extra))


def test_entries_round_trip_with_utc_times(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "deep" / "dir" / "ledger.jsonl")  # parent folders are created
    written = [entry(), entry("delete_file", destructive=True, is_error=True, faults=["error", "latency"],
                              latency_ms=12.5, source="model", structured={"deleted": False})]
    for e in written:
        ledger.append(e)
    assert read_ledger(ledger.path) == written
    first = json.loads(ledger.path.read_text().splitlines()[0])
    assert first["time"] == "2026-05-01T09:00:00Z" and first["server"] > 0


def test_rules_follow_mcp_annotation_defaults() -> None:
    assert writes_world(None) and writes_world({}) and writes_world({"readOnlyHint": False})
    assert not writes_world({"readOnlyHint": True})
    assert is_destructive(None) and is_destructive({}) and is_destructive({"readOnlyHint": False})
    assert not is_destructive({"destructiveHint": False})
    assert not is_destructive({"readOnlyHint": True, "destructiveHint": True})  # meaningless when read-only


def test_shipped_specs_record_writing_and_destructive_calls_and_skip_read_only(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for spec_set in load_catalog([SPECS]).spec_sets:
        for tool in spec_set.tools:
            ledger.record(annotations=tool.annotations, world=Path(spec_set.source).stem, tool=tool.name,
                          arguments={}, is_error=False, result="ok")
    recorded = {e.tool: e.destructive for e in read_ledger(ledger.path)}
    assert recorded == {"create_ticket": False, "write_file": True, "delete_file": True,
                        "restart_service": True, "drop_cache": True}


def test_summary_counts_destructive_calls_and_writes() -> None:
    entries = [entry("delete_file", destructive=True), entry("delete_file", destructive=True, world="ops"),
               entry("restart_service", world="ops", destructive=True), entry("create_ticket", is_error=True),
               *(entry("write_file", faults=["latency"] if i == 0 else []) for i in range(4))]
    assert summarize(entries) == ("8 calls that change the world in 2 worlds: 3 destructive (delete_file x2, "
                                  "restart_service x1), 5 writes (write_file x4, create_ticket x1); 1 failed, "
                                  "1 under injected faults.")
    assert summarize([entry()]) == "1 call that change the world in 1 world: 1 write (write_file x1); none failed."
    assert summarize([]) == "No calls that change the world."


def test_concurrent_writers_leave_every_line_intact(tmp_path: Path) -> None:
    path, writers, count = tmp_path / "ledger.jsonl", 4, 40
    # 20 kB lines: larger than a page and a pipe buffer, where unlocked writers could interleave.
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{n}", str(count), "20000"],
                              stdout=subprocess.DEVNULL, env=subprocess_env()) for n in range(writers)]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    lines = path.read_text().splitlines()
    assert len(lines) == writers * count
    entries = [LedgerEntry.model_validate_json(line) for line in lines]  # each line a whole entry
    for n in range(writers):
        assert [e.arguments["i"] for e in entries if e.arguments["writer"] == f"w{n}"] == list(range(count))


def test_kill_9_keeps_every_entry_reported_as_appended(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "killed", "0", "2000"],
                            stdout=subprocess.PIPE, text=True, env=subprocess_env())
    assert proc.stdout is not None
    reported = 0
    while reported < 30:
        reported = int(proc.stdout.readline())
    proc.kill()  # SIGKILL, most likely in the middle of an append
    reported = max([reported, *(int(line) for line in proc.stdout.read().split())])
    proc.wait(timeout=10)
    entries = read_ledger(path)  # opens cleanly
    assert len(entries) >= reported
    assert [e.arguments["i"] for e in entries] == list(range(len(entries)))
    Ledger(path).append(entry("after_restart"))  # a restarted server appends to the same file
    assert read_ledger(path)[-1].tool == "after_restart"


def test_a_torn_line_is_skipped_with_a_warning_and_the_next_entry_starts_a_new_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(entry("first"))
    with ledger.path.open("a") as f:  # what a writer killed mid-write would leave
        f.write(entry("torn").model_dump_json()[:40])
    with caplog.at_level(logging.WARNING):
        assert [e.tool for e in read_ledger(ledger.path)] == ["first"]
    assert "line 2: an entry cut short" in caplog.text
    ledger.append(entry("third"))
    assert [e.tool for e in read_ledger(ledger.path)] == ["first", "third"]


@pytest.mark.parametrize(("content", "expected"), [
    (bytes(range(256)) * 8, "line 1: not a ledger entry (not a JSON line)"),
    (b'{"name": "get_weather", "inputSchema": {}}\n', "line 1: not a ledger entry (world: Field required"),
    (b'{\n  "tools": []\n}\n', "line 1: not a ledger entry (not a JSON line)"),
    (b"[1, 2]\n", "line 1: not a ledger entry (entry: Input should be a valid dictionary"),
])
def test_a_foreign_file_is_a_clear_error_naming_file_and_line(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "not-a-ledger.jsonl"
    path.write_bytes(content)
    with pytest.raises(LedgerError, match="is this a file written by --ledger") as caught:
        read_ledger(path)
    assert str(caught.value).startswith(f"{path} {expected}")


def test_a_foreign_line_after_good_entries_names_its_line(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(entry())
    ledger.append(entry())
    with ledger.path.open("a") as f:
        f.write('{"time": "yesterday", "world": 3}\n')
    with pytest.raises(LedgerError, match=r"line 3: not a ledger entry \(time: Input should be a valid datetime"):
        read_ledger(ledger.path)


def test_an_unwritable_or_missing_path_fails_at_construction_or_reading(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(LedgerError, match=r"cannot write the ledger .*a-file/ledger.jsonl: .*--ledger"):
        Ledger(blocker / "ledger.jsonl")
    with pytest.raises(LedgerError, match="Is a directory"):
        Ledger(tmp_path)
    with pytest.raises(LedgerError, match=r"cannot read the ledger .*missing\.jsonl: No such file"):
        read_ledger(tmp_path / "missing.jsonl")


# --- the command --------------------------------------------------------------------------------------------

@pytest.fixture
def cli() -> click.Group:
    @click.group()
    def cli() -> None:
        """A host CLI, as mcp_sim.cli is."""

    register(cli)
    return cli


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(entry("delete_file", destructive=True, latency_ms=321.0))
    ledger.append(entry("create_ticket", world="crm", is_error=True, faults=["error"], seconds=5))
    return ledger.path


def test_ledger_command_prints_a_table_and_the_summary(cli: click.Group, ledger_file: Path) -> None:
    result = CliRunner(env={"COLUMNS": "160"}).invoke(cli, ["ledger", str(ledger_file)])
    assert result.exit_code == 0, result.output
    assert "delete_file" in result.stdout and "(destructive)" in result.stdout and "create_ticket" in result.stdout
    assert " 321 " in result.stdout and "error: disk full" in result.stdout
    assert result.stdout.rstrip().endswith(summarize(read_ledger(ledger_file)))


def test_ledger_command_prints_json_and_writes_the_page(cli: click.Group, ledger_file: Path, tmp_path: Path) -> None:
    page = tmp_path / "out" / "ledger.html"
    result = CliRunner().invoke(cli, ["ledger", str(ledger_file), "--format", "json", "--html", str(page)])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [(e["tool"], e["world"], e["is_error"], e["arguments"]) for e in listed] == [
        ("delete_file", "files", False, {"path": "/a"}), ("create_ticket", "crm", True, {"path": "/a"})]
    assert f"Wrote {page}" in result.stderr
    assert 'data-tool="create_ticket"' in page.read_text()


def test_ledger_command_errors_are_one_line_and_exit_1(cli: click.Group, tmp_path: Path) -> None:
    foreign = tmp_path / "spec.json"
    foreign.write_text('{"tools": []}\n')
    for path in (foreign, tmp_path / "missing.jsonl"):
        result = CliRunner().invoke(cli, ["ledger", str(path)])
        assert result.exit_code == 1 and result.stderr.startswith(f"Error: cannot read the ledger {path}"
                                                                  if path.name == "missing.jsonl"
                                                                  else f"Error: {path} line 1: not a ledger entry")
        assert "Traceback" not in result.output


# --- the page, in a real browser ----------------------------------------------------------------------------

HOSTILE = '<img src=x onerror="alert(1)"></pre></td></tr></table><script>alert(2)</script>'


def page_entries() -> list[LedgerEntry]:
    return [entry("delete_file", world="files", destructive=True, latency_ms=420.0),
            entry("write_file", world="files", seconds=20, arguments={"path": "/notes.txt", "text": HOSTILE}),
            entry("restart_service", world="ops --> <b>", destructive=True, is_error=True, faults=["timeout"],
                  seconds=40),
            entry("create_ticket", world="crm", seconds=65, structured={"ticket_id": "T-9", "note": HOSTILE})]


def test_the_page_is_self_contained_and_escapes_agent_text() -> None:
    page = render_html(page_entries())
    assert "<script" not in page and "<img" not in page and "&lt;img src=x" in page
    assert not any(marker in page for marker in ('src="http', "href=\"http", "url(http", "@import", "<link"))
    assert page.count("<svg") == 1


def test_the_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = shutil.which("chromium")
    assert browser, "chromium is missing: scripts/install.sh installs it (apt-get install chromium)"
    page = tmp_path / "ledger.html"
    page.write_text(render_html(page_entries()), encoding="utf-8")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,900", page.as_uri()], capture_output=True,
                   timeout=120, check=True)
    assert dom.count('<tr class="call ') == 4 and dom.count('<section class="world"') == 3
    for tool in ("delete_file", "write_file", "restart_service", "create_ticket"):
        assert f'data-tool="{tool}"' in dom
    assert "<img" not in dom and "<script" not in dom and "<b>" not in dom and "<svg" in dom  # text stayed text
    assert_screenshot_shows_the_timeline(shot)


def assert_screenshot_shows_the_timeline(shot: Path) -> None:
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(shot)[:, :, :3]
    assert pixels.shape[:2] == (900, 1200)
    assert (pixels.min(axis=2) < 0.5).mean() > 0.01  # not blank: text, chart and table drawn
    # The destructive badge's red (#b00020) appears only in the timeline, filled solid.
    badge = np.all(np.abs(pixels - np.array([0xB0, 0x00, 0x20]) / 255) < 2 / 255, axis=2)
    assert badge.sum() > 200, "the timeline's destructive badges are not on screen"


def test_at_80_columns_no_word_is_broken_apart(cli: click.Group, tmp_path: Path) -> None:
    """Regression: seven columns in 80 split words ("outcom" / "e", "ser" / "vic" / "e")."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(entry("restart_service", world="bad-day-team-a", destructive=True, is_error=True,
                        result="service postgres is down; restart failed", faults=["error"],
                        arguments={"service": "postgres", "force": True}))
    result = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["ledger", str(ledger.path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(len, lines[:-1])) <= 80  # the summary line is one paragraph
    for phrase in ("restart_service (destructive)", "error: service postgres is down; restart failed",
                   '{"service": "postgres", "force": true}', "outcome", "arguments", "bad-day-team-a"):
        assert any(phrase in line for line in lines), phrase


def test_the_chart_draws_every_call_apart_and_labels_every_minute() -> None:
    """Regression: 7 calls, some less than a second apart, showed as 5 marks; a minute label was skipped."""
    import re

    from mcp_sim.rehearsal.ledger_report import _chart_svg

    seconds = [50, 50.3, 50.6, 90, 90.5, 145, 240]
    calls = [entry(world="w", seconds=0, time=T0 + timedelta(seconds=s)) for s in seconds]
    svg = _chart_svg(calls, ["w"])
    plot = svg.split('<g id="legend_1">')[0]  # the legend draws a mark of its own
    marks = set()
    for group in re.findall(r'<g id="PathCollection_\d+">(.*?)</g>', plot, re.DOTALL):
        marks |= set(re.findall(r'<use xlink:href="#[^"]+" x="([\d.]+)" y="([\d.]+)"', group))
    assert len(marks) == len(calls)
    labels = re.findall(r"<!-- (\d\d:\d\d) -->", svg)
    assert labels == ["09:00", "09:01", "09:02", "09:03", "09:04"]
