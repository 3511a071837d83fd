#!/usr/bin/env bash
# Installs what driftlab needs on a fresh Debian 12 machine of this kind: build tools and
# libraries (Eigen, oneDNN, zlib, CLI11, nlohmann-json, yaml-cpp and SQLite (study specs and results), GoogleTest, Google Benchmark), the
# Fashion-MNIST data set, PyTorch + numpy (oracles and speed peers), ONNX's C++ schema and checker
# with protobuf (driftlab's ONNX export/import: libonnx-dev, libprotobuf-dev), ONNX for Python (the
# ONNX Runtime oracle's model writer, the exported models' checker and the generator of ONNX's
# backend node tests), torchvision (outside models for the graph importer: MobileNetV2, ResNet-50),
# headless Chromium (the browser column of docs/CONVERSION.md: an exported TF.js model run in a
# real browser), SciPy (the attack statistics' oracle), matplotlib (driftlab robustness's
# chart), pybind11 with Python's headers, pytest, jupyter's nbconvert with the Python kernel, pip and
# setuptools (the Python module, docs/PYTHON.md: its tests, its notebook, pip install .), and clang with its runtime
# libraries (libFuzzer for scripts/fuzz.sh, and LLVM's OpenMP, which the fuzz build's
# find_package(OpenMP) needs under clang). ocl-icd-opencl-dev is
# libdnnl-dev's recommended package, which --no-install-recommends skips: Debian's oneDNN is built
# with the OpenCL GPU runtime, so its CMake config calls find_package(OpenCL REQUIRED) and
# configuring fails without the OpenCL headers on a fresh machine.
# Idempotent: packages already present are skipped.
#   bash scripts/install-deps.sh           everything (the tests, oracles, fuzzing)
#   bash scripts/install-deps.sh --demo    what the driftlab command and the demo need: the compiler,
#                                          the build's libraries and Fashion-MNIST (scripts/demo.sh)
set -euo pipefail
demo=0
[ "${1:-}" = "--demo" ] && demo=1
pkgs=(build-essential cmake libeigen3-dev libdnnl-dev zlib1g-dev ocl-icd-opencl-dev libcli11-dev nlohmann-json3-dev
      libyaml-cpp-dev libsqlite3-dev libgtest-dev libgmock-dev libbenchmark-dev dataset-fashion-mnist libonnx-dev libprotobuf-dev chromium
      python3-numpy python3-torch python3-torchvision libopenblas0-openmp python3-onnx python3-scipy python3-matplotlib clang libclang-rt-14-dev
      libomp-14-dev pybind11-dev python3-dev python3-pytest jupyter-nbconvert python3-ipykernel python3-pip python3-setuptools)
if ((demo)); then
  pkgs=(build-essential cmake libeigen3-dev libdnnl-dev zlib1g-dev ocl-icd-opencl-dev libcli11-dev nlohmann-json3-dev
        libyaml-cpp-dev libsqlite3-dev dataset-fashion-mnist libonnx-dev libprotobuf-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: everything is installed"
fi

((demo)) && exit 0

# TensorFlow.js oracle (tests/oracles/tfjs): pure-JS CPU backend from the npm registry.
oracle_dir="$(dirname "$0")/../tests/oracles/tfjs"
if [ -f "$oracle_dir/package.json" ]; then
  if ! command -v node >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends nodejs npm
  fi
  if [ ! -d "$oracle_dir/node_modules/@tensorflow/tfjs" ]; then
    echo "install-deps: installing the TensorFlow.js oracle (npm)"
    if [ -f "$oracle_dir/package-lock.json" ]; then
      (cd "$oracle_dir" && npm ci --no-audit --no-fund --loglevel=error)
    else
      (cd "$oracle_dir" && npm install --no-audit --no-fund --loglevel=error)
    fi
  fi
fi

# ONNX Runtime oracle (tests/oracles/ort): onnxruntime-node from the npm registry, its CPU library
# inside the package. --ignore-scripts: the package's install script only downloads the GPU (CUDA)
# binaries, and fails on a machine without internet beyond the registry.
ort_dir="$(dirname "$0")/../tests/oracles/ort"
if [ -f "$ort_dir/package.json" ] && [ ! -d "$ort_dir/node_modules/onnxruntime-node" ]; then
  if ! command -v node >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends nodejs npm
  fi
  echo "install-deps: installing the ONNX Runtime oracle (npm)"
  (cd "$ort_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
