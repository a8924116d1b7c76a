"""Live state with the real model, a real server over HTTP and the SDK's default client: random sequences of
creates, reads, lists, updates and deletes (hypothesis state machines), each checked against a plain dict of
what must hold. Every read-after-write, list-after-change and read-after-delete must agree, whatever the
model writes for the fields the state cannot say.

One server serves the stateful shipped specs and a CRUD API imported from a real OpenAPI document (the expanded
petstore of @readme/oas-examples); each hypothesis example runs in a world of its own.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from mcp import Client

from tests.conftest import REPO, SPECS, mcp_sim_command, start_http_server, stop, subprocess_env

PETSTORE = REPO / "node_modules" / "@readme" / "oas-examples" / "3.0" / "yaml" / "petstore-expanded.yaml"
# 10 runs of 20 steps: 200 steps per spec, as CI runs them (the issue asks for at least 200).
STEPS = settings(max_examples=10, stateful_step_count=20, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))
_worlds = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("imported")
    subprocess.run(mcp_sim_command("import", "openapi", str(PETSTORE), "--out", str(folder / "pets.yaml")),
                   env=subprocess_env(), check=True, capture_output=True)
    # The specs the machines use (not weather.yaml): a server warms every spec's prompt before its first call.
    process, url = start_http_server(*(str(SPECS / name) for name in ("files.yaml", "crm.yaml", "ops.yaml")),
                                     str(folder / "pets.yaml"))
    try:
        yield url
    finally:
        stop(process)


@dataclass
class Answer:
    is_error: bool
    value: Any  # structuredContent, or the text
    source: str


def call(url: str, world: str, tool: str, arguments: dict[str, Any]) -> Answer:
    async def go() -> Answer:
        async with Client(f"{url}?world={world}", read_timeout_seconds=300) as client:
            result = await client.call_tool(tool, arguments)
        meta = (result.meta or {}).get("mcp-sim/simulation", {})
        text = result.content[0].text if result.content and result.content[0].type == "text" else ""
        value = result.structured_content if result.structured_content is not None else text
        return Answer(bool(result.is_error), value, str(meta.get("source")))

    return anyio.run(go)


class World(RuleBasedStateMachine):
    url = ""
    prefix = ""

    def __init__(self) -> None:
        super().__init__()
        self.world = f"{self.prefix}-{next(_worlds)}"

    def call(self, tool: str, arguments: dict[str, Any]) -> Answer:
        return call(self.url, self.world, tool, arguments)

    def ok(self, tool: str, arguments: dict[str, Any]) -> Any:
        answer = self.call(tool, arguments)
        assert not answer.is_error, f"{tool}({arguments}) failed: {answer.value}"
        return answer.value


SEED_FILES = {"/notes/todo.txt": "buy milk\nfix login bug\n", "/config/app.json": '{"debug": false, "port": 8080}'}
PATHS = [*SEED_FILES, "/a.txt", "/b/c.txt", "/b/d.md"]


class Files(World):
    """tool_specs/files.yaml: write, read, list and delete files by path."""

    prefix = "files"

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, str] = dict(SEED_FILES)
        self.gone: set[str] = set()

    @rule(path=st.sampled_from(PATHS), content=st.sampled_from(["hello", "# Q3\nRevenue up 12%.", "x = 1\n"]))
    def write(self, path: str, content: str) -> None:
        answer = self.ok("write_file", {"path": path, "content": content})
        assert answer["path"] == path and answer["created"] == (path not in self.files)
        self.files[path] = content
        self.gone.discard(path)

    @rule(path=st.sampled_from(PATHS))
    def read(self, path: str) -> None:
        answer = self.ok("read_file", {"path": path})
        assert answer["path"] == path
        if path in self.files:
            assert answer["found"] is True and answer["content"] == self.files[path]
        elif path in self.gone:
            assert answer["found"] is False
        elif answer["found"]:  # never seen: the model decided, and the world keeps what it said
            self.files[path] = answer["content"]
        else:
            self.gone.add(path)

    @rule(prefix=st.sampled_from(["", "/b", "/notes", "/nothing"]))
    def listing(self, prefix: str) -> None:
        answer = self.ok("list_files", {"prefix": prefix})
        listed = [entry["path"] for entry in answer["files"]]
        assert sorted(listed) == sorted(p for p in self.files if p.startswith(prefix))
        assert answer["count"] == len(listed)

    @rule(path=st.sampled_from(PATHS))
    def delete(self, path: str) -> None:
        answer = self.call("delete_file", {"path": path})
        if path in self.files:
            assert not answer.is_error and answer.value == {"path": path, "deleted": True}
        elif path in self.gone:
            assert answer.is_error or answer.value["deleted"] is False
        self.files.pop(path, None)
        self.gone.add(path)


CUSTOMERS = {"C-1001": "Alice Moreno", "C-1002": "Ben Okafor", "C-1003": "Chen Wei", "C-1004": "Dana Kowalski",
             "C-1005": "Erik Lindqvist"}
SEED_TICKETS = {"T-5001": "C-1001", "T-5002": "C-1003", "T-5003": "C-1005", "T-5004": "C-1001"}


class Crm(World):
    """tool_specs/crm.yaml: tickets created and listed, customers read and searched."""

    prefix = "crm"

    def __init__(self) -> None:
        super().__init__()
        self.tickets: dict[str, dict[str, Any]] = {}  # created in this world, as create_ticket answered
        self.owners = dict(SEED_TICKETS)
        self.next = 5005

    @rule(customer=st.sampled_from(list(CUSTOMERS)), subject=st.sampled_from(["Zip broken", "Late parcel"]),
          priority=st.sampled_from(["low", "urgent"]))
    def create(self, customer: str, subject: str, priority: str) -> None:
        answer = self.ok("create_ticket", {"customer_id": customer, "subject": subject, "priority": priority})
        ticket = answer["ticket"]
        assert answer["customer_id"] == customer
        assert ticket["id"] == f"T-{self.next}"
        assert (ticket["subject"], ticket["priority"], ticket["status"]) == (subject, priority, "open")
        self.next += 1
        self.tickets[ticket["id"]] = ticket
        self.owners[ticket["id"]] = customer

    @rule(customer=st.sampled_from(list(CUSTOMERS)), status=st.sampled_from([None, "open", "closed"]))
    def listing(self, customer: str, status: str | None) -> None:
        arguments = {"customer_id": customer, **({"status": status} if status else {})}
        answer = self.ok("list_tickets", arguments)
        listed = {ticket["id"]: ticket for ticket in answer["tickets"]}
        mine = [tid for tid, owner in self.owners.items() if owner == customer]
        assert set(listed) <= set(mine) and answer["count"] == len(listed)
        if status is None:
            assert sorted(listed) == sorted(mine)
        for tid, ticket in self.tickets.items():
            if tid in listed:
                assert listed[tid] == ticket  # as written, created_at included
            elif self.owners[tid] == customer:
                assert status not in (None, "open")

    @rule(customer=st.sampled_from(list(CUSTOMERS)))
    def read(self, customer: str) -> None:
        answer = self.ok("get_customer", {"customer_id": customer})
        assert answer["found"] is True and answer["customer"]["id"] == customer
        assert answer["customer"]["name"] == CUSTOMERS[customer]

    @rule(query=st.sampled_from(["example.com", "Wei", "o", "nobody"]))
    def search(self, query: str) -> None:
        answer = self.ok("search_customers", {"query": query, "limit": 20})
        expected = {cid for cid, name in CUSTOMERS.items() if query.lower() in name.lower()}
        found = {customer["id"] for customer in answer["results"]}
        assert expected <= found and answer["total"] == len(found)


SERVICES = ["api", "web", "worker", "scheduler", "postgres"]


class Ops(World):
    """tool_specs/ops.yaml: a restart's outcome is what later status reads show."""

    prefix = "ops"

    def __init__(self) -> None:
        super().__init__()
        self.pids = {"api": 2211, "web": 2230, "worker": 3187, "scheduler": 1904, "postgres": 812}
        self.states = {"api": "running", "web": "running", "worker": "degraded", "scheduler": "running",
                       "postgres": "running"}
        self.restarted: set[str] = set()

    @rule(service=st.sampled_from(SERVICES))
    def restart(self, service: str) -> None:
        answer = self.ok("restart_service", {"service": service})
        assert answer["service"] == service
        self.pids[service], self.states[service] = answer["pid"], answer["state"]
        self.restarted.add(service)

    @rule(service=st.sampled_from(SERVICES))
    def status(self, service: str) -> None:
        answer = self.ok("get_service_status", {"service": service})
        assert (answer["service"], answer["state"], answer["pid"]) == (service, self.states[service],
                                                                       self.pids[service])
        if service in self.restarted:
            assert answer["uptime_s"] == 0


