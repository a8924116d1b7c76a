"""HAProxy (Debian's haproxy, installed by scripts/install.sh) doing round-robin over mcp-sim instances on
loopback, logging which instance answered each request, for the scale-out tests."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import free_port, wait_for_port

CONFIG = """global
    log stdout format raw local0
defaults
    mode http
    log global
    # The JSON-RPC method of each request, read from its body: tools/call apart from discovery and listing.
    option http-buffer-request
    log-format "%s %HM %HU %ST %[var(txn.rpc)]"
    option redispatch
    retries 3
    timeout connect 2s
    timeout client 300s
    timeout server 300s
frontend mcp
    bind 127.0.0.1:{port}
    http-request set-var(txn.rpc) req.body,json_query('$.method')
    default_backend instances
backend instances
    balance roundrobin
{servers}
"""


def haproxy() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise RuntimeError("haproxy is not installed: run scripts/install.sh (it installs Debian's haproxy)")
    return found


class Balancer:
    """Round-robin over BACKENDS (name -> port); each request is logged as `INSTANCE METHOD URI STATUS RPC`."""

    def __init__(self, backends: dict[str, int]):
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="mcp-sim-haproxy-"))
        servers = "\n".join(f"    server {name} 127.0.0.1:{port} check inter 300ms fall 1 rise 1"
                            for name, port in backends.items())
        (self.dir / "haproxy.cfg").write_text(CONFIG.format(port=self.port, servers=servers))
        self.log = self.dir / "requests.log"
        self.process = subprocess.Popen([haproxy(), "-db", "-f", str(self.dir / "haproxy.cfg")],
                                        stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.process, 10)
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def requests(self) -> list[tuple[str, str, str, int, str]]:
        """(instance, HTTP method, uri, status, JSON-RPC method) of every request so far."""
        time.sleep(0.2)  # HAProxy writes a line once the response is done
        rows = []
        for line in self.log.read_text(errors="replace").splitlines():
            parts = line.split(" ")
            if len(parts) == 5 and parts[3].isdigit():
                rows.append((parts[0], parts[1], parts[2], int(parts[3]), parts[4]))
        return rows

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
