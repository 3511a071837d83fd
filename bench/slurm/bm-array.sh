#!/usr/bin/env bash
# The Google Benchmark suites as one Slurm job array: one task per suite, each on a node of its
# own (exclusive), JSON out, and beside it what the node was: CPU, cores, GPU, driver, CUDA and the
# commit the binaries were built from. bench/slurm/gather.py then makes the docs/BENCHMARKS.md table.
#
#   bash bench/slurm/bm-array.sh BUILD_DIR OUT_DIR [SUITE...]       (default suites: bm_cuda)
#   env: BM_FILTER (--benchmark_filter, default all), BM_MIN_TIME (default 0.2),
#        SBATCH_EXTRA (default "--gres=gpu:1"; "" on CPU-only nodes), SBATCH_WAIT=1 (wait for the end)
# On a GPU cluster: bash bench/slurm/bm-array.sh build out bm_cuda bm_train && python3 bench/slurm/gather.py out
# Tested on the one-node cluster of scripts/slurm-local.sh with CPU suites (SBATCH_EXTRA=""):
# docs/STUDIES.md, "On a cluster".
set -euo pipefail
BUILD=$(cd "${1:?usage: bm-array.sh BUILD_DIR OUT_DIR [SUITE...]}" && pwd)
mkdir -p "${2:?}"
OUT=$(cd "$2" && pwd)
shift 2
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bm_cuda)
for s in "${suites[@]}"; do
  [ -x "$BUILD/$s" ] || { echo "bm-array: $BUILD/$s is not built" >&2; exit 2; }
done
printf '%s\n' "${suites[@]}" > "$OUT/suites.txt"
commit=$(git -C "$(dirname "$0")" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
cat > "$OUT/task.sh" <<EOT
#!/usr/bin/env bash
# One suite per array task (written by bench/slurm/bm-array.sh).
set -uo pipefail
suite=\$(sed -n "\$((SLURM_ARRAY_TASK_ID + 1))p" "$OUT/suites.txt")
node="$OUT/\$suite.node.txt"
{
  echo "suite: \$suite"
  echo "commit: $commit"
  echo "host: \$(hostname)"
  echo "date: \$(date -u +%FT%TZ)"
  echo "slurm: job \${SLURM_ARRAY_JOB_ID}_\${SLURM_ARRAY_TASK_ID}, cpus \${SLURM_CPUS_ON_NODE:-?}"
  echo "cpu: \$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "cores: \$(nproc)"
  if command -v nvidia-smi >/dev/null; then
    echo "gpu: \$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
    echo "cuda: \$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"
  else
    echo "gpu: none"
  fi
} > "\$node"
"$BUILD/\$suite" --benchmark_format=json --benchmark_out="$OUT/\$suite.json" --benchmark_out_format=json \
  --benchmark_min_time=${BM_MIN_TIME:-0.2} --benchmark_filter='${BM_FILTER:-.}' > "$OUT/\$suite.log" 2>&1
echo "exit: \$?" >> "\$node"
EOT
chmod +x "$OUT/task.sh"
wait_flag=()
[ "${SBATCH_WAIT:-0}" = 1 ] && wait_flag=(--wait)
# shellcheck disable=SC2086
job=$(sbatch --parsable "${wait_flag[@]}" --job-name=dl-bench --array=0-$((${#suites[@]} - 1)) --exclusive \
  --output="$OUT/slurm-%a.out" ${SBATCH_EXTRA---gres=gpu:1} "$OUT/task.sh")
echo "submitted job $job: ${#suites[@]} suite(s) into $OUT"
