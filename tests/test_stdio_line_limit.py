"""RecordedLines, the stdio line reader: a line over the limit is skipped without being held, in place of it the
SDK gets a blank line (so the pairing of lines and messages holds), and the lines after it are read as sent.

The real server's answers are tried in tests/test_fuzz_stdio.py.
"""

from __future__ import annotations

import io
import tracemalloc
from collections import deque

import mcp_types as types

from mcp_sim.serving.transports import OverlongLine, RecordedLines, replies_for

LIMIT = 1000


def test_an_overlong_line_is_replaced_by_a_blank_line_and_the_next_ones_are_read_as_sent() -> None:
    overlong_line = b'{"id": 3, "s": "' + b"x" * 5000 + b'"}\n'
    lines = RecordedLines(io.BytesIO(overlong_line + b"a" * LIMIT + b"\nnext\n"), max_line=LIMIT)
    assert [lines.readline() for _ in range(4)] == ["\n", "a" * LIMIT + "\n", "next\n", ""]
    overlong, *rest = lines.pending
    assert isinstance(overlong, OverlongLine) and overlong.length == len(overlong_line)
    assert overlong.head.startswith('{"id": 3') and len(overlong.head) == LIMIT + 1
    assert rest == ["a" * LIMIT + "\n", "next\n"]


def test_an_overlong_last_line_without_a_newline_is_refused_too() -> None:
    lines = RecordedLines(io.BytesIO(b"x" * (LIMIT + 1)), max_line=LIMIT)
    assert (lines.readline(), lines.readline()) == ("\n", "")
    assert lines.pending == deque([OverlongLine("x" * (LIMIT + 1), LIMIT + 1)])


def test_an_overlong_line_is_never_held_whole() -> None:
    size = 64 * 1024 * 1024
    source = io.BytesIO(b'{"jsonrpc": "2.0", "id": "long", "params": "' + b"x" * size + b'"}\nnext\n')
    tracemalloc.start()
    try:
        lines = RecordedLines(source, max_line=LIMIT)
        assert lines.readline() == "\n" and lines.readline() == "next\n"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, f"reading a {size:,}-byte line peaked at {peak:,} bytes"


def test_an_overlong_line_is_answered_with_the_id_its_head_holds() -> None:
    (reply,) = replies_for(ValueError("blank"), OverlongLine('{"jsonrpc": "2.0", "id": "long", "params": "xx', 10**8))
    assert reply.id == "long" and reply.error.code == types.INVALID_REQUEST
    assert "a line of 100,000,000 characters is over the server's limit of 16,777,216 characters" \
        in reply.error.message
    (reply,) = replies_for(ValueError("blank"), OverlongLine('{"jsonrpc": "2.0", "params": "xx', 10**8))
    assert reply.id is None
