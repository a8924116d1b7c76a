"""`mcp-sim learn`: real recorded results become bounded, diverse x-sim examples of a spec that loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner

from mcp_sim.cli import cli
from mcp_sim.core.prompt import system_prompt
from mcp_sim.core.specs import load_catalog
from mcp_sim.fidelity.learn import pick_diverse
from mcp_sim.rehearsal.traces import TraceRecord, read_traces
from tests.fidelity_helpers import TRACES


def test_learn_adds_real_results_as_examples_the_prompt_shows(tmp_path: Path) -> None:
    spec = tmp_path / "filesystem.yaml"
    document = yaml.safe_load((TRACES / "filesystem.yaml").read_text())
    for tool in document["tools"]:
        tool.pop("x-sim", None)  # start from the plain mirrored spec
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    result = CliRunner().invoke(cli, ["learn", str(TRACES / "filesystem.jsonl"), "--spec", str(spec)])
    assert result.exit_code == 0, result.output
    catalog = load_catalog([spec])
    records = read_traces([TRACES / "filesystem.jsonl"])
    read = catalog.tools["read_text_file"]
    # Three recorded reads (two paths, one missing): two examples, the second the real error.
    assert len(read.examples) == 2
    assert read.examples[0].result == next(r.structured for r in records if r.tool == "read_text_file")
    assert read.examples[1].is_error and read.examples[1].result.startswith("ENOENT")
    assert catalog.tools["write_file"].examples[0].arguments == {"path": "/sandbox/notes.txt",
                                                                 "content": "alpha\nbeta\n"}
    assert not catalog.tools["move_file"].examples  # never called, nothing to learn
    assert "alpha\\nbeta\\n" in system_prompt(catalog.spec_sets[0])  # the model now sees the real answer

    # Learning again adds nothing new: the limit counts the examples already there.
    again = CliRunner().invoke(cli, ["learn", str(TRACES / "filesystem.jsonl"), "--spec", str(spec)])
    assert again.exit_code == 0 and len(load_catalog([spec]).tools["read_text_file"].examples) == 2


def test_learn_writes_elsewhere_and_skips_what_cannot_be_an_example(tmp_path: Path) -> None:
    spec = tmp_path / "time.yaml"
    shutil.copy(TRACES / "time.yaml", spec)
    out = tmp_path / "taught.yaml"
    result = CliRunner().invoke(cli, ["learn", str(TRACES / "time.jsonl"), "--spec", str(spec), "--out",
                                      str(out), "--replace", "--max-per-tool", "1", "--max-chars", "300"])
    assert result.exit_code == 0, result.output
    assert spec.read_text() == (TRACES / "time.yaml").read_text()  # --out leaves the source alone
    tools = load_catalog([out]).tools
    assert len(tools["get_current_time"].examples) == 1
    assert tools["get_current_time"].examples[0].arguments == {"timezone": "UTC"}  # --replace dropped the old
    # convert_time's results are longer than 300 characters.
    assert not tools["convert_time"].examples
    assert "over the 300 allowed" in result.output


def test_pick_diverse_prefers_different_arguments_and_one_error() -> None:
    def example(args: dict, error: bool = False) -> dict:
        return {"arguments": args, "result": "r", **({"isError": True} if error else {})}

    candidates = [example({"city": "Paris", "units": "c"}), example({"city": "Paris", "units": "c"}),
                  example({"city": "Paris", "units": "f"}), example({"city": "Oslo", "units": "f"}),
                  example({"city": "Nowhere", "units": "c"}, error=True)]
    chosen = pick_diverse(candidates, [], 4)
    # The error second, among the examples the system prompt shows; then the farthest successes.
    assert [c["arguments"]["city"] for c in chosen] == ["Paris", "Nowhere", "Oslo", "Paris"]
    assert chosen[3]["arguments"]["units"] == "f"
    with_error = pick_diverse(candidates, [], 5)
    assert len(with_error) == 4 and with_error[1].get("isError")  # duplicates dropped
    # The successes alone would fill every place: one is kept for the way the real tool fails.
    assert [bool(c.get("isError")) for c in pick_diverse(candidates, [], 2)] == [False, True]
    assert [c["arguments"]["city"] for c in pick_diverse(candidates, [], 3)] == ["Paris", "Nowhere", "Oslo"]
    # One place holds a success; an error already in the spec leaves every place to successes.
    assert not pick_diverse(candidates, [], 1)[0].get("isError")
    assert not any(c.get("isError") for c in pick_diverse(candidates, [example({"city": "X"}, True)], 3))


def test_learn_refuses_records_that_do_not_fit_the_schemas(tmp_path: Path) -> None:
    from mcp_sim.fidelity.learn import learn

    document = yaml.safe_load((TRACES / "time.yaml").read_text())
    bad = TraceRecord(session="s", step=1, tool="get_current_time", arguments={"timezone": 5},
                      result={"content": [], "structuredContent": {"timezone": "UTC"}, "isError": False},
                      is_error=False)
    unknown = TraceRecord(session="s", step=2, tool="no_such_tool", arguments={}, result={"content": []},
                          is_error=False)
    report = learn(document, [bad, unknown])
    assert any("do not fit the inputSchema" in reason for reason in report.skipped)
    assert any("no tool 'no_such_tool'" in reason for reason in report.skipped)
    assert report.added == {}


def test_a_sql_servers_catalog_tools_become_catalog_queries_when_one_reproduces_every_answer(
        tmp_path: Path) -> None:
    from mcp_sim.fidelity.mirror import with_state

    fidelity = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"
    committed = yaml.safe_load((fidelity / "sqlite.yaml").read_text())
    document = yaml.safe_load((fidelity / "sqlite.yaml").read_text())
    for index, tool in enumerate(document["tools"]):  # list_tables and describe_table as mirror infers them
        if tool["name"] in ("list_tables", "describe_table"):
            document["tools"][index] = with_state({k: v for k, v in tool.items() if k != "x-sim"})
    assert document["tools"][3]["x-sim"]["state"]["op"] == "list"  # a list of a `tables` collection
    spec = tmp_path / "sqlite.yaml"
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    train = fidelity / "sqlite.train.jsonl"
    result = CliRunner().invoke(cli, ["learn", str(train), "--spec", str(spec)])
    assert result.exit_code == 0, result.output
    assert "describe_table reads the database's catalog: PRAGMA table_info({table_name})" in result.output
    assert yaml.safe_load(spec.read_text()) == committed  # what the benchmark declared by hand

    # One recorded answer no catalog statement gives: the tool keeps the effect its name suggests.
    altered = tmp_path / "altered.jsonl"
    altered.write_text(train.read_text().replace("[{'name': 'books'}]", "[{'name': 'books'}, {'name': 'x'}]"))
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    result = CliRunner().invoke(cli, ["learn", str(altered), "--spec", str(spec)])
    assert result.exit_code == 0 and "list_tables reads" not in result.output
    assert yaml.safe_load(spec.read_text())["tools"][3]["x-sim"]["state"]["op"] == "list"
