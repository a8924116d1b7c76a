"""The world page (/ui) in a real browser: Debian's chromium driven by Playwright, a real HTTP server with the
real model, and a real MCP client whose calls the page shows as they arrive. Each step's screenshot is saved
under test-output/ui/.

The spec is examples/todo.yaml: its creates and completions are answered by the world's live state, so every
row a table shows is a fact the page could get wrong (a missing task, a change marked on the wrong row)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from playwright.sync_api import Browser, Page, expect, sync_playwright

from mcp_sim.serving.http_guard import UI_COOKIE
from tests.conftest import REPO, free_port, mcp_sim_command, start_http_server, stop, subprocess_env, wait_for_port

TODO = REPO / "examples" / "todo.yaml"
SHOTS = REPO / "test-output" / "ui"
WAIT_MS = 30_000  # a live update is a store poll (0.5 s) and a fragment away; the first call waits for the model


def call(url: str, world: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One call through a real MCP client, on a thread of its own: Playwright's sync API owns this thread's loop."""

    async def run() -> dict[str, Any]:
        async with Client(f"{url}?world={world}", read_timeout_seconds=120) as client:
            result: types.CallToolResult = await client.call_tool(tool, arguments)
        assert not result.is_error, result
        assert result.structured_content is not None
        return dict(result.structured_content)

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(anyio.run, run).result()


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ledger = tmp_path_factory.mktemp("ui") / "ledger.jsonl"
    process, url = start_http_server(str(TODO), "--ledger", str(ledger))
    try:
        yield url
    finally:
        stop(process)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: scripts/install.sh installs it (apt-get install chromium)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    opened = browser.new_page(viewport={"width": 1280, "height": 800})
    opened.set_default_timeout(WAIT_MS)
    yield opened
    opened.close()


def page_url(url: str, path: str = "") -> str:
    return url.removesuffix("/mcp") + "/ui" + path


def test_calls_arrive_on_the_open_page_without_a_reload(server: str, page: Page) -> None:
    page.goto(page_url(server))
    expect(page.locator("body.connected")).to_have_count(1)  # the event stream is open
    expect(page.locator("#worlds")).to_contain_text("No worlds yet")
    call(server, "arrivals", "create_task", {"title": "Write the report"})
    row = page.locator("tr.world[data-world=arrivals]")
    expect(row.locator("td.count")).to_have_text("1")  # pushed: the page was never reloaded
    shot(page, "1-worlds")
    row.get_by_role("link", name="arrivals").click()
    expect(page.locator("li.call")).to_have_count(1)
    expect(page.locator("li.call .badge").first).to_have_text("state")  # what answered it
    for arguments in ({"title": "Call the plumber"}, {"title": "Book the train"}):
        call(server, "arrivals", "create_task", arguments)
    expect(page.locator("li.call")).to_have_count(3)
    expect(page.locator("li.call").last.locator(".tool")).to_have_text("create_task")
    expect(page.locator("li.call").last.locator(".latency")).to_have_text(re.compile(r"^\d+ ms$"))
    tasks = page.locator("table.collection[data-collection=tasks]")
    expect(tasks.locator("tr.row")).to_have_count(4)  # Buy milk and the three created
    expect(tasks.locator("tr.row.added")).to_have_count(1)  # the last call's change is marked
    writes = page.locator("table.writes tr.write")
    expect(writes).to_have_count(3)  # the ledger's would-be writes of this world
    expect(writes.first).to_contain_text("create_task")
    shot(page, "2-calls-arrive")


def test_a_writes_diff_the_state_before_it_then_fork_and_reset(server: str, page: Page) -> None:
    created = call(server, "travel", "create_task", {"title": "Water the plants"})
    done = call(server, "travel", "complete_task", {"task_id": "T-1"})
    assert created["id"] == "T-2" and done["done"] is True
    page.goto(page_url(server, "/worlds/travel"))
    tasks = page.locator("table.collection[data-collection=tasks]")
    milk = tasks.locator("tr.row[data-key=T-1]")
    expect(milk).to_have_class(re.compile(r"\bchanged\b"))  # the last call completed it
    expect(milk.locator("td.changed-cell")).to_have_text("true")  # the cell it changed, and only that
    shot(page, "3-diff")

    page.locator("li.call[data-number='2'] a.before").click()  # the state just before the completion
    expect(page.locator("#state-title")).to_contain_text("just before call #2")
    expect(milk.locator("td.changed-cell")).to_have_count(0)
    expect(milk).to_contain_text("false")
    expect(tasks.locator("tr.row[data-key=T-2]")).to_have_count(1)  # call #1 is in it
    assert "at=2&side=before" in page.url  # the address names the moment: it can be shared or reloaded
    page.locator("li.call[data-number='1'] a.before").click()
    expect(tasks.locator("tr.row[data-key=T-2]")).to_have_count(0)  # before the create: not there yet
    shot(page, "4-before")
    page.locator("li.call[data-number='2'] a.after").focus()  # by keyboard: every control is a link or a button
    page.keyboard.press("Enter")
    expect(page.locator("#state-title")).to_contain_text("after call #2")
    expect(milk.locator("td.changed-cell")).to_have_text("true")

    answers = iter(["travel-copy"])
    page.on("dialog", lambda dialog: dialog.accept(next(answers, None)) if dialog.type == "prompt"
            else dialog.accept())
    page.locator(".world-head button.fork").click()
    page.wait_for_url(re.compile(r"/ui/worlds/travel-copy$"))
    expect(page.locator("li.call")).to_have_count(2)
    shot(page, "5-forked")
    page.locator(".world-head button.reset").click()
    expect(page.locator("li.call")).to_have_count(0)
    expect(page.locator(".timeline")).to_contain_text("No calls yet")
    shot(page, "6-reset")
    views = {name: httpx.get(page_url(server, f"/worlds/{name}/view.json"), timeout=10).json()
             for name in ("travel", "travel-copy")}
    assert len(views["travel"]["calls"]) == 2 and views["travel-copy"]["calls"] == []  # the origin is untouched
    assert call(server, "travel-copy", "create_task", {"title": "Again"})["id"] == "T-2"  # reset reached the state


