"""Errors that carry a message a person can act on."""

from __future__ import annotations


class McpSimError(Exception):
    """Base class: the message says what went wrong and how to fix it."""


def parse_failure(exc: Exception) -> str:
    """Why a JSON document could not be read, in words: a RecursionError (nesting past the stack) has none."""
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def yaml_failure(exc: Exception) -> str:
    """A YAML syntax error in one short line ("line 3, column 7: ..."): PyYAML's own message spans several
    lines and names the file "<unicode string>"; the caller names the file."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is None or problem is None:
        return str(exc).replace('in "<unicode string>", ', "")
    context = getattr(exc, "context", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" + (f" ({context})" if context else "")


class ProblemsError(McpSimError):
    """Input with one or more problems, every one listed (each with its pointer)."""

    subject = "the input"

    def __init__(self, problems: list[str]):
        self.problems = problems
        listing = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in {self.subject}:\n{listing}")


class SpecError(ProblemsError):
    """One or more tool spec files are invalid; every problem is listed."""

    subject = "the tool specs"


class ModelFileError(McpSimError):
    """The model file is missing, truncated or not a GGUF file."""


class EngineError(McpSimError):
    """The engine failed to produce an answer (server down, model failure)."""


class BusyError(McpSimError):
    """Too many calls are queued for the model."""


class RegistryError(McpSimError):
    """One or more model manifests are invalid; every problem is listed."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        listing = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the model manifests:\n{listing}")
