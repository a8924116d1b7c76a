"""x-sim fixtures: load-time checks with pointers, precedence, and templates filled per call."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
import yaml

from mcp_sim.core.specs import ToolSpec, load_catalog
from mcp_sim.xsim.fixtures import Fixture, FixtureSet, ToolShape, parse_fixtures, specificity
from tests.conftest import SPECS

OPS = load_catalog([SPECS / "ops.yaml"]).tools
WEATHER = load_catalog([SPECS / "weather.yaml"]).tools
WHERE = "ops.yaml#/tools/0 (tool 'restart_service')/x-sim/fixtures"
NOON = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def fixtures(tool: ToolSpec, text: str) -> list[Fixture]:
    parsed, problems = parse_fixtures(yaml.safe_load(text), tool, WHERE)
    assert problems == []
    return parsed


def problems_of(tool: ToolSpec | ToolShape, text: str) -> list[str]:
    return parse_fixtures(yaml.safe_load(text), tool, WHERE)[1]


def answer(fixture_set: FixtureSet, tool: str, arguments: dict[str, Any], world: str = "w",
           call_number: int = 1, seed: int | None = 0) -> Any:
    found = fixture_set.answer(tool, arguments, world=world, call_number=call_number, seed=seed)
    assert found is not None
    return found


RESTARTS = """
- match: {schema: {}}                                               # 0: catch-all
  result: {service: api, state: starting, pid: 1, restarted_at: "{{now}}"}
- match: {schema: {properties: {service: {enum: [worker, scheduler]}}}}   # 1: one argument
  result: {service: worker, state: running, pid: 2, restarted_at: "{{now}}"}
- match: {schema: {properties: {service: {const: worker}}}}         # 2: one argument, later in the file
  result: {service: worker, state: running, pid: 3, restarted_at: "{{now}}"}
- match: {service: postgres}                                        # 3: exact
  result: "postgres is managed by the database team"
  isError: true
- match: {schema: {properties: {service: {const: postgres}}, required: [service]}}  # 4: the exact match 3 wins
  result: {service: postgres, state: running, pid: 5, restarted_at: "{{now}}"}
