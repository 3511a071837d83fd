#!/usr/bin/env bash
# Configures and builds driftlab (Release) into ${BUILD_DIR:-build}. CUDA is auto-detected.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j"$(nproc)"
