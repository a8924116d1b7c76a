"""What a call does to a record's text: the find-and-replace edits editors take (`edits: [{oldText,
newText}]`, `old_str`/`new_str`), and the `head`/`tail` line ranges readers take.

Only exact edits are applied: an old text the record does not hold (the real server would refuse it) leaves
the record alone and the answer to the model.
"""

from __future__ import annotations

from typing import Any

# The argument pairs that replace one text with another, as editing tools name them.
EDIT_PAIRS = (("oldText", "newText"), ("old_text", "new_text"), ("old_str", "new_str"),
              ("old_string", "new_string"), ("oldString", "newString"), ("search", "replace"))
# Arguments that ask for a preview of an edit, which writes nothing.
DRY_RUN_NAMES = ("dryRun", "dry_run", "preview")


def edited(text: str, arguments: dict[str, Any]) -> str | None:
    """TEXT after the call's edits, or None when the call names no edit, is a dry run, or an edit's old
    text is not there."""
    if any(arguments.get(name) is True for name in DRY_RUN_NAMES):
        return None
    edits = _pairs(arguments)
    for value in arguments.values():
        if isinstance(value, list):
            edits += [pair for item in value if isinstance(item, dict) for pair in _pairs(item)]
    if not edits:
        return None
    for old, new in edits:
        if not old or old not in text:
            return None
        text = text.replace(old, new, 1)
    return text


def line_range(text: str, arguments: dict[str, Any]) -> str:
    """TEXT cut to the first `head` or last `tail` lines when the call asks for them."""
    head, tail = _count(arguments.get("head")), _count(arguments.get("tail"))
    lines = text.split("\n")  # as the filesystem server counts: "a\nb\n" ends with an empty line
    if head is not None:
        return "\n".join(lines[:head])
    if tail is not None:
        return "\n".join(lines[-tail:]) if tail else ""
    return text


def _pairs(item: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item[old], item[new]) for old, new in EDIT_PAIRS
            if isinstance(item.get(old), str) and isinstance(item.get(new), str)]


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)
