#!/usr/bin/env bash
# The main job: install, build, then train LeNet-5 for one epoch on Fashion-MNIST under each
# of the three presets and print a side-by-side table (loss, accuracy, time per epoch,
# model size). Extra arguments go to `driftlab compare` (e.g. --epochs 2 --model lenet1).
# It installs and builds only what the driftlab command needs (scripts/install-deps.sh --demo; the
# CPU build of the command alone, in build-demo/: no tests, benchmarks or CUDA kernels), so the
# table comes minutes sooner than the full build of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --demo
BUILD_DIR=${BUILD_DIR:-build-demo}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDRIFTLAB_CUDA=OFF -DDRIFTLAB_TESTS=OFF -DDRIFTLAB_BENCH=OFF \
  >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target driftlab >/dev/null
"$BUILD_DIR"/driftlab compare --model lenet5 --policies tensorflow,theano,torch --epochs 1 --batch 128 \
  --lr 0.05 --momentum 0.9 --seed 1 --out runs/compare "$@"
