#!/usr/bin/env bash
# The unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (CMake DRIFTLAB_SANITIZE):
# configures ${ASAN_BUILD_DIR:-build-asan} (CPU only, no benchmarks, -O1 -g with assertions on),
# builds driftlab and driftlab_tests, runs the tests; any sanitizer report fails the run.
#   scripts/sanitize.sh            every test (about N minutes on 2 cores: docs/RELIABILITY.md)
#   scripts/sanitize.sh --subset   the CI subset (SUBSET_FILTER below)
#   extra arguments go to driftlab_tests, e.g. --gtest_filter=Conv2d*
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}

# The CI subset: SUBSET_FILTER (see the comment there).
SUBSET_FILTER='*'

filter='-Torch*:Tfjs*:RandomVsTorch*'  # everything but the oracle suites (PyTorch/node children, not our code)
if [[ ${1:-} == --subset ]]; then
  filter=$SUBSET_FILTER
  shift
fi

start=$SECONDS
cmake -S . -B "$BUILD_DIR" -DDRIFTLAB_SANITIZE=ON -DDRIFTLAB_CUDA=OFF -DDRIFTLAB_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g"
cmake --build "$BUILD_DIR" -j"$(nproc)" --target driftlab driftlab_tests
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
"$BUILD_DIR/driftlab_tests" --gtest_filter="$filter" "$@" || status=$?
end=$SECONDS
echo "sanitize.sh: filter '$filter': build $((built - start)) s, tests $((end - built)) s, total $((end - start)) s, exit $status"
exit $status
