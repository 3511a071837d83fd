#!/usr/bin/env bash
# The study runner's Slurm executor on a real one-node cluster (scripts/slurm-local.sh), against
# the local executor (docs/STUDIES.md, "On a cluster"; its recorded run is there):
#   1. a small grid (LeNet-1 under two presets, 8 epochs on 1,000 images with a checkpoint every
#      4 steps, and an evaluation of each) run by the local executor;
#   2. the same spec by `study run --executor slurm` (one job array per level); as soon as one
#      train cell has a checkpoint, its array task is requeued with `scontrol requeue` (what a
#      preemption does): Slurm kills it and starts it again, and it must go on from the checkpoint;
#   3. every cell's results.json of the two folders byte for byte equal, and the requeued cell's
#      attempts.txt showing the resume.
#   bash scripts/slurm-study-check.sh [BUILD_DIR]     (exit 0: all held)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DL=$(pwd)/$BUILD/driftlab
W=${SLURM_CHECK_DIR:-/tmp/driftlab-slurm-check}
rm -rf "$W" && mkdir -p "$W"
bash scripts/slurm-local.sh start
eval "$(bash scripts/slurm-local.sh env)"
trap 'bash scripts/slurm-local.sh stop' EXIT
cat > "$W/s.yaml" <<'YAML'
study: slurm-check
title: "LeNet-1 under two presets, evaluated: the Slurm executor against the local one"
steps:
  train:
    do: train
    grid: {policy: [tensorflow, torch]}
    set: {model: lenet1, epochs: 8, limit: 1000, batch: 64, checkpoint_every: 4}
  eval: {do: evaluate, needs: train}
YAML
t0=$SECONDS
"$DL" study run "$W/s.yaml" --out "$W/local" --quiet
echo "local executor: $((SECONDS - t0)) s"
t0=$SECONDS
"$DL" study run "$W/s.yaml" --out "$W/slurm" --executor slurm > "$W/slurm.log" 2>&1 &
runner=$!
# The first train cell with a checkpoint, and the array task that runs it.
cell=""
for _ in $(seq 600); do
  for c in "$W"/slurm/cells/*/; do
    [ -f "$c/run/checkpoint.dlc" ] && [ ! -f "$c/results.json" ] && { cell=$(basename "$c"); break; }
  done
  [ -n "$cell" ] && break
  sleep 0.1
done
[ -n "$cell" ] || { echo "no train cell wrote a checkpoint"; cat "$W/slurm.log"; exit 1; }
read -r _ level _ job _ tasks < <(grep "^level 0 " "$W/slurm/slurm/jobs.txt")
task=$(grep -n "$cell" "$tasks" | cut -d: -f1)
task=$((task - 1))
echo "requeueing ${job}_${task} (cell $cell, $(grep -c . "$W/slurm/cells/$cell/attempts.txt") attempt(s) so far)"
scontrol requeue "${job}_${task}"
wait "$runner" || { echo "study run --executor slurm failed"; cat "$W/slurm.log"; exit 1; }
echo "slurm executor: $((SECONDS - t0)) s"
tail -1 "$W/slurm.log"
echo "attempts of $cell:"
cat "$W/slurm/cells/$cell/attempts.txt"
grep -q "done (resumed from its checkpoint)" "$W/slurm/cells/$cell/attempts.txt" \
  || { echo "the requeued cell did not resume from its checkpoint"; exit 1; }
n=0
for c in "$W"/local/cells/*/; do
  h=$(basename "$c")
  cmp "$c/results.json" "$W/slurm/cells/$h/results.json" || { echo "results differ: $h"; exit 1; }
  n=$((n + 1))
done
echo "results.json of all $n cells equal, byte for byte (local vs Slurm with a requeued task)"
