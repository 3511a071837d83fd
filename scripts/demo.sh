#!/usr/bin/env bash
# The main job: install, build, then train LeNet-5 for one epoch on Fashion-MNIST under each
# of the three presets and print a side-by-side table (loss, accuracy, time per epoch,
# model size). Extra arguments go to `driftlab compare` (e.g. --epochs 2 --model lenet1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
"${BUILD_DIR:-build}"/driftlab compare --model lenet5 --policies tensorflow,theano,torch --epochs 1 --batch 128 \
  --lr 0.05 --momentum 0.9 --seed 1 --out runs/compare "$@"
