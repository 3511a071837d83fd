#!/usr/bin/env bash
# The test command: install, build from scratch, run every test (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/build.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j"$(nproc)" -E '^oracles\.'
# The oracle suites print their layer x quantity x error tables: run them verbosely so the
# tables are in the log (docs/ORACLE_RUN.md holds a recorded run).
ctest --output-on-failure -V -R '^oracles\.'
