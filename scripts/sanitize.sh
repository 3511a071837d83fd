#!/usr/bin/env bash
# The unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (CMake DRIFTLAB_SANITIZE):
# configures ${ASAN_BUILD_DIR:-build-asan} (CPU only, no benchmarks, -O1 -g with assertions on),
# builds driftlab and driftlab_tests, runs the tests; any sanitizer report fails the run.
#   scripts/sanitize.sh            every test but the oracle suites (docs/RELIABILITY.md: times)
#   scripts/sanitize.sh --subset   the CI subset (SUBSET_FILTER below), built as driftlab_subset_tests
#                                  (only the files that hold it: CMakeLists.txt)
#   scripts/sanitize.sh --print-subset-filter   that subset's gtest filter, printed
#   extra arguments go to the test executable, e.g. --gtest_filter=Conv2d*
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a CMAKE_EXTRA <<< "${SANITIZE_CMAKE_EXTRA:-}"
ROOT=$PWD
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}

# The CI subset (scripts/sanitize.sh --subset): every kernel, reference and fast, of each op
# family, through the tests that run the fast kernel (own loops, Eigen, oneDNN) beside the
# reference on the same rows: gemm, conv2d, max/avg pool, batchnorm, activations, softmax +
# cross-entropy, recurrent cells, the optimiser steps (SGD, Adam, RMSprop), embedding, and the
# reference backward kernels' gradient checks; and every reader (IDX, .npy, CIFAR, IMDB, the
# datasets front, the model file, .npy weights, the training checkpoint). Left out, to fit CI's budget (docs/RELIABILITY.md has the times): the large rows of
# the case tables (b64/b128 batches, VGG-16 and ResNet stage shapes, the split-K gemm: the same
# code paths as the small rows, at sizes that take most of the time), the CLI end-to-end runs,
# models, drift, knobs, registry and policy tests (whole models through the kernels above; what
# they add, the layers, the training loop and the CLI, only the full run checks: run it before a
# release), and the CUDA tests (CPU build: they skip).
SUBSET_KERNELS='Cases/GemmFastVsRef.*:OnednnGemm.*:GemmReproducibleDouble.*:Backends/*'\
':Cases/Conv2dFastVsRef.*:Conv2dFast.*:ConvRef.*:Conv2dOnednn.*:Cases/ConvBlockFast.*:Cases/ConvBlockFastExact.*:ConvBlockFastLimits.*'\
':Cases/Pool2dFastVsRef.*:Cases/AvgPool2dFastVsRef.*:Cases/Pool2dFastBlocked.*:Pool2dFastBlocked.*:Pool2dRef.*'\
':Shapes/BatchNormFast.*:BatchNormFast.*:BatchNormGradCheck.*:BatchNormSemantics.*:BnReluFusion.*'\
':ActivationFast.*:ActivationKernels.*:SoftmaxXentFast.*:All/RnnFastVsRef.*:RnnFast.*:RnnOp.*:Cells/*'\
':SgdKernels.*:OptimRule.*:AdaptiveKernels.*:Adam.*:Rmsprop.*:Embedding.*:Cases/GradCheck*'\
':Quant*:Cases/QConvFast.*:QConvFast.*:QDenseFast.*:QAddFast.*:QMaxPool2dFast.*:QGlobalAvgPoolFast.*'\
':GradientAttack.*:SinglePixel.*:Boundary.*:*/BoundaryRules.*:Stats.*:EightBit.*:Png.*:Robustness.*'
SUBSET_READERS='Idx.*:Npy.*:Cifar.*:Imdb.*:Datasets.*:ModelFile.*:WeightsNpy.*:Checkpoint.*:OnnxRoundTrip.*'
SUBSET_LARGE_ROWS='*b128*:*b64*:*vgg16*:*splitk_conv_dw_like*:*resnet20_s2*:*resnet20_s3*:*resnet_stage1*'\
':*resnet20_stage3*:*resnet20_downsample*'
# whole int8 models through the kernels above (what they add is the layers' wiring: the full run)
SUBSET_MODELS='Cases/GradCheckModel.*:QuantPtq.*:QuantGraph.*:QuantFastModel.*:QuantDynamicModel.*'\
':QuantDynamicFast.LstmAndGruClassifiersGiveTheReferenceLogits'
SUBSET_FILTER="$SUBSET_KERNELS:$SUBSET_READERS:-$SUBSET_LARGE_ROWS:$SUBSET_MODELS"

