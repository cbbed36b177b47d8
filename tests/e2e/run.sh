#!/usr/bin/env bash
# End-to-end tests of `rewind serve` with the official openai npm client (node:test).
#   tests/e2e/run.sh [REWIND_BINARY]        default: build/rewind; the demo model unless REWIND_E2E_MODEL=path.gguf
#   REWIND_E2E_FAKE=1 tests/e2e/run.sh build/server/fake_serve    the same tests against the scripted fake engine
#   REWIND_E2E_TESTS=browser/webui.test.js tests/e2e/run.sh      the web page in headless Chromium
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
# Several e2e tests may start at once (ctest -j): one installs, the others wait for it under the lock; the
# marker is written only after a complete install.
(
  flock 9
  if [ ! -f node_modules/.rewind-installed ]; then
    npm ci --no-audit --no-fund >/dev/null 2>&1 || npm install --no-audit --no-fund >/dev/null
    touch node_modules/.rewind-installed
  fi
) 9>"$here/.npm-install.lock"
# REWIND_E2E_TESTS picks other test files (relative to this folder), e.g. browser/webui.test.js.
if [ -n "${REWIND_E2E_TESTS:-}" ]; then
  read -ra files <<<"$REWIND_E2E_TESTS"
  files=("${files[@]/#/$here/}")
else
  files=("$here"/*.test.js)
fi
REWIND_BIN="$bin" exec node --test --test-concurrency=1 "${files[@]}"
