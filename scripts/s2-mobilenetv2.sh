#!/usr/bin/env bash
# S2's three attacks on fp32 against int8 MobileNetV2, as one command (studies/s2-mobilenetv2-quick.yaml):
# exports torchvision's quantizable MobileNetV2 (one input channel, 28x28: Fashion-MNIST) with
# scripts/export_quantizable.py, imports it as a graph model (driftlab import), and runs the study:
# train, quantize under tflite and torch_qnnpack, FGSM/BIM/Boundary crafted on fp32 and judged on both
# int8 models after the 8-bit round trip. Resumable (run it again: finished cells are kept).
#
#   scripts/s2-mobilenetv2.sh            # into runs/s2-mnv2; report: runs/s2-mnv2/study/report.md
#
# Environment: DRIFTLAB (the binary, default build/driftlab), RUNS (default runs), JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${DRIFTLAB:-build/driftlab}
OUT=${RUNS:-runs}/s2-mnv2
mkdir -p "$OUT"
if [ ! -f "$OUT/mnv2.dlm" ]; then
  /usr/bin/python3 scripts/export_quantizable.py mobilenet_v2 "$OUT/mnv2.onnx" --channels 1 --size 28
  "$BIN" import "$OUT/mnv2.onnx" --out "$OUT/mnv2.dlm" > "$OUT/import.log"
fi
spec=studies/s2-mobilenetv2-quick.yaml
if [ "$OUT" != runs/s2-mnv2 ]; then  # the spec names runs/s2-mnv2/mnv2.dlm: point it at this folder's
  sed "s|init: runs/s2-mnv2/mnv2.dlm|init: $OUT/mnv2.dlm|" "$spec" > "$OUT/spec.yaml"
  spec=$OUT/spec.yaml
fi
"$BIN" study run "$spec" --out "$OUT/study" --jobs "${JOBS:-2}"
"$BIN" study report "$OUT/study"
