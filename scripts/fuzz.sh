#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.cpp, CMake option DRIFTLAB_FUZZ, clang) in
# build-fuzz/ and runs each for SECONDS on a copy of its seed corpus (fuzz/corpus/<target>/;
# inputs libFuzzer adds go to build-fuzz/corpus/, never into the repository), one at a time.
# Prints per target: executions, exec/s, corpus size and whether it crashed; exits 1 if any
# target found something (its input is kept in build-fuzz/artifacts/<target>/).
#
#   scripts/fuzz.sh SECONDS [TARGET...]      e.g. scripts/fuzz.sh 60 fuzz_idx fuzz_npy
#   FUZZ_RUNS=10000000 scripts/fuzz.sh 600 fuzz_idx  stop at 10M executions or 600 s
#   FUZZ_RUNS=10000000 scripts/fuzz.sh 0 fuzz_idx    10M executions, no time limit
#   FUZZ_NO_BUILD=1 ...                      skip configure and build
#
# Limits: -rss_limit_mb=2048 and -malloc_limit_mb=2048 (a single allocation over 2 GiB is a
# finding: no reader may allocate what its input does not hold). docs/RELIABILITY.md, "Fuzzing".
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
build=${FUZZ_BUILD_DIR:-build-fuzz}
if [[ -z "${FUZZ_NO_BUILD:-}" ]]; then
  # Configured every time (quick once the cache exists), so a failed first configure is not
  # built on later; its output is shown only when it fails.
  mkdir -p $build
  if ! CC=clang CXX=clang++ cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DDRIFTLAB_FUZZ=ON \
      -DDRIFTLAB_CUDA=OFF -DDRIFTLAB_TESTS=OFF -DDRIFTLAB_BENCH=OFF >"$build/configure.log" 2>&1; then
    cat "$build/configure.log" >&2
    echo "fuzz.sh: configuring $build failed (needs clang, libclang-rt-14-dev, libomp-14-dev)" >&2
    exit 2
  fi
  cmake --build $build -j"${FUZZ_JOBS:-2}" --target driftlab_fuzz
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for src in fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1)
# Whichever comes first: SECONDS (0: no time limit) or FUZZ_RUNS executions.
[[ $secs -gt 0 ]] && limits+=(-max_total_time="$secs")
[[ -n "${FUZZ_RUNS:-}" ]] && limits+=(-runs="$FUZZ_RUNS")
status=0
printf '%-16s %12s %9s %8s %7s  %s\n' target executions exec/s seconds corpus result
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  work=$build/corpus/$name
  mkdir -p "$work" "$build/artifacts/$name" "$build/logs"
  cp -n fuzz/corpus/"$name"/* "$work"/ 2>/dev/null || true
  dict=()
  [[ -f fuzz/$name.dict ]] && dict=(-dict=fuzz/"$name".dict)
  log=$build/logs/$name.log
  start=$(date +%s)
  rc=0
  "$build/$t" "$work" "${limits[@]}" "${dict[@]}" -artifact_prefix="$build/artifacts/$name/" >"$log" 2>&1 || rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  result=ok
  if [[ $rc -ne 0 ]]; then
    result="FOUND (rc $rc): $(grep -m1 -E 'ERROR: |runtime error|property violated|Test unit written' "$log" || echo see $log)"
    status=1
  fi
  printf '%-16s %12s %9s %8s %7s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$took" "$(ls "$work" | wc -l)" "$result"
done
exit $status
