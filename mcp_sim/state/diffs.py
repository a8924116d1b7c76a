"""An edit's answer as a unified diff in the layout its examples show.

Editors answer a find-and-replace with the diff of the text before and after it (the filesystem server's
"```diff\\nIndex: /a.txt\\n===\\n--- /a.txt\\toriginal\\n+++ /a.txt\\tmodified\\n@@ -1,2 +1,2 @@ ..."). The state
knows both texts, so the hunks are computed (difflib), and the words around them are the examples' own,
with the edited record's key where theirs stood. Only a layout every success example shares is learned.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The key's place in the words around the hunks: a character no key or answer holds.
_MARK = "\x00"
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")
_HUNK_LINE = re.compile(r"^(@@ |[ +\-\\])")
# Lines of context around a change when no example shows how many (GNU diff's and difflib's default).
DEFAULT_CONTEXT = 3


@dataclass(frozen=True)
class DiffTemplate:
    field: str | None  # the answer's text field holding the diff; None: the answer is the text
    head: str  # the words before the first hunk, the key marked
    tail: str  # the words after the last hunk line
    context: int

    def fill(self, key: Any, before: str, after: str) -> Any:
        text = self.head.replace(_MARK, str(key)) + hunks(before, after, self.context) + \
            self.tail.replace(_MARK, str(key))
        return text if self.field is None else {self.field: text}


def hunks(before: str, after: str, context: int = DEFAULT_CONTEXT) -> str:
    """The hunks of a unified diff of BEFORE and AFTER, without the file header lines."""
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), n=context, lineterm="")
    return "\n".join(list(lines)[2:])


def diff_template(examples: Iterable[tuple[dict[str, Any], Any]], key_argument: str | None) -> DiffTemplate | None:
    """The layout every (arguments, answer) example's diff shares, or None."""
    found: set[DiffTemplate] = set()
    for arguments, result in examples:
        field, text = _diff_text(result)
        if text is None:
            return None
        split = _split(text)
        if split is None:
            return None
        head, body, tail = split
        key = arguments.get(key_argument) if key_argument else None
        if isinstance(key, str) and key:
            head, tail = head.replace(key, _MARK), tail.replace(key, _MARK)
        found.add(DiffTemplate(field, head, tail, _context(body)))
    return found.pop() if len(found) == 1 else None


def _diff_text(result: Any) -> tuple[str | None, str | None]:
    if isinstance(result, str):
        return None, result if "\n@@ -" in result else None
    if isinstance(result, dict) and len(result) == 1:
        (name, value), = result.items()
        if isinstance(value, str) and "\n@@ -" in value:
            return name, value
    return None, None


def _split(text: str) -> tuple[str, list[str], str] | None:
    """TEXT as the words before its hunks, the hunk lines, and the words after."""
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if _HUNK_HEADER.match(line)), None)
    if first is None or first == 0:
        return None
    last = first
    while last + 1 < len(lines) and _HUNK_LINE.match(lines[last + 1]):
        last += 1
    body = lines[first:last + 1]
    if not any(line[:1] in "+-" for line in body[1:]):
        return None
    return "\n".join(lines[:first]) + "\n", body, "\n" + "\n".join(lines[last + 1:])


def _context(body: list[str]) -> int:
    """The lines of context the example's first hunk shows before its first change, when the hunk does not
    start at the top of the text (where fewer lines may be all there is)."""
    start = _HUNK_HEADER.match(body[0])
    leading = next((i for i, line in enumerate(body[1:]) if line[:1] in "+-"), 0)
    return leading if start is not None and int(start.group(1)) > 1 else DEFAULT_CONTEXT
