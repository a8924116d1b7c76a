"""Record the fidelity benchmark under tool_specs/fidelity/ from eleven real MCP servers.

For each server: `mcp-sim mirror` writes its spec; `mcp-sim record` proxies it while the scripted agent
below plays its sessions, each in a fresh sandbox (a new temporary directory, database, repository or
Redis instance); `mcp-sim learn` teaches the spec from the train session only, so no eval answer is in
the prompt. Eval sessions write, then read back what they wrote. Temporary directories are recorded as
/sandbox, so the traces hold no machine paths.

    ./scripts/fidelity-servers.sh                                  # the servers (pinned), once
    .venv/bin/python benchmarks/record_fidelity_benchmark.py          # every server
    .venv/bin/python benchmarks/record_fidelity_benchmark.py sqlite   # one
    .venv/bin/python benchmarks/record_fidelity_benchmark.py --specs-only   # mirror and learn again, same traces

The small three-server set in tool_specs/traces/ (the tests' fixture) is made by record_fidelity_traces.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

# The same child-process helpers as the first benchmark's recorder (run as a script: this folder is on the path).
from record_fidelity_traces import child_env, mcp_sim

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tool_specs" / "fidelity"
SERVERS_DIR = REPO / ".fidelity-servers"
VENV = SERVERS_DIR / "venv" / "bin"
VENV_MCP1 = SERVERS_DIR / "venv-mcp1" / "bin"
NODE_BIN = SERVERS_DIR / "node" / "node_modules" / ".bin"
SANDBOX = "/sandbox"
# Fixed identity and dates (git's internal format, which GitPython reads too): the git server's commits
# get the same author and time on every recording.
GIT_ENV = {"GIT_AUTHOR_NAME": "Ada Dev", "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada Dev",
           "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_AUTHOR_DATE": "1796032800 +0000",
           "GIT_COMMITTER_DATE": "1796032800 +0000"}

Call = tuple[str, dict[str, Any]]


@dataclass
class Server:
    command: Callable[[str, int], list[str]]  # (sandbox root, service port) -> argv
    sessions: Callable[[str], dict[str, list[Call]]]  # sandbox root -> {"train": [...], "eval-1": [...]}
    setup: Callable[[str, str], None] = lambda root, session: None  # prepares a session's sandbox
    redis: bool = False  # needs a private redis-server for each session
    env: dict[str, str] = field(default_factory=dict)


# --- time: stateless, the clock cannot be simulated ------------------------------------------------------

def time_sessions(_: str) -> dict[str, list[Call]]:
    convert = "convert_time"
    return {
        "train": [("get_current_time", {"timezone": "Europe/Paris"}),
                  (convert, {"source_timezone": "America/Los_Angeles", "time": "09:00",
                             "target_timezone": "Europe/Paris"}),
                  ("get_current_time", {"timezone": "Not/AZone"})],
        "eval-1": [("get_current_time", {"timezone": "UTC"}),
                   (convert, {"source_timezone": "Europe/London", "time": "16:30", "target_timezone": "Asia/Tokyo"}),
                   (convert, {"source_timezone": "America/New_York", "time": "08:15",
                              "target_timezone": "Australia/Sydney"}),
                   ("get_current_time", {"timezone": "Mars/Olympus_Mons"}),
                   (convert, {"source_timezone": "Asia/Kolkata", "time": "23:45", "target_timezone": "UTC"})],
        "eval-2": [("get_current_time", {"timezone": "America/Sao_Paulo"}),
                   (convert, {"source_timezone": "UTC", "time": "00:00", "target_timezone": "Pacific/Auckland"}),
                   (convert, {"source_timezone": "Europe/Berlin", "time": "25:00", "target_timezone": "UTC"}),
                   (convert, {"source_timezone": "Africa/Nairobi", "time": "12:30",
                              "target_timezone": "America/Chicago"}),
                   ("get_current_time", {"timezone": "Asia/Kathmandu"})],
    }


# --- filesystem: files written, read back, edited, moved, searched ----------------------------------------

def filesystem_sessions(root: str) -> dict[str, list[Call]]:
    return {
        "train": [("list_allowed_directories", {}),
                  ("create_directory", {"path": f"{root}/docs"}),
                  ("write_file", {"path": f"{root}/docs/readme.md", "content": "# Project\nRun make to build.\n"}),
                  ("read_text_file", {"path": f"{root}/docs/readme.md"}),
                  ("list_directory", {"path": f"{root}/docs"}),
                  ("edit_file", {"path": f"{root}/docs/readme.md",
                                 "edits": [{"oldText": "make", "newText": "make all"}]}),
                  ("move_file", {"source": f"{root}/docs/readme.md", "destination": f"{root}/docs/README.md"}),
                  ("search_files", {"path": root, "pattern": "*.md"}),
                  ("read_text_file", {"path": f"{root}/docs/absent.txt"})],
        "eval-1": [("list_allowed_directories", {}),
                   ("write_file", {"path": f"{root}/notes.txt", "content": "alpha\nbeta\n"}),
                   ("read_text_file", {"path": f"{root}/notes.txt"}),
                   ("list_directory", {"path": root}),
                   ("edit_file", {"path": f"{root}/notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
                   ("read_text_file", {"path": f"{root}/notes.txt"}),
                   ("read_text_file", {"path": f"{root}/missing.txt"}),
                   ("read_text_file", {"path": f"{root}/notes.txt", "head": 1})],
        "eval-2": [("create_directory", {"path": f"{root}/src"}),
                   ("write_file", {"path": f"{root}/src/app.py", "content": "def main():\n    return 42\n"}),
                   ("write_file", {"path": f"{root}/src/util.py", "content": "PI = 3.14\n"}),
                   ("list_directory", {"path": f"{root}/src"}),
                   ("read_multiple_files", {"paths": [f"{root}/src/app.py", f"{root}/src/util.py"]}),
                   ("search_files", {"path": root, "pattern": "*.py"}),
                   ("move_file", {"source": f"{root}/src/util.py", "destination": f"{root}/src/consts.py"}),
                   ("list_directory", {"path": f"{root}/src"}),
                   ("read_text_file", {"path": f"{root}/src/util.py"}),
                   ("read_text_file", {"path": f"{root}/src/consts.py"}),
                   ("list_directory_with_sizes", {"path": f"{root}/src"})],
        "eval-3": [("write_file", {"path": f"{root}/todo.md", "content": "- buy milk\n- call Bob\n"}),
                   ("edit_file", {"path": f"{root}/todo.md",
                                  "edits": [{"oldText": "- call Bob", "newText": "- call Bob\n- fix bike"}]}),
                   ("read_text_file", {"path": f"{root}/todo.md"}),
                   ("read_text_file", {"path": f"{root}/todo.md", "tail": 1}),
                   ("create_directory", {"path": f"{root}/archive"}),
                   ("move_file", {"source": f"{root}/todo.md", "destination": f"{root}/archive/todo.md"}),
                   ("directory_tree", {"path": root}),
                   ("read_text_file", {"path": f"{root}/archive/todo.md"}),
                   ("write_file", {"path": "/outside.txt", "content": "no"})],
    }


# --- memory: a knowledge graph built, changed and read back -----------------------------------------------

def memory_sessions(_: str) -> dict[str, list[Call]]:
    def entity(name: str, kind: str, *observations: str) -> dict[str, Any]:
        return {"name": name, "entityType": kind, "observations": list(observations)}

    return {
        "train": [("create_entities", {"entities": [entity("Ada Lovelace", "person", "wrote the first program")]}),
                  ("add_observations", {"observations": [{"entityName": "Ada Lovelace",
                                                          "contents": ["born in London"]}]}),
                  ("open_nodes", {"names": ["Ada Lovelace"]}),
                  ("search_nodes", {"query": "program"}),
                  ("delete_observations", {"deletions": [{"entityName": "Ada Lovelace",
                                                          "observations": ["born in London"]}]}),
                  ("read_graph", {})],
        "eval-1": [("create_entities", {"entities": [entity("Alice", "person", "works on rockets"),
                                                     entity("Acme", "company", "builds rockets")]}),
                   ("create_relations", {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]}),
                   ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["speaks French"]}]}),
                   ("open_nodes", {"names": ["Alice"]}),
                   ("search_nodes", {"query": "rockets"}),
                   ("read_graph", {})],
        "eval-2": [("create_entities", {"entities": [entity("Orion", "project", "deadline in March"),
                                                     entity("Mina", "person", "leads Orion"),
                                                     entity("Tom", "person", "tests Orion")]}),
                   ("create_relations", {"relations": [{"from": "Mina", "to": "Orion", "relationType": "leads"},
                                                       {"from": "Tom", "to": "Orion", "relationType": "tests"}]}),
                   ("open_nodes", {"names": ["Orion", "Tom"]}),
                   ("delete_relations", {"relations": [{"from": "Tom", "to": "Orion", "relationType": "tests"}]}),
                   ("delete_entities", {"entityNames": ["Tom"]}),
                   ("read_graph", {}),
                   ("search_nodes", {"query": "Tom"}),
                   ("add_observations", {"observations": [{"entityName": "Ghost", "contents": ["never existed"]}]})],
        "eval-3": [("create_entities", {"entities": [entity("Kyoto", "city", "old capital of Japan")]}),
                   ("add_observations", {"observations": [{"entityName": "Kyoto",
                                                           "contents": ["has 1600 temples", "hosts Gion Matsuri"]}]}),
                   ("search_nodes", {"query": "temples"}),
                   ("delete_observations", {"deletions": [{"entityName": "Kyoto",
                                                           "observations": ["old capital of Japan"]}]}),
                   ("open_nodes", {"names": ["Kyoto"]}),
                   ("create_entities", {"entities": [entity("Kyoto", "city")]}),
                   ("read_graph", {})],
    }


# --- git: a repository changed, committed, branched and read back ----------------------------------------

def git_setup(root: str, session: str) -> None:
    repo = Path(root) / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    git("init", "-q", "-b", "main")
    names = {"train": ("setup.cfg", "[tool]\nname = demo\n"), "eval-1": ("README.md", "# Demo\n"),
             "eval-2": ("app.py", "print('hi')\n"), "eval-3": ("LICENSE", "MIT\n")}
    name, text = names.get(session, ("README.md", "# Demo\n"))
    (repo / name).write_text(text)
    git("add", name)
    git("commit", "-q", "-m", "Initial commit")
    # The agent's edits (the git server cannot write files): one change to a tracked file, one new file.
    (repo / name).write_text(text + "More text.\n")
    (repo / "notes.txt").write_text(f"notes for {session}\n")


def git_sessions(root: str) -> dict[str, list[Call]]:
    repo = f"{root}/repo"
    return {
        "train": [("git_status", {"repo_path": repo}),
                  ("git_add", {"repo_path": repo, "files": ["setup.cfg"]}),
                  ("git_commit", {"repo_path": repo, "message": "Name the package"}),
                  ("git_log", {"repo_path": repo, "max_count": 2}),
                  ("git_create_branch", {"repo_path": repo, "branch_name": "docs"}),
                  ("git_branch", {"repo_path": repo, "branch_type": "local"}),
                  ("git_checkout", {"repo_path": repo, "branch_name": "nope"})],
        "eval-1": [("git_status", {"repo_path": repo}),
                   ("git_diff_unstaged", {"repo_path": repo}),
                   ("git_add", {"repo_path": repo, "files": ["README.md", "notes.txt"]}),
                   ("git_diff_staged", {"repo_path": repo}),
                   ("git_commit", {"repo_path": repo, "message": "Describe the demo"}),
                   ("git_log", {"repo_path": repo, "max_count": 5}),
                   ("git_status", {"repo_path": repo}),
                   ("git_show", {"repo_path": repo, "revision": "HEAD"})],
        "eval-2": [("git_create_branch", {"repo_path": repo, "branch_name": "feature-login"}),
                   ("git_checkout", {"repo_path": repo, "branch_name": "feature-login"}),
                   ("git_branch", {"repo_path": repo, "branch_type": "local"}),
                   ("git_add", {"repo_path": repo, "files": ["app.py"]}),
                   ("git_commit", {"repo_path": repo, "message": "Greet the user"}),
                   ("git_log", {"repo_path": repo, "max_count": 3}),
                   ("git_diff", {"repo_path": repo, "target": "main"}),
                   ("git_checkout", {"repo_path": repo, "branch_name": "no-such-branch"}),
                   ("git_status", {"repo_path": repo})],
        "eval-3": [("git_status", {"repo_path": repo}),
                   ("git_add", {"repo_path": repo, "files": ["notes.txt"]}),
                   ("git_reset", {"repo_path": repo}),
                   ("git_status", {"repo_path": repo}),
                   ("git_add", {"repo_path": repo, "files": ["LICENSE"]}),
                   ("git_commit", {"repo_path": repo, "message": "Extend the license"}),
                   ("git_log", {"repo_path": repo, "max_count": 1}),
                   ("git_show", {"repo_path": repo, "revision": "no-such-rev"})],
    }


# --- sqlite: tables created, rows inserted, updated, deleted and queried ------------------------------------

def sqlite_sessions(_: str) -> dict[str, list[Call]]:
    return {
        "train": [("create_table", {"query": "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT, year INTEGER)"}),
                  ("write_query", {"query": "INSERT INTO books (title, year) VALUES ('Dune', 1965), ('Emma', 1815)"}),
                  ("read_query", {"query": "SELECT * FROM books ORDER BY year"}),
                  ("list_tables", {}),
                  ("describe_table", {"table_name": "books"}),
                  ("read_query", {"query": "SELECT * FROM nowhere"}),
                  ("append_insight", {"insight": "Most books are older than 1900."})],
        "eval-1": [("create_table", {"query": "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, "
                                              "price REAL, stock INTEGER)"}),
                   ("write_query", {"query": "INSERT INTO products (name, price, stock) VALUES "
                                             "('Widget', 9.99, 120), ('Gadget', 24.5, 15), ('Doohickey', 3.75, 0)"}),
                   ("read_query", {"query": "SELECT name, price FROM products ORDER BY price DESC"}),
                   ("write_query", {"query": "UPDATE products SET stock = 40 WHERE name = 'Doohickey'"}),
                   ("read_query", {"query": "SELECT name, stock FROM products WHERE stock < 50"}),
                   ("write_query", {"query": "DELETE FROM products WHERE name = 'Gadget'"}),
                   ("read_query", {"query": "SELECT COUNT(*) AS n FROM products"}),
                   ("list_tables", {}),
                   ("describe_table", {"table_name": "products"})],
        "eval-2": [("create_table", {"query": "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT)"}),
                   ("create_table", {"query": "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, "
                                              "total REAL)"}),
                   ("write_query", {"query": "INSERT INTO customers (name, city) VALUES ('Lena', 'Oslo'), "
                                             "('Raj', 'Pune')"}),
                   ("write_query", {"query": "INSERT INTO orders (customer_id, total) VALUES (1, 30.0), (1, 12.5), "
                                             "(2, 99.9)"}),
                   ("read_query", {"query": "SELECT c.name, SUM(o.total) AS spent FROM customers c JOIN orders o "
                                            "ON o.customer_id = c.id GROUP BY c.name ORDER BY spent DESC"}),
                   ("list_tables", {}),
                   ("append_insight", {"insight": "Raj spends the most per order."}),
                   ("read_query", {"query": "SELECT name FROM customers WHERE city = 'Oslo'"}),
                   ("write_query", {"query": "INSERT INTO missing_table VALUES (1)"}),
                   ("read_query", {"query": "DELETE FROM customers"})],
        "eval-3": [("create_table", {"query": "CREATE TABLE tasks (id INTEGER PRIMARY KEY, title TEXT, done INTEGER)"}),
                   ("write_query", {"query": "INSERT INTO tasks (title, done) VALUES ('Write report', 0), "
                                             "('Review PR', 1), ('Plan sprint', 0)"}),
                   ("read_query", {"query": "SELECT title FROM tasks WHERE done = 0 ORDER BY id"}),
                   ("write_query", {"query": "UPDATE tasks SET done = 1 WHERE title = 'Write report'"}),
                   ("read_query", {"query": "SELECT id, title, done FROM tasks ORDER BY id"}),
                   ("describe_table", {"table_name": "tasks"}),
                   ("write_query", {"query": "DELETE FROM tasks WHERE done = 1"}),
                   ("read_query", {"query": "SELECT title FROM tasks"}),
                   ("write_query", {"query": "INSERT INTO tasks (title, done) VALUES ('Ship it', 0)"}),
                   ("describe_table", {"table_name": "ghosts"})],
    }


# --- duckdb: another dialect (SHOW TABLES, DESCRIBE, ALTER TABLE ... ADD COLUMN), rows as Python tuples -----

def duckdb_sessions(_: str) -> dict[str, list[Call]]:
    def query(sql: str) -> Call:
        return ("query", {"query": sql})

    return {
        "train": [query("CREATE TABLE books (id INTEGER, title VARCHAR, year INTEGER)"),
                  query("INSERT INTO books VALUES (1, 'Dune', 1965), (2, 'Emma', 1815)"),
                  query("SELECT title, year FROM books ORDER BY year"),
                  query("SHOW TABLES"),
                  query("DESCRIBE books"),
                  query("SELECT * FROM nowhere")],
        "eval-1": [query("CREATE TABLE products (id INTEGER, name VARCHAR, price DOUBLE, stock INTEGER)"),
                   query("INSERT INTO products VALUES (1, 'Widget', 9.99, 120), (2, 'Gadget', 24.5, 15), "
                         "(3, 'Doohickey', 3.75, 0)"),
                   query("SELECT name, price FROM products ORDER BY price DESC"),
                   query("UPDATE products SET stock = 40 WHERE name = 'Doohickey'"),
                   query("SELECT name, stock FROM products WHERE stock < 50 ORDER BY name"),
                   query("DELETE FROM products WHERE name = 'Gadget'"),
                   query("SELECT count(*) FROM products"),
                   query("SHOW TABLES")],
        "eval-2": [query("CREATE TABLE customers (id INTEGER, name VARCHAR, city VARCHAR)"),
                   query("INSERT INTO customers VALUES (1, 'Lena', 'Oslo'), (2, 'Raj', 'Pune')"),
                   query("ALTER TABLE customers ADD COLUMN vip BOOLEAN DEFAULT false"),
                   query("DESCRIBE customers"),
                   query("UPDATE customers SET vip = true WHERE city = 'Pune'"),
                   query("SELECT name, vip FROM customers ORDER BY id"),
                   query("INSERT INTO missing_table VALUES (1)"),
                   query("SELECT name FROM customers WHERE city = 'Oslo'")],
        "eval-3": [query("CREATE TABLE tasks (id INTEGER, title VARCHAR, done BOOLEAN)"),
                   query("INSERT INTO tasks VALUES (1, 'Write report', false), (2, 'Review PR', true), "
                         "(3, 'Plan sprint', false)"),
                   query("SELECT title FROM tasks WHERE NOT done ORDER BY id"),
                   query("SHOW TABLES"),
                   query("DELETE FROM tasks WHERE done"),
                   query("SELECT id, title FROM tasks ORDER BY id"),
                   query("SELEC title FROM tasks"),
                   query("SELECT count(*) AS open FROM tasks")],
        "eval-4": [query("CREATE TABLE events (id INTEGER, kind VARCHAR, day DATE)"),
                   query("INSERT INTO events VALUES (1, 'signup', DATE '2026-01-05'), (2, 'login', DATE '2026-01-06'), "
                         "(3, 'login', DATE '2026-01-07')"),
                   query("SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"),
                   query("SELECT max(day) FROM events"),
                   query("CREATE TABLE kinds AS SELECT DISTINCT kind FROM events"),
                   query("SHOW TABLES"),
                   query("DESCRIBE events"),
                   query("DROP TABLE kinds"),
                   query("SHOW TABLES")],
        "eval-5": [query("CREATE TABLE notes (id INTEGER PRIMARY KEY, body VARCHAR NOT NULL)"),
                   query("INSERT INTO notes VALUES (1, 'first')"),
                   query("INSERT INTO notes VALUES (1, 'again')"),
                   query("INSERT INTO notes (id) VALUES (2)"),
                   query("ALTER TABLE notes ADD COLUMN pinned BOOLEAN"),
                   query("UPDATE notes SET pinned = true"),
                   query("SELECT * FROM notes"),
                   query("SELECT upper(body) AS loud FROM notes"),
                   query("DELETE FROM notes")],
    }


# --- everything: the reference server's text tools (echo, annotated messages), a structured one, a sum -----

def everything_sessions(_: str) -> dict[str, list[Call]]:
    return {
        "train": [("echo", {"message": "hello there"}),
                  ("get-annotated-message", {"messageType": "success"}),
                  ("get-structured-content", {"location": "Chicago"}),
                  ("get-sum", {"a": 2, "b": 3})],
        "eval-1": [("echo", {"message": "rehearse the deploy"}),
                   ("get-sum", {"a": 40, "b": 2}),
                   ("get-annotated-message", {"messageType": "debug"}),
                   ("get-structured-content", {"location": "New York"}),
                   ("echo", {"message": "second message, with a comma"})],
        "eval-2": [("get-structured-content", {"location": "Los Angeles"}),
                   ("echo", {"message": "ünïcode ✓"}),
                   ("get-annotated-message", {"messageType": "debug"}),
                   ("get-sum", {"a": -7, "b": 7.5}),
                   ("get-annotated-message", {"messageType": "error"}),
                   ("echo", {"message": "x"})],
        "eval-3": [("echo", {"message": "one"}),
                   ("echo", {"message": "two words"}),
                   ("get-structured-content", {"location": "New York"}),
                   ("get-sum", {"a": 1000, "b": 24}),
                   ("get-annotated-message", {"messageType": "debug"})],
        "eval-4": [("get-annotated-message", {"messageType": "error"}),
                   ("echo", {"message": "status: green"}),
                   ("get-sum", {"a": 0.1, "b": 0.2}),
                   ("get-structured-content", {"location": "Los Angeles"}),
                   ("echo", {"message": "hello again"}),
                   ("get-annotated-message", {"messageType": "debug"})],
        "eval-5": [("echo", {"message": "the last session"}),
                   ("get-structured-content", {"location": "New York"}),
                   ("get-sum", {"a": 12, "b": 30}),
                   ("get-annotated-message", {"messageType": "debug"}),
                   ("echo", {"message": "42"}),
                   ("get-annotated-message", {"messageType": "error"})],
        "eval-6": [("echo", {"message": "dry run of the migration"}),
                   ("get-sum", {"a": 3, "b": 4}),
                   ("echo", {"message": "rollback plan ready"}),
                   ("get-annotated-message", {"messageType": "error"}),
                   ("get-structured-content", {"location": "Los Angeles"}),
                   ("echo", {"message": "done"})],
    }


# --- calculator: pure computation (reported apart: a world model does not compute) ------------------------

def calculator_sessions(_: str) -> dict[str, list[Call]]:
    def calculate(expression: str) -> Call:
        return ("calculate", {"expression": expression})

    return {
        "train": [calculate("2 + 3"), calculate("10 / 4"), calculate("2 ** 10")],
        "eval-1": [calculate("7 * 6"), calculate("100 - 58"), calculate("(3 + 4) * 5"), calculate("1 / 0")],
        "eval-2": [calculate("17 % 5"), calculate("2.5 * 4"), calculate("sqrt(16)"), calculate("9 ** 0.5")],
        "eval-3": [calculate("123 + 877"), calculate("-3 * -3"), calculate("abc + 1"), calculate("1e3 / 8")],
        "eval-4": [calculate("6 * 7 + 1"), calculate("2 ** 0.5"), calculate("(1 + 2) / 3"), calculate("5 - 10")],
    }


# --- taskmanager: JSON in text (no outputSchema), requests and tasks planned, done, approved ---------------

def taskmanager_sessions(_: str) -> dict[str, list[Call]]:
    def plan(request: str, *tasks: tuple[str, str]) -> Call:
        return ("request_planning", {"originalRequest": request,
                                     "tasks": [{"title": title, "description": text} for title, text in tasks]})

    return {
        "train": [plan("Ship the newsletter", ("Draft", "Write the first draft"), ("Review", "Ask Bo to review")),
                  ("get_next_task", {"requestId": "req-1"}),
                  ("mark_task_done", {"requestId": "req-1", "taskId": "task-1", "completedDetails": "Drafted"}),
                  ("approve_task_completion", {"requestId": "req-1", "taskId": "task-1"}),
                  ("open_task_details", {"taskId": "task-2"}),
                  ("list_requests", {}),
                  ("get_next_task", {"requestId": "req-9"}),
                  ("open_task_details", {"taskId": "task-77"})],
        "eval-1": [plan("Move the office", ("Pack", "Pack the boxes"), ("Book van", "Book a van for Friday"),
                        ("Unpack", "Unpack at the new place")),
                   ("get_next_task", {"requestId": "req-1"}),
                   ("mark_task_done", {"requestId": "req-1", "taskId": "task-1"}),
                   ("approve_task_completion", {"requestId": "req-1", "taskId": "task-1"}),
                   ("get_next_task", {"requestId": "req-1"}),
                   ("open_task_details", {"taskId": "task-3"}),
                   ("mark_task_done", {"requestId": "req-1", "taskId": "task-2", "completedDetails": "Van booked"}),
                   ("open_task_details", {"taskId": "task-2"}),
                   ("approve_task_completion", {"requestId": "req-1", "taskId": "task-3"}),
                   ("get_next_task", {"requestId": "req-4"})],
        "eval-2": [plan("Fix the login bug", ("Reproduce", "Find the failing case"), ("Patch", "Fix the check")),
                   plan("Update the docs", ("Docs", "Describe the new flag")),
                   ("list_requests", {}),
                   ("get_next_task", {"requestId": "req-2"}),
                   ("mark_task_done", {"requestId": "req-2", "taskId": "task-3", "completedDetails": "Written"}),
                   ("approve_task_completion", {"requestId": "req-2", "taskId": "task-3"}),
                   ("get_next_task", {"requestId": "req-2"}),
                   ("approve_request_completion", {"requestId": "req-2"}),
                   ("open_task_details", {"taskId": "task-1"}),
                   ("open_task_details", {"taskId": "task-42"})],
    }


# --- redis: keys set, read back, listed, deleted --------------------------------------------------------

def redis_sessions(_: str) -> dict[str, list[Call]]:
    return {
        "train": [("set", {"key": "greeting", "value": "hello"}),
                  ("get", {"key": "greeting"}),
                  ("list", {"pattern": "*"}),
                  ("delete", {"key": "greeting"}),
                  ("get", {"key": "greeting"})],
        "eval-1": [("set", {"key": "user:1:name", "value": "Alice"}),
                   ("set", {"key": "user:2:name", "value": "Bob"}),
                   ("get", {"key": "user:1:name"}),
                   ("list", {"pattern": "user:*"}),
                   ("delete", {"key": "user:2:name"}),
                   ("list", {"pattern": "user:*"}),
                   ("get", {"key": "user:2:name"}),
                   ("set", {"key": "user:1:name", "value": "Alicia"}),
                   ("get", {"key": "user:1:name"})],
        "eval-2": [("set", {"key": "session:abc", "value": "{\"cart\": [3, 7]}", "expireSeconds": 3600}),
                   ("get", {"key": "session:abc"}),
                   ("set", {"key": "config:theme", "value": "dark"}),
                   ("set", {"key": "config:lang", "value": "fr"}),
                   ("list", {"pattern": "config:*"}),
                   ("delete", {"key": ["config:theme", "config:lang"]}),
                   ("list", {"pattern": "*"}),
                   ("get", {"key": "config:lang"})],
        "eval-3": [("list", {"pattern": "*"}),
                   ("set", {"key": "counter", "value": "41"}),
                   ("get", {"key": "counter"}),
                   ("set", {"key": "queue:jobs", "value": "resize,email,backup"}),
                   ("get", {"key": "queue:jobs"}),
                   ("delete", {"key": "counter"}),
                   ("delete", {"key": "counter"}),
                   ("list", {"pattern": "*"})],
    }


# --- sequential-thinking: a thought history that grows and branches ---------------------------------------

def thinking_sessions(_: str) -> dict[str, list[Call]]:
    def thought(text: str, number: int, total: int, more: bool, **extra: Any) -> Call:
        return ("sequentialthinking", {"thought": text, "thoughtNumber": number, "totalThoughts": total,
                                       "nextThoughtNeeded": more, **extra})

    return {
        "train": [thought("List what the migration touches.", 1, 2, True),
                  thought("Only the users table changes.", 2, 2, False)],
        "eval-1": [thought("The bug shows only on Mondays: look at date handling.", 1, 3, True),
                   thought("The week starts on Sunday in the US locale.", 2, 3, True),
                   thought("Fix: use ISO weeks everywhere.", 3, 3, False)],
        "eval-2": [thought("Estimate the load: 2k requests per second at peak.", 1, 4, True),
                   thought("One node handles 800 per second.", 2, 4, True),
                   thought("Maybe caching halves the load instead.", 3, 4, True, branchFromThought=2,
                           branchId="cache"),
                   thought("Three nodes, or two with caching.", 4, 4, False)],
        "eval-3": [thought("Which queue fits: Kafka or Redis streams?", 1, 3, True),
                   thought("Retention of 30 days rules Redis out.", 2, 3, True),
                   thought("Revisit: the data is small, Redis keeps it.", 2, 3, True, isRevision=True,
                           revisesThought=2),
                   thought("Redis streams, with daily trimming.", 3, 3, False)],
        "eval-5": [thought("Pick a name for the service.", 1, 2, True),
                   thought("Short names read better in logs.", 2, 2, True, needsMoreThoughts=True),
                   thought("Try two options on a branch.", 3, 4, True, branchFromThought=2, branchId="naming"),
                   thought("A second branch for a longer name.", 4, 5, True, branchFromThought=2, branchId="long"),
                   thought("Back on the first branch: 'relay' wins.", 5, 5, True, branchFromThought=3,
                           branchId="naming"),
                   thought("Done: call it relay.", 6, 6, False)],
        "eval-4": [thought("Why is the build slow? Measure each stage first.", 1, 3, True),
                   thought("Tests take 80 percent of the time.", 2, 3, True),
                   thought("Run the tests in four shards.", 3, 3, True, needsMoreThoughts=True),
                   thought("Also cache the dependencies between runs.", 4, 4, False)],
    }


SERVERS: dict[str, Server] = {
    "time": Server(lambda root, port: [str(VENV / "python"), "-m", "mcp_server_time", "--local-timezone", "UTC"],
                   time_sessions),
    "filesystem": Server(lambda root, port: [str(NODE_BIN / "mcp-server-filesystem"), root], filesystem_sessions),
    "memory": Server(lambda root, port: [str(NODE_BIN / "mcp-server-memory")], memory_sessions),
    "git": Server(lambda root, port: [str(VENV / "mcp-server-git"), "--repository", f"{root}/repo"], git_sessions,
                  setup=git_setup, env=GIT_ENV),
    "sqlite": Server(lambda root, port: [str(VENV_MCP1 / "mcp-server-sqlite"), "--db-path", f"{root}/shop.db"],
                     sqlite_sessions),
    "duckdb": Server(lambda root, port: [str(VENV_MCP1 / "mcp-server-duckdb"), "--db-path", f"{root}/shop.duckdb"],
                     duckdb_sessions),
    "redis": Server(lambda root, port: [str(NODE_BIN / "mcp-server-redis"), f"redis://127.0.0.1:{port}"],
                    redis_sessions, redis=True),
    "everything": Server(lambda root, port: [str(NODE_BIN / "mcp-server-everything")], everything_sessions),
    "calculator": Server(lambda root, port: [str(VENV_MCP1 / "mcp-server-calculator")], calculator_sessions),
    "taskmanager": Server(lambda root, port: [str(NODE_BIN / "mcp-taskmanager")], taskmanager_sessions),
    "sequential-thinking": Server(lambda root, port: [str(NODE_BIN / "mcp-server-sequential-thinking")],
                                  thinking_sessions, env={"DISABLE_THOUGHT_LOGGING": "true"}),
}




def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def redis_instance(root: str, wanted: bool) -> Iterator[int]:
    """A private, empty redis-server (no persistence) for one session; port 0 when not wanted."""
    if not wanted:
        yield 0
        return
    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", root], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


async def play(command: list[str], env: dict[str, str], calls: list[Call], session: str) -> None:
    async with Client(StdioServerParameters(command=command[0], args=command[1:], env=env), mode="legacy") as agent:
        await agent.list_tools()
        for tool, arguments in calls:
            result = await agent.call_tool(tool, arguments)
            print(f"  {session} {tool}: {'error' if result.is_error else 'ok'}", file=sys.stderr)


def record_session(name: str, session: str, trace: Path) -> None:
    """Play one scripted session through `mcp-sim record` in a fresh sandbox."""
    server = SERVERS[name]
    with tempfile.TemporaryDirectory(prefix=f"mcp-sim-{name}-") as scratch:
        root = os.path.realpath(scratch)
        server.setup(root, session)
        env = child_env(MEMORY_FILE_PATH=str(Path(root) / "memory.jsonl"),
                        TASK_MANAGER_FILE_PATH=str(Path(root) / "tasks.json"), **server.env)
        with redis_instance(root, server.redis) as port:
            command = mcp_sim("record", "--out", str(trace), "--session", f"{name}-{session}",
                              "--replace", f"{root}={SANDBOX}", "--", *server.command(root, port))
            anyio.run(play, command, env, server.sessions(root)[session], f"{name}-{session}")


def mirror(name: str, spec: Path) -> None:
    server = SERVERS[name]
    with tempfile.TemporaryDirectory() as scratch:
        root = os.path.realpath(scratch)
        server.setup(root, "train")
        with redis_instance(root, server.redis) as port:
            subprocess.run(mcp_sim("mirror", "--out", str(spec), "--", *server.command(root, port)),
                           env=child_env(TASK_MANAGER_FILE_PATH=str(Path(root) / "tasks.json"), **server.env),
                           check=True)


def regenerate(name: str, specs_only: bool) -> None:
    """Mirror the server, record its sessions (unless `specs_only`: the recorded ones are kept), learn."""
    spec, train, trace = OUT / f"{name}.yaml", OUT / f"{name}.train.jsonl", OUT / f"{name}.jsonl"
    mirror(name, spec)
    if not specs_only:
        for path in (train, trace):
            path.unlink(missing_ok=True)
        record_session(name, "train", train)
        for session in SERVERS[name].sessions(SANDBOX):
            if session != "train":
                record_session(name, session, trace)
    subprocess.run(mcp_sim("learn", str(train), "--spec", str(spec)), env=child_env(), check=True)


def main() -> None:
    names = [arg for arg in sys.argv[1:] if not arg.startswith("--")] or list(SERVERS)
    # What the chosen servers need: their program, redis-server for redis, git for git's sandbox.
    missing = [SERVERS[name].command(SANDBOX, 0)[0] for name in names
               if not Path(SERVERS[name].command(SANDBOX, 0)[0]).exists()]
    missing += [tool for tool, wanted in (("redis-server", "redis" in names), ("git", "git" in names))
                if wanted and shutil.which(tool) is None]
    if missing:
        sys.exit(f"run ./scripts/fidelity-servers.sh first (missing: {', '.join(missing)})")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        print(f"{name}:", file=sys.stderr)
        regenerate(name, specs_only="--specs-only" in sys.argv[1:])


if __name__ == "__main__":
    main()