class Pets(World):
    """A CRUD API imported from a real OpenAPI document: addPet, find pet by id, findPets, deletePet."""

    prefix = "pets"

    def __init__(self) -> None:
        super().__init__()
        self.pets: dict[int, dict[str, Any]] = {}
        self.gone: set[int] = set()

    @rule(name=st.sampled_from(["Rex", "Tom"]), tag=st.sampled_from(["dog", "cat"]))
    def add(self, name: str, tag: str) -> None:
        pet = self.ok("addPet", {"name": name, "tag": tag})
        assert (pet["name"], pet["tag"]) == (name, tag)
        assert pet["id"] not in self.pets and pet["id"] not in self.gone  # a new key every time
        self.pets[pet["id"]] = pet

    @precondition(lambda self: bool(self.pets) or bool(self.gone))
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        pet_id = data.draw(st.sampled_from(sorted([*self.pets, *self.gone])))
        answer = self.call("find_pet_by_id", {"id": pet_id})
        if pet_id in self.pets:
            assert not answer.is_error and answer.value == self.pets[pet_id]
        else:
            assert answer.is_error and str(pet_id) in answer.value

    @rule()
    def listing(self) -> None:
        answer = self.ok("findPets", {})
        assert sorted(pet["id"] for pet in answer["result"]) == sorted(self.pets)

    @precondition(lambda self: bool(self.pets))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        pet_id = data.draw(st.sampled_from(sorted(self.pets)))
        self.call("deletePet", {"id": pet_id})
        del self.pets[pet_id]
        self.gone.add(pet_id)


@pytest.mark.parametrize("machine", [Files, Crm, Ops, Pets], ids=lambda m: m.prefix)
def test_reads_agree_with_every_write(server: str, machine: type[World]) -> None:
    machine.url = server
    run_state_machine_as_test(machine, settings=STEPS)


def _run_example(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], env=subprocess_env(), capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_dry_run_example_reads_back_what_it_wrote() -> None:
    steps = _run_example("examples/dry_run.py").split("\n> ")[1:]
    answers = {step.split("(", 1)[0]: json.loads(step.split("\n", 1)[1]) for step in steps}
    assert answers["read_file"]["content"] == "# Q3\nRevenue up 12%." and answers["read_file"]["found"] is True
    assert [entry["path"] for entry in answers["list_files"]["files"]] == ["/reports/q3.md"]
    assert answers["delete_file"] == {"path": "/reports/q3.md", "deleted": True}


def test_the_todo_walkthrough_answers_as_the_readme_shows() -> None:
    transcript = _run_example("examples/todo_walkthrough.py")
    readme = (REPO / "README.md").read_text()
    assert transcript.strip() and transcript.strip() in readme
