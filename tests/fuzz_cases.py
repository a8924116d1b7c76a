"""Hostile JSON-RPC input for fuzzing the transports, one hypothesis strategy per input class.

Each strategy takes the request id to use (the test hands out fresh ones, so a late answer is never taken
for another case's) and draws a `Case`: the bytes to send and the answers owed, one set of acceptable ids per
answer. Used by test_fuzz_stdio.py and test_fuzz_http.py, on a real `mcp-sim serve tool_specs/ops.yaml`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

from mcp_sim.core.specs import load_catalog, validation_error
from tests.conftest import SPECS

TOOLS = {name: tool.input_schema for name, tool in load_catalog([SPECS / "ops.yaml"]).tools.items()}
# Every method an MCP server may know; anything else is unknown to this one.
KNOWN_METHODS = {"initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read",
                 "resources/templates/list", "resources/subscribe", "resources/unsubscribe", "prompts/list",
                 "prompts/get", "logging/setLevel", "completion/complete", "tasks/get", "tasks/list",
                 "tasks/result", "tasks/cancel", "subscriptions/listen", "server/discover"}
# A call that always succeeds quickly: tail_logs answers text, which 32 tokens cannot break.
VALID_CALL = ("tail_logs", {"service": "worker", "lines": 2})
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf8\x88\x80\x80\x80"]
FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example])

Slot = frozenset[Any]


@dataclass(frozen=True)
class Case:
    kind: str
    body: bytes
    answers: tuple[Slot, ...]  # one entry per answer owed: the ids it may carry (None: id null)

    def __repr__(self) -> str:  # hypothesis prints failing cases; keep 10 MB bodies out of it
        body = self.body if len(self.body) < 300 else self.body[:150] + b"..." + self.body[-100:]
        return f"Case({self.kind}, {len(self.body)} bytes: {body!r}, answers={list(map(set, self.answers))})"


@dataclass
class Tally:
    """Cases per input class, and what the server answered, for the summary."""

    cases: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, case: Case, outcome: str) -> None:
        self.cases[case.kind] += 1
        self.outcomes[case.kind, outcome] += 1

    def report(self, config: Any, title: str) -> None:
        """Print the summary past pytest's capture (it is the figure docs/RELIABILITY.md quotes)."""
        capture = config.pluginmanager.get_plugin("capturemanager")
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        with capture.global_and_fixture_disabled():
            for line in ["", *self.lines(title)]:
                reporter.write_line(line)

    def lines(self, title: str) -> list[str]:
        lines = [f"{title}: {sum(self.cases.values())} cases"]
        for kind, count in self.cases.items():
            seen = ", ".join(f"{outcome} x{n}" for (k, outcome), n in sorted(self.outcomes.items()) if k == kind)
            lines.append(f"  {kind:<16} {count:>5}  ({seen})")
        return lines


