"""JsonRpcBodyGuard, driven as ASGI in process: what it reads, what it answers, what it hands the SDK unchanged.

The real server behind it is tried in tests/test_fuzz_http.py; here the guard's reading is counted exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from mcp_sim.serving.http_guard import JsonRpcBodyGuard, transport_security

LIMIT = 1024 * 1024
CHUNK = 64 * 1024


@dataclass
class Inner:
    """The app behind the guard (the SDK's, in a served app): records what reached it."""

    messages: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            self.messages.append(message)
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages)


@dataclass
class Exchange:
    status: int
    headers: dict[bytes, bytes]
    body: bytes
    chunks_read: int

    def json(self) -> Any:
        return json.loads(self.body)


def post(guard: JsonRpcBodyGuard, chunks: list[bytes], *, length: int | None = None, host: bytes = b"127.0.0.1:1",
         path: str = "/mcp", method: str = "POST") -> Exchange:
    headers = [(b"host", host), (b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    scope = {"type": "http", "method": method, "path": path, "headers": headers, "query_string": b""}
    sent: list[dict[str, Any]] = []
    read = 0

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        if read > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[read - 1], "more_body": read < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(guard, scope, receive, send)
    start = sent[0]
    return Exchange(start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:]), read)


def guard_of(inner: Inner) -> JsonRpcBodyGuard:
    return JsonRpcBodyGuard(inner, path="/mcp", security=transport_security("127.0.0.1"), max_body=LIMIT)


def in_chunks(body: bytes, size: int = CHUNK) -> list[bytes]:
    return [body[i:i + size] for i in range(0, len(body), size)] or [b""]


def test_a_request_reaches_the_sdk_unchanged_chunk_by_chunk() -> None:
    inner = Inner()
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "x", "arguments": {"s": "é" * 200_000}}}, ensure_ascii=False).encode()
    chunks = in_chunks(body, 10_000)
    exchange = post(guard_of(inner), chunks, length=len(body))
    assert exchange.status == 299
    assert inner.body == body
    assert [m.get("more_body", False) for m in inner.messages] == [True] * (len(chunks) - 1) + [False]


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_gets_a_json_413_with_its_id_and_is_read_no_further(declared: bool) -> None:
    inner = Inner()
    body = b'{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"s":"' + b"x" * (20 * LIMIT) + b'"}}'
    chunks = in_chunks(body)
    exchange = post(guard_of(inner), chunks, length=len(body) if declared else None)
    assert exchange.status == 413 and exchange.headers[b"content-type"] == b"application/json"
    answer = exchange.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == "big-1" and answer["error"]["code"] == -32600
    assert "limit of 1,048,576 bytes" in answer["error"]["message"]
    assert not inner.messages, "the SDK saw an oversized body"
    # Declared too large: only enough to find the id. Chunked: no further than the limit.
    assert exchange.chunks_read == (1 if declared else LIMIT // CHUNK + 1), exchange.chunks_read


def test_a_body_of_exactly_the_limit_goes_through() -> None:
    inner = Inner()
    head = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"'
    body = head + b"x" * (LIMIT - len(head) - 3) + b'"}}'
    assert len(body) == LIMIT
    assert post(guard_of(inner), in_chunks(body), length=LIMIT).status == 299
    assert inner.body == body


@pytest.mark.parametrize("rid", [None, True, False, 0.5, 1.0, [1], {"a": 1}], ids=repr)
def test_a_request_with_an_id_the_sdk_cannot_take_gets_invalid_request_with_id_null(rid: Any) -> None:
    inner = Inner()
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list"}).encode()
    exchange = post(guard_of(inner), [body])
    assert exchange.status == 400 and exchange.headers[b"content-type"] == b"application/json"
    assert exchange.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Invalid Request: the id must be a string or an integer"}}
    assert not inner.messages


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": None, "method": "notifications/initialized"},  # JSON-RPC 1.0 style notification
    {"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "a client's error answer"}},
    {"jsonrpc": "2.0", "id": None, "method": 5},  # the SDK refuses it itself (400)
    [{"jsonrpc": "2.0", "id": None, "method": "ping"}],  # so is any batch
], ids=["notification-id-null", "error-id-null", "method-5", "batch"])
def test_what_the_sdk_reads_rightly_or_refuses_itself_is_passed_on(message: Any) -> None:
    inner = Inner()
    body = json.dumps(message).encode()
    assert post(guard_of(inner), [body]).status == 299
    assert inner.body == body


def test_a_refused_host_is_told_so_before_the_body_is_read() -> None:
    inner = Inner()
    exchange = post(guard_of(inner), in_chunks(b"x" * (3 * LIMIT)), host=b"evil.example.com")
    assert exchange.status == 421 and exchange.chunks_read == 0 and not inner.messages


@pytest.mark.parametrize(("method", "path"), [("GET", "/mcp"), ("POST", "/admin/worlds")])
def test_other_methods_and_paths_are_not_guarded(method: str, path: str) -> None:
    inner = Inner()
    body = b'{"id": null, "method": "ping"}' + b" " * (2 * LIMIT)
    assert post(guard_of(inner), in_chunks(body), method=method, path=path).status == 299
    assert inner.body == body
