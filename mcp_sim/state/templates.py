"""Answers a tool's own examples spell out.

A real server confirms a write in fixed words around what the call named: "Successfully set key: greeting"
for `set(key="greeting")`, `{"content": "Successfully wrote to /docs/a.md"}` for `write_file(path=...)`.
When a tool's success examples are all of that form, every later write is answered the same way, with no
model: the words are the server's, only the names change. A text list ("Found keys:\\na\\nb") is learned
the same way from a list example that shows keys its siblings' examples wrote.

Only what the examples fully explain becomes a template: one line of words with no digits around at least
one argument (a made-up id such as "T-5004" is data, not words), or an object of such strings and
booleans. Anything else is left to the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# An argument's place in a template: a character no argument or answer holds.
_MARK = "\x00"
_PLACE = re.compile(f"{_MARK}([^{_MARK}]+){_MARK}")
# Values shorter than this are too likely to occur by chance in the words around them.
MIN_VALUE_CHARS = 3
# A confirmation is one short line; anything longer carries data the arguments do not explain.
MAX_TEXT_CHARS = 200


@dataclass(frozen=True)
class WriteTemplate:
    """A write's answer with each argument's place marked."""

    result: Any  # a string, or an object of strings and booleans

    def fill(self, arguments: dict[str, Any]) -> Any | None:
        """The answer for ARGUMENTS; None when a marked argument is missing or is not text."""
        try:
            return _fill(self.result, arguments)
        except _Unfillable:
            return None


@dataclass(frozen=True)
class ListTemplate:
    """A text list's answer: the keys between fixed words."""

    before: str
    separator: str
    after: str

    def fill(self, keys: Sequence[Any]) -> str:
        return self.before + self.separator.join(str(key) for key in keys) + self.after


def write_template(examples: Iterable[tuple[dict[str, Any], Any]]) -> WriteTemplate | None:
    """The one template every success example agrees on, or None."""
    found: set[str] = set()
    template: Any = None
    for arguments, result in examples:
        template = _mark(result, arguments)
        if template is None:
            return None
        found.add(json.dumps(template, sort_keys=True))
    return WriteTemplate(template) if len(found) == 1 else None


def confirmation(examples: Iterable[Any]) -> WriteTemplate | None:
    """The one line every success example of a write gives alike, naming nothing ("Files staged
    successfully"): a confirmation, the same whatever the call named. None when they differ, when there
    are none, or when the line holds digits (a hash, a count: data, not words)."""
    texts = set(examples)
    if len(texts) != 1:
        return None
    text = texts.pop()
    if not isinstance(text, str) or not text.strip() or "\n" in text or len(text) > MAX_TEXT_CHARS \
            or _MARK in text or any(char.isdigit() for char in text):
        return None
    return WriteTemplate(text)


def list_template(examples: Iterable[str], keys: set[str]) -> ListTemplate | None:
    """From text list examples, those that show at least one of KEYS (keys the sibling tools' examples
    named); None when none does or they disagree."""
    found: set[ListTemplate] = set()
    for text in examples:
        places = sorted((match.start(), match.end()) for key in keys if len(key) >= MIN_VALUE_CHARS
                        for match in re.finditer(rf"(?<![\w:/.-]){re.escape(key)}(?![\w:/.-])", text))
        if not places:
            continue
        before, after = text[:places[0][0]], text[places[-1][1]:]
        if len(places) > 1:
            separator = text[places[0][1]:places[1][0]]
        else:
            separator = "\n" if before.endswith("\n") else ", "
        found.add(ListTemplate(before, separator, after))
    return found.pop() if len(found) == 1 else None


class _Unfillable(Exception):
    pass


def _mark(result: Any, arguments: dict[str, Any]) -> Any | None:
    if isinstance(result, bool):
        return result
    if isinstance(result, str):
        return _mark_text(result, arguments)
    if isinstance(result, dict) and result:
        marked = {name: _mark(value, arguments) for name, value in result.items()}
        return None if any(value is None for value in marked.values()) else marked
    return None  # numbers, nulls and lists are data


def _mark_text(text: str, arguments: dict[str, Any]) -> str | None:
    if "\n" in text or len(text) > MAX_TEXT_CHARS or _MARK in text:
        return None
    values = sorted(((name, value) for name, value in arguments.items()
                     if isinstance(value, str) and len(value) >= MIN_VALUE_CHARS), key=lambda item: -len(item[1]))
    marked = text
    for name, value in values:
        marked = marked.replace(value, f"{_MARK}{name}{_MARK}")
    words = _PLACE.sub("", marked)
    if marked == text or any(char.isdigit() for char in words):
        return None
    return marked


def _fill(template: Any, arguments: dict[str, Any]) -> Any:
    if isinstance(template, dict):
        return {name: _fill(value, arguments) for name, value in template.items()}
    if not isinstance(template, str):
        return template

    def value(match: re.Match[str]) -> str:
        found = arguments.get(match.group(1))
        if not isinstance(found, str):
            raise _Unfillable
        return found

    return _PLACE.sub(value, template)