"""


def test_the_most_specific_fixture_answers_first() -> None:
    fixture_set = FixtureSet(fixtures(OPS["restart_service"], RESTARTS), clock=lambda: NOON)
    # An exact match beats a schema match listed before it that is at least as specific.
    postgres = answer(fixture_set, "restart_service", {"service": "postgres"})
    assert (postgres.is_error, postgres.text, postgres.fixture.index) == (
        True, "postgres is managed by the database team", 3)
    # Schema matches naming one argument outrank the catch-all; between equals, file order decides.
    assert answer(fixture_set, "restart_service", {"service": "worker"}).structured["pid"] == 2
    assert answer(fixture_set, "restart_service", {"service": "scheduler"}).structured["pid"] == 2
    assert answer(fixture_set, "restart_service", {"service": "api"}).structured["pid"] == 1
    assert fixture_set.answer("drop_cache", {"cache": "redis"}, world="w", call_number=1, seed=0) is None


def test_specificity_counts_the_arguments_a_schema_constrains() -> None:
    assert specificity({}) == 0
    assert specificity({"properties": {"a": {}, "b": True}}) == 0
    assert specificity({"properties": {"a": {"const": 1}}, "required": ["a", "b"]}) == 2
    ranked = sorted(fixtures(OPS["restart_service"], RESTARTS), key=lambda f: f.rank)
    # Exact first; then one argument each (a name in both properties and required counts once), in file order.
    assert [f.index for f in ranked] == [3, 1, 2, 4, 0]


def test_an_exact_match_needs_equal_arguments_not_a_subset() -> None:
    exact = fixtures(OPS["tail_logs"], "[{match: {service: api}, result: ok}]")
    fixture_set = FixtureSet(exact)
    assert fixture_set.find("tail_logs", {"service": "api"}) is exact[0]
    assert fixture_set.find("tail_logs", {"service": "api", "lines": 5}) is None


def test_templates_fill_arguments_keeping_their_type_and_dotted_paths() -> None:
    tool = ToolShape("echo", {"type": "object", "properties": {"n": {"type": "integer"}, "who": {
        "type": "object"}, "tags": {"type": "array"}}}, {"type": "object", "properties": {
            "n": {"type": "integer"}, "greeting": {"type": "string"}, "first_tag": {"type": "string"}}})
    parsed, problems = parse_fixtures([{"match": {"schema": {}}, "result": {
        "n": "{{arguments.n}}", "greeting": "Hello {{ arguments.who.name }}, n={{arguments.n}}{{arguments.nope}}",
        "first_tag": "{{arguments.tags.0}}"}}], tool, WHERE)
    assert problems == [f"{WHERE}/0/result/greeting: template {{{{arguments.nope}}}} names no argument of the "
                        "tool's inputSchema (arguments: n, tags, who)"]
    tool = ToolShape("echo", {"type": "object"}, tool.output_schema)  # an open inputSchema: any name goes
    parsed, problems = parse_fixtures([{"match": {"schema": {}}, "result": {
        "n": "{{arguments.n}}", "greeting": "Hello {{ arguments.who.name }}, n={{arguments.n}}{{arguments.nope}}",
        "first_tag": "{{arguments.tags.0}}"}}], tool, WHERE)
    assert problems == []
    filled = answer(FixtureSet(parsed), "echo", {"n": 7, "who": {"name": "Ada"}, "tags": ["x", "y"]})
    assert filled.structured == {"n": 7, "greeting": "Hello Ada, n=7", "first_tag": "x"}
    assert filled.text == json.dumps(filled.structured)


def test_now_and_uuid_are_filled_per_call_and_uuid_follows_seed_world_and_call() -> None:
    tool = ToolShape("mint", {"type": "object"}, {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"}, "again": {"type": "string"},
        "at": {"type": "string", "format": "date-time"}}})
    parsed, problems = parse_fixtures([{"match": {"schema": {}}, "result": {
        "id": "{{uuid}}", "again": "ref {{uuid}}", "at": "{{now}}"}}], tool, WHERE)
    assert problems == []
    fixture_set = FixtureSet(parsed, clock=lambda: NOON)

    def minted(**call: Any) -> str:
        return str(answer(fixture_set, "mint", {}, **call).structured["id"])

    first = answer(fixture_set, "mint", {}, world="a", call_number=1, seed=0).structured
    assert first["at"] == "2026-11-30T12:00:00+00:00"
    assert first["again"] == f"ref {first['id']}"  # one id per call
    assert minted(world="a", call_number=1, seed=0) == first["id"]  # repeatable
    others = {minted(world="b", call_number=1, seed=0), minted(world="a", call_number=2, seed=0),
              minted(world="a", call_number=1, seed=1), minted(world="a", call_number=1, seed=None)}
    assert first["id"] not in others and len(others) == 4


def test_text_tools_and_error_fixtures_fill_templates_as_text() -> None:
    parsed = fixtures(OPS["tail_logs"], """
- match: {schema: {required: [lines]}}
  result: "{{arguments.lines}}"
- match: {service: postgres}
  result: "Error: no logs for {{arguments.service}} at {{now}}"
  isError: true
