"""Fuzz one real `mcp-sim serve` over stdio with hostile lines: each request gets a JSON-RPC error or an isError
result (a notification gets nothing), the process stays up, and a real model call right after still succeeds.

Run it under the model lock (the server loads the model); the summary of cases per input class is printed at
the end of the module.
"""

from __future__ import annotations

import functools
import itertools
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sim.base import defaults
from tests import fuzz_cases as fc
from tests.conftest import SPECS, mcp_sim_command, stop, subprocess_env

ANSWER_TIMEOUT_S = 60.0
TALLY = fc.Tally()


class StdioPeer:
    """The client end of a server's stdin/stdout, reading every line it answers on a thread."""

    def __init__(self, process: subprocess.Popen[bytes]):
        self.process = process
        self.answers: queue.Queue[Any] = queue.Queue()
        self._ids = itertools.count(1)
        self._int_ids = itertools.count(1_000_000)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                self.answers.put(AssertionError(f"not a JSON-RPC line on stdout: {line[:200]!r}"))

    def next_id(self) -> str:
        return f"fuzz-{next(self._ids):07d}"  # fixed width: the drawn cases must not depend on it

    def reserve(self, count: int) -> int:
        """The first of `count` consecutive integer ids no other case uses."""
        first = next(self._int_ids)
        self._int_ids = itertools.count(first + count)
        return first

    def send(self, body: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(body + b"\n")
        self.process.stdin.flush()

    def receive(self, deadline: float, waiting_for: Callable[[], str]) -> dict[str, Any]:
        try:
            message = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            alive = "alive" if self.process.poll() is None else f"exited with {self.process.returncode}"
            raise AssertionError(f"no answer within {ANSWER_TIMEOUT_S} s for {waiting_for()} (server {alive})") \
                from None
        if isinstance(message, Exception):
            raise message
        return message

    def exchange(self, case: fc.Case) -> list[dict[str, Any]]:
        """Send `case`, then a ping; return the case's answers once every one owed and the ping's are in.

        An answer the case does not owe fails here (or in the next exchange, if it comes after the ping's).
        """
        sentinel = self.next_id()
        self.send(case.body)
        self.send(fc.dumps(fc.request(sentinel, "ping")))
        owed, got, pinged = list(case.answers), [], False
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while owed or not pinged:
            message = self.receive(deadline, functools.partial(describe_wait, case, owed, pinged))
            if "method" in message:
                continue  # the server's own notifications
            if message.get("id") == sentinel:
                assert message.get("result") == {}, f"the ping after {case!r} got {message}"
                pinged = True
                continue
            slot = next((s for s in owed if message.get("id") in s), None)
            assert slot is not None, f"an answer nobody was owed after {case!r}: {str(message)[:300]}"
            owed.remove(slot)
            got.append(message)
        return got

    def check(self, case: fc.Case) -> None:
        answers = self.exchange(case)
        for answer in answers:
            assert fc.is_error_answer(answer), f"{case!r} got no error: {str(answer)[:300]}"
        TALLY.add(case, outcome(answers))

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        rid = self.next_id()
        case = fc.Case("valid-call", fc.dumps(fc.call(rid, name, arguments)), fc.one(rid))
        (answer,) = self.exchange(case)
        return answer


def describe_wait(case: fc.Case, owed: list[fc.Slot], pinged: bool) -> str:
    return f"{case!r} (still owed: {owed[:5]}{'...' if len(owed) > 5 else ''}; ping answered: {pinged})"


def outcome(answers: list[dict[str, Any]]) -> str:
    if not answers:
        return "no answer (notification)"
    first = answers[0]
    kind = f"error {first['error']['code']}" if "error" in first else "isError result"
    return kind + (" for each request id" if len(answers) > 1 else "")


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[StdioPeer]:
    stderr = tmp_path_factory.mktemp("fuzz-stdio") / "serve.log"
    started = time.monotonic()
    with stderr.open("wb") as sink:
        process = subprocess.Popen(mcp_sim_command("serve", str(SPECS / "ops.yaml"), "--max-tokens", "32"),
                                   env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink)
    client = StdioPeer(process)
    initialize(client)
    try:
        yield client
    finally:
        if process.poll() is None:
            stop(process)
        report(pytestconfig, stderr, time.monotonic() - started)


def initialize(client: StdioPeer) -> None:
    rid = client.next_id()
    client.send(fc.dumps(fc.request(rid, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                        "clientInfo": {"name": "fuzz", "version": "1"}})))
    answer = client.receive(time.monotonic() + ANSWER_TIMEOUT_S, lambda: "initialize")
    assert answer["id"] == rid and "result" in answer, answer
    client.send(fc.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))


def report(config: pytest.Config, stderr: Path, seconds: float) -> None:
    TALLY.report(config, f"stdio fuzz summary ({seconds:.0f} s with the server's start)")
    assert "Traceback" not in stderr.read_text(errors="replace"), "the server logged a traceback"


def still_serving(client: StdioPeer) -> None:
    """The process is up and a real model call succeeds."""
    assert client.process.poll() is None
    answer = client.call_tool(*fc.VALID_CALL)
    assert answer["result"]["isError"] is False, answer
    assert answer["result"]["_meta"]["mcp-sim/simulation"]["simulated"] is True


def fuzz(client: StdioPeer, strategy: Callable[[Any], st.SearchStrategy[fc.Case]], examples: int) -> None:
    @settings(fc.FUZZ, max_examples=examples)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        client.check(data.draw(strategy(client.next_id())))

    run()
    still_serving(client)


def test_malformed_json(peer: StdioPeer) -> None:
    fuzz(peer, fc.malformed_json, 80)