def dumps(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(rid: Any, tool: str, arguments: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": tool, "arguments": arguments})


def is_error_answer(message: dict[str, Any]) -> bool:
    """A JSON-RPC error, or a tool result flagged isError."""
    error = message.get("error")
    if isinstance(error, dict):
        return isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
    result = message.get("result")
    return isinstance(result, dict) and result.get("isError") is True


def one(*ids: Any) -> tuple[Slot, ...]:
    return (frozenset(ids),)


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                         st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
# Ids the SDK cannot take: null, booleans, fractions, containers (1.0 too: its ids are strict integers or
# strings; tests/test_http_guard.py tries it, kept out here so the drawn cases stay as they were).
bad_ids = st.one_of(st.none(), st.booleans(), st.just(0.5), st.floats(allow_nan=False, allow_infinity=False)
                    .filter(lambda x: not x.is_integer()), st.lists(st.integers(), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
no_newline = st.binary(min_size=1, max_size=200).map(lambda b: b.replace(b"\n", b" ").replace(b"\r", b" "))


def valid_request(rid: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from([request(rid, "ping"), request(rid, "tools/list"), call(rid, *VALID_CALL)])


@st.composite
def valid_case(draw: st.DrawFn, rid: Any) -> Case:
    """A request that would succeed (for a closed session, say)."""
    return Case("valid", dumps(draw(valid_request(rid))), one(rid))


@st.composite
def malformed_json(draw: st.DrawFn, rid: Any) -> Case:
    """A valid request cut short, or bytes that are no JSON at all."""
    if draw(st.booleans()):
        body = dumps(draw(valid_request(rid)))
        cut = draw(st.integers(0, len(body) - 1))  # a proper prefix of an object is never JSON
        return Case("malformed-json", body[:cut], one(rid, None))
    garbage = draw(no_newline)
    assume(b'"id"' not in garbage)
    try:
        json.loads(garbage)
        assume(False)  # happened to be JSON
    except ValueError:
        pass
    return Case("malformed-json", garbage, one(None))


@st.composite
def bad_utf8(draw: st.DrawFn, rid: Any) -> Case:
    """Invalid UTF-8 inside a method name, an argument, or between the tokens."""
    bad = draw(st.sampled_from(BAD_UTF8))
    where = draw(st.sampled_from(["method", "argument", "structure"]))
    if where == "method":
        return Case("bad-utf8", dumps(request(rid, "tools/")).replace(b'tools/"', b"tools/" + bad + b'"'), one(rid))
    if where == "argument":
        body = dumps(call(rid, "get_service_status", {"service": "api"})).replace(b'"api"', b'"a' + bad + b'pi"')
        return Case("bad-utf8", body, one(rid))
    body = dumps(request(rid, "tools/list"))
    return Case("bad-utf8", body[:-1] + bad + b"}", one(rid, None))


SHAPES = ["no-jsonrpc", "jsonrpc-1.0", "jsonrpc-number", "method-not-text", "params-not-object", "no-method",
          "bad-id", "scalar"]


@st.composite
def wrong_shape(draw: st.DrawFn, rid: Any) -> Case:
    """Valid JSON that is no JSON-RPC 2.0 message."""
    shape = draw(st.sampled_from(SHAPES))
    message = draw(valid_request(rid))
    answers = one(rid)
    if shape == "no-jsonrpc":
        del message["jsonrpc"]
    elif shape == "jsonrpc-1.0":
        message["jsonrpc"] = "1.0"
    elif shape == "jsonrpc-number":
        message["jsonrpc"] = 2.0
    elif shape == "method-not-text":
        message["method"] = draw(json_values.filter(lambda v: not isinstance(v, str)))
    elif shape == "params-not-object":
        message["params"] = draw(json_values.filter(lambda v: v is not None and not isinstance(v, dict)))
    elif shape == "no-method":
        del message["method"]
        message["params"] = {}
    elif shape == "bad-id":
        message["id"], answers = draw(bad_ids), one(None)
    else:
        return Case("wrong-shape", dumps(draw(json_scalars)), one(None))
    return Case("wrong-shape", dumps(message), answers)


@st.composite
def unknown_method(draw: st.DrawFn, rid: Any) -> Case:
    """A request (answered Method not found) or a notification (answered with nothing) nobody serves."""
    method = draw(st.text(max_size=40).filter(lambda m: m not in KNOWN_METHODS))
    params = draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=6), json_values, max_size=3)))
    if draw(st.booleans()):
        notification = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
        return Case("unknown-method", dumps(notification), ())
    return Case("unknown-method", dumps(request(rid, method, params)), one(rid))


@st.composite
def wrong_arguments(draw: st.DrawFn, rid: Any) -> Case:
    """A real tool called with arguments its inputSchema refuses: wrong types, missing, extra, not an object."""
    tool = draw(st.sampled_from(sorted(TOOLS)))
    properties = draw(st.dictionaries(st.sampled_from(["service", "cache", "lines", "extra"]), json_values,
                                      max_size=3))
    arguments = draw(st.one_of(st.just(properties), json_values))
    assume(validation_error(arguments, TOOLS[tool]) is not None)
    return Case("wrong-arguments", dumps(call(rid, tool, arguments)), one(rid))


@st.composite
def huge_string(draw: st.DrawFn, rid: Any) -> Case:
    """A string of 1 or 10 MB as an argument, a tool name, a method, a params key or the id."""
    text = "x" * draw(st.sampled_from([1_000_000, 10_000_000]))
    where = draw(st.sampled_from(["argument", "tool", "method", "key", "id"]))
    message = {"argument": call(rid, "get_service_status", {"service": text}),
               "tool": call(rid, text, {}),
               "method": request(rid, text),
               "key": call(rid, "get_service_status", {"service": "api", text: 1}),
               "id": call(text, "get_service_status", {})}[where]
    return Case("10MB-string", dumps(message), one(text if where == "id" else rid))


@st.composite
def deep_nesting(draw: st.DrawFn, rid: Any) -> Case:
    """A request nested up to 10,000 levels: in an argument, in params, in _meta, in the id, or around it all."""
    depth = draw(st.one_of(st.just(10_000), st.just(3_000), st.integers(150, 10_000), st.integers(1, 300)))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    deep = opener * depth + "1" + closer * depth
    where = draw(st.sampled_from(["argument", "params", "meta", "id-after", "id", "around"]))
    head = '{"jsonrpc":"2.0","method":"tools/call",'
    # The arguments are always refused, so a request that does parse is answered without the model.
    bad_args = '"name":"get_service_status","arguments":{"service":' + (deep if where == "argument" else "5") + "}"
    params = {"params": "{" + bad_args + ',"x":' + deep + "}",
              "meta": '{"_meta":{"a":' + deep + "}," + bad_args + "}"}.get(where, "{" + bad_args + "}")
    if where == "id":
        return Case("deep-nesting", f'{head}"id":{deep},"params":{params}}}'.encode(), one(None))
    message = f'{head}"params":{params},"id":{json.dumps(rid)}}}' if where == "id-after" \
        else f'{head}"id":{json.dumps(rid)},"params":{params}}}'
    if where == "around":  # top level an array (a batch, its member no request unless 1 deep) or an object
        owed = one(rid) if (opener, depth) == ("[", 1) else one(None)
        return Case("deep-nesting", (opener * depth + message + closer * depth).encode(), owed)
    return Case("deep-nesting", message.encode(), one(rid))


BATCH_MEMBERS = ["ping", "call", "notification", "junk"]


@st.composite
def huge_batch(draw: st.DrawFn, first_id: int) -> Case:
    """An array of requests (and notifications, and junk): MCP has no batches, so each request is owed a refusal."""
    size = draw(st.integers(0, 300))
    return batch(first_id, draw(st.lists(st.sampled_from(BATCH_MEMBERS), min_size=size, max_size=size)))


def batch(first_id: int, kinds: list[str]) -> Case:
    members: list[Any] = []
    for rid, kind in enumerate(kinds, start=first_id):
        members.append({"ping": request(rid, "ping"), "call": call(rid, *VALID_CALL),
                        "notification": {"jsonrpc": "2.0", "method": "notifications/progress"}, "junk": rid}[kind])
    ids = [m["id"] for m in members if isinstance(m, dict) and "id" in m]
    return Case("huge-batch", dumps(members), tuple(frozenset([i]) for i in ids) or one(None))