def test_a_world_operation_from_another_site_is_refused(server: str) -> None:
    call(server, "guarded", "create_task", {"title": "Keep me"})
    refused = httpx.post(page_url(server, "/worlds/guarded/reset"), timeout=10)  # a cross-site form's request
    assert refused.status_code == 403 and "page's own buttons" in refused.json()["error"]
    foreign = httpx.get(page_url(server), headers={"Host": "evil.example"}, timeout=10)
    assert foreign.status_code in (403, 421)  # DNS rebinding: the SDK's Host check guards the page too
    assert len(httpx.get(page_url(server, "/worlds/guarded/view.json"), timeout=10).json()["calls"]) == 1
    missing = httpx.get(page_url(server, "/worlds/nowhere"), timeout=10)
    assert missing.status_code == 404 and "nowhere" in missing.text


def test_ui_opens_the_page_of_a_running_server_and_refuses_what_is_not_one(server: str) -> None:
    opened = subprocess.run(mcp_sim_command("ui", server, "--no-open"), env=subprocess_env(), capture_output=True,
                            text=True, timeout=60)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip() == f"world page: {page_url(server)}"
    nobody = subprocess.run(mcp_sim_command("ui", f"http://127.0.0.1:{free_port()}", "--no-open"),
                            env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert nobody.returncode != 0 and "cannot reach" in nobody.stderr and "Traceback" not in nobody.stderr


def test_bound_beyond_loopback_the_page_wants_the_token(page: Page) -> None:
    token = "page-token-123"
    os.environ["MCP_SIM_UI_TEST_TOKEN"] = token
    try:
        process, url = start_http_server(str(TODO), "--replay-only", "--host", "0.0.0.0", "--allow-remote",
                                         "--auth-token-env", "MCP_SIM_UI_TEST_TOKEN")
    finally:
        del os.environ["MCP_SIM_UI_TEST_TOKEN"]
    try:
        response = page.goto(page_url(url))
        assert response is not None and response.status == 401
        assert "mcp-sim worlds" not in page.content()
        assert httpx.get(page_url(url, "/worlds"), timeout=10).status_code == 401
        assert httpx.get(page_url(url), params={"token": "wrong"}, timeout=10).status_code == 401
        response = page.goto(page_url(url) + f"?token={token}")  # once; the page keeps it in a cookie
        assert response is not None and response.status == 200
        assert "token" not in page.url  # out of the address bar (and history)
        cookie = next(c for c in page.context.cookies() if c["name"] == UI_COOKIE)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        expect(page.locator("#worlds")).to_contain_text("No worlds yet")
        assert page.request.get(page_url(url, "/worlds")).status == 200  # the cookie opens the page's paths
        assert page.request.get(url.removesuffix("/mcp") + "/admin/worlds").status == 401  # and only those
    finally:
        stop(process)


def test_a_stdio_server_serves_the_page_on_its_ui_port(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(mcp_sim_command("serve", str(TODO), "--replay-only", "--ui-port", str(port)),
                               env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=(tmp_path / "stderr.log").open("wb"))
    try:
        wait_for_port(port, process)
        assert process.stdin is not None and process.stdout is not None
        for line in ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                     '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
                     '{"jsonrpc":"2.0","method":"notifications/initialized"}',
                     '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_task",'
                     '"arguments":{"title":"Over stdio"}}}'):
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
        answers = [process.stdout.readline() for _ in range(2)]
        assert b'"T-2"' in answers[1], answers
        view = httpx.get(f"http://127.0.0.1:{port}/ui/worlds/default/view.json", timeout=10).json()
        assert [c["tool"] for c in view["calls"]] == ["create_task"] and view["calls"][0]["source"] == "state"
        assert "world page: http://127.0.0.1:" in (tmp_path / "stderr.log").read_text()
    finally:
        if process.stdin:
            process.stdin.close()
        process.wait(timeout=30)
    assert process.returncode == 0
