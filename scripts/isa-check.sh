#!/usr/bin/env bash
# Another CPU's code paths on this machine (kernels/cpu/cpu_isa.h): builds driftlab for that CPU
# (-DDRIFTLAB_MARCH) into build-<cpu>, then runs the kernel and reader subset of the tests
# (scripts/sanitize.sh --print-subset-filter: every kernel family, fast beside reference) with
# every run-time choice capped at that CPU's level: DRIFTLAB_MAX_CPU_ISA for driftlab's own int8 and
# rounding kernels, ONEDNN_MAX_CPU_ISA for oneDNN's JIT code, ATEN_CPU_CAPABILITY for PyTorch.
#   scripts/isa-check.sh cascadelake|skylake-avx512|haswell [--no-tests] [gtest arguments...]
# The same caps exported, `bench/compare --build build-<cpu>` times that CPU's paths (docs/BENCHMARKS.md,
# "Cascade Lake's code paths on a Zen 5"). What this cannot show: the other CPU's clocks (Intel's
# AVX-512 frequency licences), caches and ports; only its instruction selection.
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=${1:?usage: scripts/isa-check.sh cascadelake|skylake-avx512|haswell [--no-tests] [gtest arguments...]}
shift
case $cpu in
  cascadelake) dl=avx512_core_vnni onednn=AVX512_CORE_VNNI aten=avx512 need=avx512vnni ;;
  skylake-avx512) dl=avx512_core onednn=AVX512_CORE aten=avx512 need=avx512bw ;;
  haswell) dl=avx2 onednn=AVX2 aten=avx2 need=avx2 ;;
  *) echo "isa-check.sh: unknown cpu '$cpu' (known: cascadelake, skylake-avx512, haswell)" >&2; exit 2 ;;
esac
if ! grep -qw "$(sed 's/avx512vnni/avx512_vnni/' <<< "$need")" /proc/cpuinfo; then
  echo "isa-check.sh: this CPU has no $need: it cannot run $cpu's code" >&2
  exit 2
fi
tests=1
if [[ ${1:-} == --no-tests ]]; then tests=0; shift; fi
BUILD_DIR=${ISA_BUILD_DIR:-build-$cpu}
start=$SECONDS
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDRIFTLAB_MARCH="$cpu" -DDRIFTLAB_CUDA=OFF >/dev/null
targets=(driftlab bm_peak bm_gemm)
[[ $tests == 1 ]] && targets+=(driftlab_subset_tests)
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"
built=$SECONDS
export DRIFTLAB_MAX_CPU_ISA=$dl ONEDNN_MAX_CPU_ISA=$onednn ATEN_CPU_CAPABILITY=$aten
echo "isa-check.sh: $cpu: DRIFTLAB_MAX_CPU_ISA=$dl ONEDNN_MAX_CPU_ISA=$onednn ATEN_CPU_CAPABILITY=$aten"
"$BUILD_DIR/driftlab" device | head -1
status=0
if [[ $tests == 1 ]]; then
  export OMP_WAIT_POLICY=passive  # as in ctest (CMakeLists.txt)
  "$BUILD_DIR/driftlab_subset_tests" --gtest_filter="$(bash scripts/sanitize.sh --print-subset-filter)" "$@" || status=$?
fi
echo "isa-check.sh: $cpu: build $((built - start)) s, tests $((SECONDS - built)) s, exit $status"
exit $status