# --print-subset-filter: the filter alone (scripts/isa-check.sh runs the same subset).
if [[ ${1:-} == --print-subset-filter ]]; then
  echo "$SUBSET_FILTER"
  exit 0
fi

# --check-subset FULL SUBSET (ctest sanitize_subset_complete, in any build): the subset's filter
# must select the same tests from driftlab_tests as from driftlab_subset_tests (CMakeLists.txt's
# DRIFTLAB_SUBSET_TEST_SOURCES, the only files the sanitized build compiles).
if [[ ${1:-} == --check-subset ]]; then
  # names only: a parameterised test's GetParam() comment can print pointers
  full=$("$2" --gtest_list_tests --gtest_filter="$SUBSET_FILTER" | sed 's/  # GetParam.*//')
  sub=$("$3" --gtest_list_tests --gtest_filter="$SUBSET_FILTER" | sed 's/  # GetParam.*//')
  if [[ "$full" != "$sub" ]]; then
    echo "the sanitizer subset's tests are not all in DRIFTLAB_SUBSET_TEST_SOURCES (CMakeLists.txt):"
    diff <(echo "$full") <(echo "$sub") || true
    exit 1
  fi
  echo "sanitizer subset: $(grep -c '^  ' <<< "$full") tests, all in driftlab_subset_tests"
  exit 0
fi

filter='-Torch*:Tfjs*:RandomVsTorch*'  # everything but the oracle suites (PyTorch/node children, not our code)
tests=driftlab_tests
targets=(driftlab driftlab_tests)
if [[ ${1:-} == --subset ]]; then
  # only the subset's files, and no CLI (no subset test runs it): a third of the test compile
  filter=$SUBSET_FILTER
  tests=driftlab_subset_tests
  targets=(driftlab_subset_tests)
  shift
fi

# clang (as the fuzz targets need): with SANITIZE_WITH_FUZZ=1 the same folder also builds the
# libFuzzer targets (CMake DRIFTLAB_FUZZ), so that CI compiles the sanitized libraries once for
# both (scripts/test.sh then runs FUZZ_BUILD_DIR=build-asan FUZZ_NO_BUILD=1 scripts/fuzz.sh).
fuzz=OFF
if [[ -n ${SANITIZE_WITH_FUZZ:-} ]]; then
  fuzz=ON
  targets+=(driftlab_fuzz)
fi
start=$SECONDS
# -gline-tables-only: reports keep file:line (what the symbolizer needs) without full debug info,
# which cost 7-26% more compile time per file (gemm_eigen.cpp 55 s against 41 s under ASan).
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DDRIFTLAB_SANITIZE=ON -DDRIFTLAB_FUZZ=$fuzz -DDRIFTLAB_CUDA=OFF \
  -DDRIFTLAB_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" "${CMAKE_EXTRA[@]}"
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"
built=$SECONDS

# halt_on_error / -fno-sanitize-recover: the first report ends the process with an error, so a
# report cannot scroll by in a passing run. detect_leaks: LeakSanitizer at exit.
# The suppressions file names each suppressed leak and says why (scripts/lsan.supp).
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0
# Idle OpenMP threads sleep rather than spin (as in ctest, CMakeLists.txt).
export OMP_WAIT_POLICY=passive

status=0
"$BUILD_DIR/$tests" --gtest_filter="$filter" "$@" || status=$?
end=$SECONDS
echo "sanitize.sh: filter '$filter': build $((built - start)) s, tests $((end - built)) s, total $((end - start)) s, exit $status"
exit $status
