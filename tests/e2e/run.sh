#!/usr/bin/env bash
# End-to-end tests of `rewind serve` with the official openai npm client (node:test).
#   tests/e2e/run.sh [REWIND_BINARY]        default: build/rewind; the demo model unless REWIND_E2E_MODEL=path.gguf
#   REWIND_E2E_FAKE=1 tests/e2e/run.sh build/server/fake_serve    the same tests against the scripted fake engine
# Installs the npm dependencies from package-lock.json on first use (npm ci; npm install as a fallback).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/../../build/rewind}"
if [ ! -x "$bin" ]; then
  echo "run.sh: no executable at $bin (build it first)" >&2
  exit 1
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
cd "$here"
if [ ! -f node_modules/openai/package.json ]; then
  npm ci --no-audit --no-fund >/dev/null 2>&1 || npm install --no-audit --no-fund >/dev/null
fi
REWIND_BIN="$bin" exec node --test --test-concurrency=1 "$here"/*.test.js
