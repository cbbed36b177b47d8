#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every CTest label (unit, golden, exact, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
