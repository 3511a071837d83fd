#!/usr/bin/env bash
# The test command: install, build from scratch, run every test (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/build.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j"$(nproc)"
