#!/usr/bin/env bash
# driftlab's ONNX round-trip and import oracles (tests/oracles/test_onnx_oracle.cpp): ONNX's checker
# (check_onnx.py, python3-onnx) on every model, then ONNX Runtime on each (ort_run.js).
# Usage: run_models.sh CASE_DIR [K/N]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
/usr/bin/python3 "$here/check_onnx.py" "$@"
node "$here/ort_run.js" "$@"
