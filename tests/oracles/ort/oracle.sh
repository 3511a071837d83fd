#!/usr/bin/env bash
# driftlab's ONNX Runtime int8 oracle (tests/oracles/test_quant_oracle_ort.cpp): writes the ONNX
# models and the transcribed quantizer numbers (make_models.py, Debian's python3-onnx), runs them in
# ONNX Runtime (ort_oracle.js, onnxruntime-node), then lists the kernels ORT ran.
# Usage: oracle.sh CASE_DIR [K/N]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
/usr/bin/python3 "$here/make_models.py" "$@"
node "$here/ort_oracle.js" "$@"
/usr/bin/python3 "$here/make_models.py" "$@" --summary
