#!/usr/bin/env bash
# The test command: install, build from scratch, run every test (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/build.sh
# No include climbs a floor (docs/ARCHITECTURE.md); ctest runs it too, with the planted checks.
python3 scripts/check-floors.py "$BUILD_DIR/floors.json"
(
  cd "$BUILD_DIR"
  # CI has the oracles (PyTorch, TF.js, ONNX Runtime) and Fashion-MNIST: a missing one fails its tests instead
  # of skipping them (tests/require_util.h); elsewhere they skip, and ctest lists them as skipped.
  export DRIFTLAB_REQUIRE_ORACLES=1
  # One ctest run: the oracle suites and the CUDA emulation (the longest) start first and overlap
  # the unit tests (their COST in CMakeLists.txt). A failure stops the script after the oracle
  # tables are printed.
  rc=0
  ctest --output-on-failure -j"$(nproc)" || rc=$?
  # The oracle suites print their layer x quantity x error tables: copy them from ctest's log so
  # that they are in CI's output (docs/ORACLE_RUN.md holds a recorded run).
  awk '/^[0-9]+\/[0-9]+ Testing: oracles\./ {on = 1} on {print} /^"oracles\..*" end time/ {on = 0}' \
    Testing/Temporary/LastTest.log
  exit $rc
)
# Hardening (docs/RELIABILITY.md): the CI subset of the unit tests under ASan + UBSan (every
# kernel family and reader), and each libFuzzer target for a short fixed time on its seed corpus.
# The sanitized libraries are compiled once (clang) for both: the fuzz targets are built in the
# same folder (SANITIZE_WITH_FUZZ) and fuzz.sh only runs them.
SANITIZE_WITH_FUZZ=1 bash scripts/sanitize.sh --subset
FUZZ_BUILD_DIR=build-asan FUZZ_NO_BUILD=1 bash scripts/fuzz.sh "${FUZZ_SECONDS:-12}"
