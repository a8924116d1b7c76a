#!/usr/bin/env bash
# Installs the real MCP servers the fidelity benchmark records (benchmarks/record_fidelity_traces.py) into
# .fidelity-servers/ (git-ignored), apart from mcp-sim's own venv: mcp-server-sqlite needs `mcp<2`, which
# must not replace the `mcp` 2.x that mcp-sim runs on, so it gets a venv of its own. Pinned versions, so a re-recording talks to the same
# servers. Also installs Debian's redis-server (the redis server needs a live instance; the benchmark starts
# one on a private port). Scoring (`mcp-sim eval`) needs none of this: the traces are committed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
DIR=.fidelity-servers
STAMP="$DIR/.installed"
digest=$(sha256sum scripts/fidelity-servers.sh | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ]; then
    exit 0
fi
mkdir -p "$DIR"
[ -x "$DIR/venv/bin/python" ] || "$PYTHON" -m venv "$DIR/venv"
"$DIR/venv/bin/python" -m pip install --quiet --upgrade pip
"$DIR/venv/bin/python" -m pip install --quiet mcp-server-git==2026.10.19 mcp-server-time==2026.10.19
# mcp-server-sqlite and mcp-server-duckdb were written for the 1.x SDK (it imports mcp.server.stdio of 1.x): a venv of its own.
[ -x "$DIR/venv-mcp1/bin/python" ] || "$PYTHON" -m venv "$DIR/venv-mcp1"
"$DIR/venv-mcp1/bin/python" -m pip install --quiet --upgrade pip
"$DIR/venv-mcp1/bin/python" -m pip install --quiet "mcp<2" mcp-server-sqlite==2025.4.25 mcp-server-duckdb==1.1.0 \
    mcp-server-calculator==0.2.1
npm install --prefix "$DIR/node" --no-audit --no-fund --loglevel=error --no-save \
    @modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31 \
    @modelcontextprotocol/server-sequential-thinking@2026.8.31 @modelcontextprotocol/server-redis@2025.4.25 \
    @modelcontextprotocol/server-everything@2026.8.31 @kazuph/mcp-taskmanager@1.1.1
if ! command -v redis-server >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
        echo "redis-server not found: the redis recordings need it (apt-get install redis-server, as root)" >&2
        exit 1
    fi
fi
# git commits in the recorded sessions need an identity; the benchmark passes one by environment.
echo "$digest" > "$STAMP"
