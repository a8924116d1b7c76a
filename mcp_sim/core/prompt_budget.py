"""Each spec's system prompt against the context: measured in tokens, laid out to fit, refused when it cannot.

A spec whose tool definitions fit is shown in full. One that does not fit is indexed: its system prompt lists
each tool in one line and each call brings its own tool's definition (mcp_sim.core.prompt.prompt_action), so a spec
of any number of tools serves, and the system prompt stays one shared prefix for every call. A spec whose world
alone leaves no room is refused before serving, with its file, its size and the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.core.prompt import system_prompt
from mcp_sim.core.specs import Catalog, SpecSet

# Past this many characters per token of room, a prompt cannot fit: it is estimated, not tokenized.
MAX_CHARS_PER_TOKEN = 8
# Characters per token when a token budget becomes a character limit (JSON is dense; SmolLM2 reads ~3.3).
SAFE_CHARS_PER_TOKEN = 2.5
# Of the system prompt's room, the share an index may take; the rest is for the called tool's definition.
INDEX_SHARE = 0.5

Counter = Callable[[str], tuple[int, bool]]


class PromptTooLargeError(McpSimError):
    """A spec's prompt cannot fit the context even with its tools indexed."""


@dataclass(frozen=True)
class SpecFit:
    """How one spec's prompt fits: its size in full, the layout chosen and what that layout takes."""

    source: str
    tools: int
    full_tokens: int
    exact: bool  # False: full_tokens is estimated from the length (too large to be worth tokenizing)
    layout: str  # "full" or "index"
    tokens: int  # the system prompt in the chosen layout
    room: int  # tokens the context leaves a system prompt

    def describe(self) -> str:
        size = f"{self.full_tokens:,}" if self.exact else f"~{self.full_tokens:,}"
        if self.layout == "full":
            return f"prompt {size} tokens of {self.room:,} room: fits"
        return (f"prompt {size} tokens in full, more than the {self.room:,} room: tools indexed "
                f"({self.tokens:,} tokens), each call brings its own tool's definition")


def reserved_tokens(max_tokens: int, think_budget: int = 0) -> int:
    """Tokens of the context a system prompt must leave: the answer, the reasoning and some history."""
    return max_tokens + think_budget + defaults.HISTORY_ROOM


def fit_prompts(catalog: Catalog, count: Counter, ctx: int, reserved: int, style: str = "generic",
                errors: bool = False, trained_ctx: int | None = None) -> list[SpecFit]:
    """Choose every spec's layout for a context of CTX tokens of which RESERVED go to the answer, reasoning
    and history (setting it on the spec), or raise PromptTooLargeError naming every spec that cannot fit.
    COUNT gives a text's tokens and whether that count is exact."""
    fits, problems = [], []
    for spec_set in catalog.spec_sets:
        fit = _fit(spec_set, count, ctx, reserved, style, errors, trained_ctx)
        if isinstance(fit, str):
            problems.append(fit)
        else:
            fits.append(fit)
    if problems:
        raise PromptTooLargeError("\n".join(problems))
    return fits


def _fit(spec_set: SpecSet, count: Counter, ctx: int, reserved: int, style: str, errors: bool,
         trained_ctx: int | None) -> SpecFit | str:
    room = ctx - reserved
    spec_set.prompt_layout, spec_set.index_chars, spec_set.definition_chars = "full", 0, 0
    full, exact = _largest(spec_set, count, room, style, errors)
    if full <= room:
        return SpecFit(spec_set.source, len(spec_set.tools), full, exact, "full", full, room)
    spec_set.prompt_layout = "index"
    spec_set.index_chars = int(room * INDEX_SHARE * SAFE_CHARS_PER_TOKEN)
    indexed, _ = _largest(spec_set, count, room, style, errors)
    left = room - indexed
    if left < defaults.MIN_DEFINITION_TOKENS:
        spec_set.prompt_layout = "full"
        advice = _advice(reserved + indexed + defaults.MIN_DEFINITION_TOKENS, trained_ctx)
        return (f"{spec_set.source}: its system prompt takes {'' if exact else '~'}{full:,} tokens, and "
                f"{indexed:,} with its {len(spec_set.tools)} tools listed one per line (its world and rules "
                f"alone are that large), against {room:,} tokens of room in --ctx {ctx} (less {reserved:,} for "
                f"the answer and the history). {advice}")
    spec_set.definition_chars = int(left * SAFE_CHARS_PER_TOKEN)
    return SpecFit(spec_set.source, len(spec_set.tools), full, exact, "index", indexed, room)


def _largest(spec_set: SpecSet, count: Counter, room: int, style: str, errors: bool) -> tuple[int, bool]:
    """The largest system prompt of the spec over its scenarios (their seed data differ)."""
    sizes = []
    for scenario in dict.fromkeys([spec_set.default_scenario, *spec_set.scenarios]):
        text = system_prompt(spec_set, style, errors=errors, scenario=scenario)
        if len(text) > max(room, defaults.CTX) * MAX_CHARS_PER_TOKEN:
            sizes.append((int(len(text) / 3) + 1, False))  # far too large: no need to tokenize megabytes
        else:
            sizes.append(count(text))
    return max(sizes)


def _advice(needed: int, trained_ctx: int | None) -> str:
    """What to change: a larger --ctx only when the model was trained for one that large (TRAINED_CTX, when
    known); past that a larger context reads worse, or not at all."""
    suggested = _suggested_ctx(needed)
    if trained_ctx is None or suggested <= trained_ctx:
        return f"Raise --ctx (e.g. --ctx {suggested}), or shorten the spec's world description and data"
    return (f"It would need --ctx {suggested}, more than the {trained_ctx:,} tokens the model was trained for: "
            "shorten the spec's world description and data, or split its tools into several specs")


def _suggested_ctx(needed: int) -> int:
    ctx = defaults.CTX
    while ctx < needed:
        ctx *= 2
    return ctx
