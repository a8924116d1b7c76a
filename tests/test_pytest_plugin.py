"""The pytest plugin as a user meets it: a test file of theirs, run by pytest with the plugin loaded."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import pytest

from tests.conftest import REPO, SPECS

pytest_plugins = ["pytester"]

PLUGIN = "mcp_sim.pytest_plugin"

USER_TESTS = f'''
import pytest

SPEC = {str(SPECS / "weather.yaml")!r}
OSLO = {{"city": "Oslo", "temperature": -3.0, "conditions": "snow", "units": "metric"}}


@pytest.mark.anyio
async def test_an_agent_sees_pinned_answers_and_a_loud_miss(mcp_sim):
    pinned = {{"get_weather": [{{"match": {{"city": "Oslo"}}, "result": OSLO}}]}}
    async with mcp_sim(SPEC, replay_only=True, fixtures=pinned, world="ci-run") as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        oslo = await client.call_tool("get_weather", {{"city": "Oslo"}})
        rome = await client.call_tool("get_weather", {{"city": "Rome"}})
    assert names == ["get_weather", "get_forecast"]
    assert oslo.structured_content == OSLO and not oslo.is_error
    assert rome.is_error and "Replay miss" in rome.content[0].text
    assert mcp_sim.journal.tools() == ["get_weather", "get_weather"]
    assert mcp_sim.journal.sources() == ["fixture", "miss"]
    assert mcp_sim.journal[0].world == "ci-run" and mcp_sim.journal[0].arguments == {{"city": "Oslo"}}
    assert mcp_sim.journal[0].structured == OSLO


@pytest.mark.anyio
async def test_a_journal_assertion_that_does_not_hold_fails_the_test(mcp_sim):
    async with mcp_sim(SPEC, strict=True) as client:
        await client.call_tool("get_weather", {{"city": "Paris"}})
    assert mcp_sim.journal.sources() == ["model"]
'''


def plugin_args() -> list[str]:
    """`-p mcp_sim.pytest_plugin` from a checkout; nothing once the package's entry point is installed."""
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]


def test_the_plugin_is_declared_as_a_pytest11_entry_point() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"mcp_sim": PLUGIN}


def test_a_users_test_file_gets_a_connected_client_and_a_journal(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_agent=USER_TESTS)
    result = pytester.runpytest(*plugin_args(), "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.re_match_lines([r".*assert \['miss'\] == \['model'\]"])


def test_a_users_bad_fixture_is_reported_with_its_pointer(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad=f'''
import pytest
from mcp_sim.base.errors import SpecError

@pytest.mark.anyio
async def test_bad(mcp_sim):
    with pytest.raises(SpecError, match="get_weather.*/0/result/city: .*not of type"):
        async with mcp_sim({str(SPECS / "weather.yaml")!r}, replay_only=True,
                           fixtures={{"get_weather": [{{"match": {{"city": "Oslo"}}, "result": {{"city": 1}}}}]}}):
            pass
''')
    pytester.runpytest(*plugin_args(), "-q", "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_relative_spec_and_cache_paths_are_found_beside_the_test_file_from_a_parent_folder(
        pytester: pytest.Pytester) -> None:
    """Regression: they were read from the current folder; a run from the parent ended in 'no response cache'."""
    from mcp_sim.rehearsal.cache import ResponseCache

    agent = pytester.mkdir("agent")
    (agent / "tools.yaml").write_text((SPECS / "weather.yaml").read_text())
    ResponseCache(agent / "tools.cache.db").close()
    (agent / "test_agent.py").write_text('''
import pytest

@pytest.mark.anyio
async def test_agent(mcp_sim):
    async with mcp_sim("tools.yaml", cache="tools.cache.db", replay_only=True) as client:
        result = await client.call_tool("get_weather", {"city": "Oslo"})
    assert result.is_error and mcp_sim.journal.sources() == ["miss"]
''')
    result = pytester.runpytest(*plugin_args(), "-q", "-p", "no:cacheprovider", "agent/test_agent.py")
    result.assert_outcomes(passed=1)


def test_a_store_url_keeps_worlds_across_servers_of_one_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_kept=f'''
import pytest

@pytest.mark.anyio
async def test_kept(mcp_sim, tmp_path):
    store = "sqlite://" + str(tmp_path)
    for expected in ("T-2", "T-3"):  # the second server continues the first one's world
        async with mcp_sim({str(REPO / "examples" / "todo.yaml")!r}, replay_only=True, store=store) as client:
            created = await client.call_tool("create_task", {{"title": "kept"}})
        assert created.structured_content["id"] == expected
''')
    result = pytester.runpytest(*plugin_args(), "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
