#!/usr/bin/env bash
# Trains the payload-check set with one driftlab binary and prints each model file's payload hash
# (scripts/payload-hash.py): LeNet-5 and LSTM on Fashion-MNIST (one full epoch), GRU (6,000
# sequences), ResNet-20 on synthetic CIFAR (1,024 images: BatchNorm, residuals), each under the
# torch, tensorflow and theano presets, seed 1, 2 threads.
#   bash scripts/payload-runs.sh BUILD/driftlab OUT_DIR
# Run it with the binaries of two commits: equal hashes mean equal weights, bit for bit.
set -euo pipefail
bin=$1 out=$2
mkdir -p "$out"
common=(--epochs 1 --seed 1 --threads 2 --no-progress --lr 0.05 --momentum 0.9)
for preset in torch tensorflow theano; do
  "$bin" train --model lenet5 --policy "$preset" --batch 128 "${common[@]}" --out "$out/lenet5-$preset" >/dev/null 2>&1
  "$bin" train --model lstm --dataset seq-fashion-mnist --policy "$preset" --batch 128 "${common[@]}" \
    --out "$out/lstm-$preset" >/dev/null 2>&1
  "$bin" train --model gru --dataset seq-fashion-mnist --limit 6000 --policy "$preset" --batch 128 "${common[@]}" \
    --out "$out/gru-$preset" >/dev/null 2>&1
  "$bin" train --model resnet20 --dataset synthetic-cifar10 --limit 1024 --policy "$preset" --batch 64 "${common[@]}" \
    --out "$out/resnet20-$preset" >/dev/null 2>&1
done
python3 "$(dirname "$0")/payload-hash.py" "$out"/*/model.dlm | sed "s|$out/||"