""")
    fixture_set = FixtureSet(parsed, clock=lambda: NOON)
    assert answer(fixture_set, "tail_logs", {"service": "api", "lines": 3}).text == "3"
    failed = answer(fixture_set, "tail_logs", {"service": "postgres"})
    assert (failed.is_error, failed.text, failed.structured) == (
        True, "Error: no logs for postgres at 2026-11-30T12:00:00+00:00", None)


def test_a_schema_fixture_whose_filled_result_breaks_the_output_schema_answers_with_an_error() -> None:
    # The type of `service` is only known per call: a number fills the string field and breaks the schema.
    tool = ToolShape("status", {"type": "object"}, {"type": "object", "properties": {
        "service": {"type": "string"}}, "required": ["service"]})
    parsed, problems = parse_fixtures([{"match": {"schema": {}}, "result": {"service": "{{arguments.service}}"}}],
                                      tool, WHERE)
    assert problems == []
    fixture_set = FixtureSet(parsed)
    assert answer(fixture_set, "status", {"service": "api"}).structured == {"service": "api"}
    broken = answer(fixture_set, "status", {"service": 42})
    assert broken.is_error and broken.structured is None
    assert f"The fixture {WHERE}/0, filled with these arguments, does not fit" in broken.text
    assert "42 is not of type 'string'" in broken.text


@pytest.mark.parametrize(("text", "expected"), [
    ("{match: {service: web}}",
     "/0: each fixture needs 'match' (arguments or {schema: ...}) and 'result'"),
    ("{match: {schema: {type: strng}}, result: {}}",
     "/0/match/schema/type: invalid JSON Schema: 'strng' is not valid under any of the given schemas"),
    ("{match: {service: mongo}, result: {}}",
     "/0/match: the arguments do not fit the tool's inputSchema: at /service: 'mongo' is not one of"),
    ("{match: {service: web}, result: {service: web, state: running, pid: 0, restarted_at: '{{now}}'}}",
     "/0/result/pid: does not fit the tool's outputSchema: 0 is less than the minimum of 1"),
    ("{match: {service: web}, result: {service: web, state: '{{arguments.state}}', pid: 2, restarted_at: x}}",
     "/0/result/state: template {{arguments.state}} names no argument of the tool's inputSchema"),
    ("{match: {service: web}, result: {service: web, state: '{{today}}', pid: 2, restarted_at: x}}",
     "/0/result/state: unknown template {{today}}; use {{arguments.NAME}}"),
    ("{match: {service: web}, result: [web]}",
     "/0/result: must be an object that fits the tool's outputSchema"),
    ("{match: {service: web}, result: {error: down}, isError: true}",
     "/0/result: an error fixture's result must be its error text"),
    ("{match: {service: web}, result: oops, isError: 'yes'}", "/0/isError: must be true or false, got 'yes'"),
    ("{match: {service: web}, result: oops, isError: true, when: always}", "/0/when: unknown field"),
    ("{match: [web], result: oops}", "/0/match: must be the exact arguments (a mapping) or {schema: {...}}"),
])
def test_load_problems_name_the_file_and_pointer(text: str, expected: str) -> None:
    found = problems_of(OPS["restart_service"], f"[{text}]")
    assert any(p.startswith(WHERE + expected) for p in found), found


def test_load_problems_for_text_tools_duplicates_and_shape() -> None:
    assert problems_of(OPS["tail_logs"], "[{match: {service: api}, result: {lines: []}}]") == [
        f"{WHERE}/0/result: this tool has no outputSchema, so its result must be text or a list of content blocks"]
    assert problems_of(OPS["tail_logs"], "[{match: {service: api}, result: a}, {match: {service: api}, result: b}]") \
        == [f"{WHERE}/1/match: the same arguments as fixture 0, which answers first: remove one"]
    assert problems_of(OPS["tail_logs"], "{match: {service: api}, result: a}") == [
        f"{WHERE}: must be a list of {{match, result, isError?}}"]


def test_every_problem_is_listed_at_once() -> None:
    found = problems_of(WEATHER["get_weather"], """
- {match: {city: 7}, result: {city: Oslo, temperature: 1, conditions: cloudy, units: metric}}
- {match: {city: Oslo}, result: {city: Oslo, temperature: hot, conditions: cloudy, units: metric}}
- {match: {schema: {properties: {city: {const: Rome}}}}, result: {city: Rome, temperature: 1, conditions: sunny,
   units: metric}}
""")
    assert [p.split(":")[0].removeprefix(WHERE) for p in found] == ["/0/match", "/1/result/temperature",
                                                                    "/2/result/conditions"]


def test_a_schema_fixture_checks_what_it_knows_at_load() -> None:
    # Only the argument-filled field waits for the call; the rest is checked now.
    found = problems_of(WEATHER["get_weather"], """
- match: {schema: {required: [city]}}
  result: {city: "{{arguments.city}}", temperature: 1, conditions: sunny, units: metric}
""")
    assert [p.split(":")[0].removeprefix(WHERE) for p in found] == ["/0/result/conditions"]
