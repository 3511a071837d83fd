#!/usr/bin/env bash
# Per-kernel GPU time profiles of driftlab's and PyTorch's same step, on a lent GPU machine
# (called by scripts/gpu-run.sh remote; bench/kprof/kprof.cpp says what the tables hold).
#
#   bash scripts/gpu-profile.sh PACKDIR OUT.md [STEPS]
#
# Each case MODEL:BATCH:train|predict (DRIFTLAB_PROFILE_CASES, default below) runs STEPS times
# (default 50) inside a profiler window, after two warm-up runs: driftlab's bench/kprof/cuda_step
# (cuDNN/cuBLAS, then the own kernels for training) and bench/peers/cuda_torch.py --profile.
set -uo pipefail
base=$1 out=$2 steps=${3:-50}
cases=${DRIFTLAB_PROFILE_CASES:-lenet5:64:train resnet20:128:train lenet5:10000:predict lstm:128:predict}
here=$(cd "$(dirname "$0")/.." && pwd)
export CUDA_INJECTION64_PATH=$base/lib/libdl_kprof.so DRIFTLAB_KPROF_WINDOW=1 DRIFTLAB_KPROF_STEPS=$steps
export DRIFTLAB_KPROF_OUT=$out
rc=0
for c in $cases; do
  IFS=: read -r model batch mode <<< "$c"
  impls=vendor
  [ "$mode" = train ] && impls="vendor own"
  for impl in $impls; do
    DRIFTLAB_KPROF_TITLE="driftlab $model b$batch $mode ($impl kernels), per step" \
      "$base/bin/cuda_step" "$model" "$batch" "$mode" "$steps" "$impl" >> "$out" 2>&1 || rc=1
  done
  DRIFTLAB_KPROF_TITLE="PyTorch $model b$batch $mode, per step" \
    python3 "$here/bench/peers/cuda_torch.py" --profile "$c" --steps "$steps" >> "$out" 2>&1 || rc=1
done
exit $rc
