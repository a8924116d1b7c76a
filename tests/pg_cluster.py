"""A throwaway Postgres cluster for tests: initdb and pg_ctl from Debian's postgresql package (installed by
scripts/install.sh) in a temporary directory, on a free loopback port, trusted local logins.

Debian's initdb refuses to run as root, so as root the cluster runs as the `postgres` user."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _binaries() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda path: int(path.parts[4]))
    if not found:
        raise RuntimeError("Postgres is not installed: run scripts/install.sh (it installs Debian's postgresql)")
    return found[-1].parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    def __init__(self) -> None:
        self.bin = _binaries()
        # Under /tmp itself: the postgres user must reach it (pytest's tmp_path is root's alone).
        self.dir = Path(tempfile.mkdtemp(prefix="mcp-sim-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.user = "postgres" if os.geteuid() == 0 else getpass.getuser()
        self.url = f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user, "--no-sync", "-E", "UTF8")

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self, durable: bool = False) -> None:
        # fsync off unless asked: a throwaway cluster; the tests kill mcp-sim, never Postgres's machine.
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
                   + ("" if durable else " -c fsync=off"))
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
