"""System-prompt snapshots kept on disk, so a restarted server resumes its specs' prompts instead of reading
them again (a 3.4k-token prompt is about 15 s of reading on two CPU cores, 0.2 s to load).

One file per prompt, named by a digest of the engine's identity (model file, llama.cpp build, the settings
that shape the state) and the prompt's tokens: a file can only ever be offered to the engine that could have
written it. Each file carries its tokens and a SHA-256 of its state; anything that does not check out (a
truncated or damaged file, a foreign one) is deleted and the prompt is read as if there were none. Files are
written whole under a temporary name and renamed, and the folder is kept under a size budget, least recently
used first. It is a cache: failing to read or write it never fails a call, it only costs the reading.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from array import array
from pathlib import Path

from mcp_sim.base import defaults
from mcp_sim.base.paths import user_cache_dir
from mcp_sim.engines.llama.state_cache import Snapshot

logger = logging.getLogger(__name__)

MAGIC = b"mcp-sim prompt state 1\n"
SUFFIX = ".state"
# The longest header line read: a file without one is damaged, not a reason to read it all.
MAX_HEADER = 4096
# A half-written file this old was left by a process killed while writing it (a writer takes seconds).
STALE_PARTIAL_S = 600


def default_folder() -> Path:
    """$MCP_SIM_PROMPT_CACHE_DIR, else mcp-sim/prompt-states in the user's cache folder (XDG_CACHE_HOME)."""
    chosen = os.environ.get(defaults.PROMPT_CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    return user_cache_dir() / "mcp-sim" / "prompt-states"


class PromptStore:
    """Snapshots of system prompts in FOLDER, at most MAX_BYTES in all, for the engine named by IDENTITY."""

    def __init__(self, folder: Path, max_bytes: int, identity: str):
        self.folder = folder
        self.max_bytes = max_bytes
        self.identity = identity
        self._warned = False

    def get(self, tokens: list[int]) -> Snapshot | None:
        """The snapshot saved after exactly TOKENS, or None (none saved, or one that did not check out)."""
        path = self._path(tokens)
        try:
            state = self._read(path, tokens)
        except (FileNotFoundError, NotADirectoryError):  # never saved, or no folder to save in
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("mcp-sim: ignoring the saved prompt state %s: %s; the prompt is read again",
                           path.name, exc)
            with contextlib.suppress(OSError):  # a read-only folder: the file is ignored all the same
                path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return Snapshot(tuple(tokens), memoryview(state))

    def _read(self, path: Path, tokens: list[int]) -> bytearray:
        """The state in PATH, once its header, tokens, size and checksum check out (else ValueError)."""
        with path.open("rb") as file:
            if file.readline(len(MAGIC)) != MAGIC:
                raise ValueError("not a prompt state file")
            line = file.readline(MAX_HEADER)
            header = json.loads(line)
            count, size = int(header["tokens"]), int(header["bytes"])
            # Checked before anything is allocated: a damaged header must not ask for gigabytes.
            if count != len(tokens) or len(MAGIC) + len(line) + 4 * count + size != os.fstat(file.fileno()).st_size:
                raise ValueError("its size is not what its header says")
            saved = array("i")
            saved.frombytes(file.read(4 * count))
            state = bytearray(size)
            if file.readinto(state) != size:
                raise ValueError("it ends before its state does")
        if header.get("identity") != self.identity or saved.tolist() != tokens:
            raise ValueError("it was written for another engine or prompt")
        if hashlib.sha256(state).hexdigest() != header.get("sha256"):
            raise ValueError("its checksum does not match (damaged)")
        return state

    def put(self, tokens: list[int], snapshot: Snapshot) -> None:
        """Save SNAPSHOT (taken after exactly TOKENS), then evict the least recently used files past the budget."""
        size = snapshot.state.nbytes + 4 * len(tokens)
        if size > self.max_bytes:
            return
        header = {"identity": self.identity, "tokens": len(tokens), "bytes": snapshot.state.nbytes,
                  "sha256": hashlib.sha256(snapshot.state).hexdigest()}
        temporary = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=self.folder, suffix=".partial", delete=False) as file:
                temporary = Path(file.name)
                file.write(MAGIC)
                file.write(json.dumps(header).encode() + b"\n")
                file.write(array("i", tokens).tobytes())
                file.write(snapshot.state)
            temporary.replace(self._path(tokens))  # whole or not at all, even if we are killed here
            self._evict()
        except OSError as exc:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    temporary.unlink(missing_ok=True)
            if not self._warned:  # once: a read-only or full disk would otherwise repeat it for every prompt
                logger.warning("mcp-sim: cannot keep system prompt states in %s (%s); prompts will be read "
                               "again after a restart", self.folder, exc)
                self._warned = True

    def _path(self, tokens: list[int]) -> Path:
        digest = hashlib.sha256(self.identity.encode() + b"\0" + array("i", tokens).tobytes()).hexdigest()
        return self.folder / f"{digest[:32]}{SUFFIX}"

    def _evict(self) -> None:
        now = time.time()
        for partial in self.folder.glob("*.partial"):
            with contextlib.suppress(OSError):
                if now - partial.stat().st_mtime > STALE_PARTIAL_S:
                    partial.unlink()
        files = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            try:
                stat = path.stat()
            except FileNotFoundError:  # another process evicted it meanwhile
                continue
            files.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
