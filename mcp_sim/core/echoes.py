"""An answer that echoes the prompt instead of answering: a small model asked for a text tool's output
often writes the prompt's own words back ("The world description says ...", 'The "git_commit" command is
used to ...', the tool's description word for word). `echo_of` says what was echoed, so the call is tried
again; `borrowed_from` finds an answer copied from another tool (its example, or its answer earlier in the
session); `nearest_example` is the answer in the tool's own shape when every attempt echoed."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from mcp_sim.base.likeness import distance, features
from mcp_sim.core.specs import Example, ToolSpec

# Words of the prompt's own making that a real tool's answer does not use (unless its examples do).
# A real tool speaks of its data; a model that lost its way speaks of "the tool" and its prompt.
PROMPT_WORDS = ("the tool ", "tool is used to", "command is used to", "the above command", "world description",
                "the world's ", "json schema", "inputschema", "outputschema", "the simulator",
                "this call touches", "the response is:", "tool definitions", "predicted observation",
                "action space", "it is only able to", "the example above", "the examples above",
                # A model that speaks to a person instead of printing the tool's output (the default model's
                # "What would you add to ...?", a shell snippet in a code fence).
                "would you", "here's", "here is the", "let me ", "as an ai", "```")
# How many words in a row copied from the tool's description or argument schema make an echo.
COPIED_RUN = 6
MIN_COPIED = 4  # a description shorter than this is a phrase a real answer may use

_WORD = re.compile(r"[a-z0-9_]+")


def echo_of(answer: str, tool: ToolSpec) -> str | None:
    """What ANSWER echoes of the prompt (a phrase, or a run of the tool's description), or None when it
    reads as an answer. What the tool's own examples say is never an echo."""
    text = answer.lower()
    shown = " ".join(str(example.result).lower() for example in tool.examples)
    for phrase in PROMPT_WORDS:
        if phrase in text and phrase not in shown:
            return f"the answer repeats the prompt's words ({phrase!r})"
    said, shown_words = _words(text), _words(shown)
    for source in (tool.description or "", _schema_text(tool.input_schema)):
        words = _words(source.lower())
        # A run of COPIED_RUN words, or the whole of a shorter description ("Shows the commit logs").
        size = min(COPIED_RUN, len(words))
        if size < MIN_COPIED:
            continue
        copied = sorted((_runs(said, size) & _runs(words, size)) - _runs(shown_words, size))
        if copied:
            return f"the answer copies the tool's definition ({' '.join(copied[0])!r})"
    return None


# How alike (difflib's ratio) an answer and another tool's answer must be, each with its own call's
# arguments taken out, for the answer to count as a copy of the other.
BORROWED_LIKENESS = 0.85


def borrowed_from(answer: str, arguments: dict[str, Any], own: Iterable[Example],
                  others: Iterable[tuple[str, str, dict[str, Any]]]) -> str | None:
    """Which other tool ANSWER (to ARGUMENTS) was copied from, as a reason, or None. OTHERS are (tool,
    answer, its arguments): the examples of the file's other tools and their answers earlier in the session,
    which a small model copies ("Created branch 'x'" for a git_checkout, the echo tool's "Echo: ..." for
    get-sum). Answers are compared with their own arguments taken out, so a copy with this call's values put
    in is still a copy; it must be more like the other's answer than like any of the tool's OWN examples."""
    mine = _without(answer, arguments)
    if not mine:
        return None

    def likeness(text: str, values: dict[str, Any]) -> float:
        return difflib.SequenceMatcher(None, mine, _without(text, values), autojunk=False).ratio()

    best_own = max((likeness(str(example.result), example.arguments) for example in own), default=0.0)
    for name, text, values in others:
        alike = likeness(text, values)
        if alike >= BORROWED_LIKENESS and alike > best_own:
            return f"the answer copies {name}'s answer ({alike:.0%} alike)"
    return None


def _without(text: str, arguments: dict[str, Any]) -> str:
    """TEXT with the values of ARGUMENTS taken out (the longest first) and its spaces made one."""
    values = sorted({str(value) for value in arguments.values() if _slot(value) and len(str(value)) > 1},
                    key=len, reverse=True)
    if values:
        # Whole values only: "success" is taken out of "status: success", not out of "successfully".
        text = re.sub("|".join(rf"(?<!\w){re.escape(value)}(?!\w)" for value in values), "\x00", text)
    return " ".join(text.split())


def nearest_example(examples: Sequence[Example], arguments: dict[str, Any], scenario: str) -> Example | None:
    """The example of this scenario whose arguments are most like ARGUMENTS, a success before a failure."""
    shown = [example for example in examples if example.scenario in (None, scenario)]
    if not shown:
        return None
    mine = features(arguments)
    return min(shown, key=lambda example: (example.is_error, distance(mine, [features(example.arguments)])))


def in_shape_of(example: Example, arguments: dict[str, Any]) -> str:
    """EXAMPLE's answer with the call's arguments in the places where the example's own arguments appear
    ("Created branch 'docs'" for branch_name feature-login: "Created branch 'feature-login'")."""
    text = str(example.result)
    swaps = {str(old): str(arguments[name]) for name, old in example.arguments.items()
             if name in arguments and _slot(old) and _slot(arguments[name]) and str(old) in text}
    if not swaps:
        return text
    # One pass, the longest value first: a value inside another ("docs" in "docs/readme") is not split.
    pattern = re.compile("|".join(re.escape(old) for old in sorted(swaps, key=len, reverse=True)))
    return pattern.sub(lambda found: swaps[found.group(0)], text)


def _slot(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and str(value) != ""


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _runs(words: list[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}


def _schema_text(schema: Any) -> str:
    """The descriptions an input schema carries, as one text."""
    found: list[str] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("description"), str):
                found.append(node["description"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return "\n".join(found)