def test_invalid_utf8(peer: StdioPeer) -> None:
    fuzz(peer, fc.bad_utf8, 40)


def test_wrong_jsonrpc_shapes(peer: StdioPeer) -> None:
    fuzz(peer, fc.wrong_shape, 80)


def test_unknown_methods(peer: StdioPeer) -> None:
    fuzz(peer, fc.unknown_method, 60)


def test_arguments_of_every_wrong_type(peer: StdioPeer) -> None:
    fuzz(peer, fc.wrong_arguments, 80)


def test_10mb_strings(peer: StdioPeer) -> None:
    fuzz(peer, fc.huge_string, 10)


def test_nesting_up_to_10000_levels(peer: StdioPeer) -> None:
    fuzz(peer, fc.deep_nesting, 60)


def test_a_request_nested_3000_levels_is_answered_with_its_id(peer: StdioPeer) -> None:
    rid = peer.next_id()
    body = b'{"jsonrpc":"2.0","id":"%s","method":"tools/call","params":{"name":"get_service_status",' \
        b'"arguments":{"service":%s}}}' % (rid.encode(), b"[" * 3000 + b"]" * 3000)
    (answer,) = peer.exchange(fc.Case("deep-nesting", body, fc.one(rid)))
    assert answer["error"]["code"] == -32700
    assert "recursion limit exceeded" in answer["error"]["message"]
    TALLY.add(fc.Case("deep-nesting", body, fc.one(rid)), outcome([answer]))


@pytest.mark.parametrize("where", ["id-first", "id-past-the-head"])
def test_a_line_over_the_limit_is_answered_and_the_next_line_is_served(peer: StdioPeer, where: str) -> None:
    """The line is skipped without being held (tests/test_stdio_line_limit.py counts that); its answer carries the
    id when the head of the line holds it. `exchange` sends a ping after it, which must be answered."""
    rid = peer.next_id()
    arguments = {"service": "x" * (defaults.STDIO_MAX_LINE_CHARS + 1_000_000)}
    message = fc.call(rid, "get_service_status", arguments)
    if where == "id-past-the-head":
        message = {"params": message.pop("params"), **message}
    case = fc.Case("overlong-line", fc.dumps(message), fc.one(rid if where == "id-first" else None))
    (answer,) = peer.exchange(case)
    assert answer["error"]["code"] == -32600
    assert f"over the server's limit of {defaults.STDIO_MAX_LINE_CHARS:,} characters" in answer["error"]["message"]
    TALLY.add(case, f"{outcome([answer])}, {'its id' if answer['id'] == rid else 'id null'}")
    still_serving(peer)


def test_a_line_of_exactly_the_limit_is_read_as_before(peer: StdioPeer) -> None:
    rid = peer.next_id()
    empty = fc.dumps(fc.call(rid, "get_service_status", {"service": ""}))
    body = fc.dumps(fc.call(rid, "get_service_status", {"service": "x" * (defaults.STDIO_MAX_LINE_CHARS - len(empty))}))
    assert len(body) == defaults.STDIO_MAX_LINE_CHARS
    case = fc.Case("overlong-line", body, fc.one(rid))
    (answer,) = peer.exchange(case)
    assert answer["result"]["isError"] is True and "--max-argument-bytes" in answer["result"]["content"][0]["text"]
    TALLY.add(case, "at the limit: read, isError naming --max-argument-bytes")


def test_huge_batches(peer: StdioPeer) -> None:
    fuzz(peer, lambda _: fc.huge_batch(peer.reserve(300)), 25)
    peer.check(fc.batch(peer.reserve(10_000), ["ping"] * 10_000))


def test_when_the_client_closes_the_lines_it_sent_are_answered_and_the_server_exits(peer: StdioPeer) -> None:
    """The last test, as it closes stdin: over stdio nothing can come after the close. What the transport refuses
    is answered before the server sees the end of input; requests already handed to the SDK's dispatcher are
    answered or cancelled at the close (a model call still decoding is not left running); the process exits 0."""
    model_call, listing, *refused = [peer.next_id() for _ in range(6)]
    peer.send(fc.dumps(fc.call(model_call, *fc.VALID_CALL)))
    peer.send(fc.dumps(fc.request(listing, "tools/list")))
    peer.send(b'{"jsonrpc":"2.0","id":"%s","method":"tools/li' % refused[0].encode())
    peer.send(b'{"jsonrpc":"2.0","id":"%s","params":%s}' % (refused[1].encode(), b"[" * 10_000 + b"]" * 10_000))
    peer.send(b'{"jsonrpc":"1.0","id":"%s","method":"ping"}' % refused[2].encode())
    peer.send(b'[{"jsonrpc":"2.0","id":"%s","method":"ping"}]' % refused[3].encode())
    assert peer.process.stdin is not None
    peer.process.stdin.close()
    assert peer.process.wait(timeout=30) == 0
    answers: dict[str, dict[str, Any]] = {}
    while not peer.answers.empty():
        message = peer.answers.get()
        answers[message["id"]] = message
    assert set(refused) <= set(answers), f"unanswered at close: {set(refused) - set(answers)}"
    assert all(fc.is_error_answer(answers[rid]) for rid in refused)
    for rid in refused:
        TALLY.add(fc.Case("client-closed", b"", fc.one(rid)), "refused line answered before exit")
    for rid, what in ((model_call, "model call"), (listing, "tools/list")):
        TALLY.add(fc.Case("client-closed", b"", fc.one(rid)),
                  f"{what} {'answered' if rid in answers else 'cancelled at close'}")
