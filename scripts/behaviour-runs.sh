#!/usr/bin/env bash
# Runs a fixed set of driftlab commands with one binary and keeps every file they write and
# everything they print: train (LeNet-5, ResNet-20, LSTM), eval, quantize (static and dynamic),
# attack (FGSM, BIM, Boundary on int8), robustness, export (ONNX, TF.js, int8 QDQ/QOperator),
# convert (against ONNX Runtime), weights export, drift, attribute, policy, model and explain.
# Used to show that a refactoring changed no behaviour: run it with the binaries of two commits,
# then compare the two folders with scripts/behaviour-compare.py (which sets timings and the
# build's commit aside, and nothing else).
#   bash scripts/behaviour-runs.sh BUILD/driftlab OUT_DIR
# Takes about 3 minutes on 2 cores; Fashion-MNIST (scripts/install-deps.sh) and, for convert,
# ONNX Runtime (tests/oracles/ort) must be installed.
set -euo pipefail
bin=$(realpath "$1")
out=$2
rm -rf "$out"
mkdir -p "$out"
out=$(realpath "$out")
ort_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/oracles/ort"
export DRIFTLAB_ORT_DIR=${DRIFTLAB_ORT_DIR:-$ort_dir}
cd "$out"
n=0
# run NAME ARGS...: the command's stdout, stderr and exit code go to NAME.{out,err,rc}.
run() {
  local name=$1
  shift
  n=$((n + 1))
  local rc=0
  "$bin" "$@" >"$name.out" 2>"$name.err" || rc=$?
  echo "$rc" >"$name.rc"
}
t=(--threads 2 --no-progress)
run train-lenet5 train --model lenet5 --policy torch --epochs 1 --batch 64 --lr 0.05 --momentum 0.9 --seed 1 \
  --limit 2000 "${t[@]}" --out train-lenet5
run train-resnet20 train --model resnet20 --dataset synthetic-cifar10 --limit 256 --policy torch --epochs 1 \
  --batch 64 --lr 0.05 --momentum 0.9 --seed 2 "${t[@]}" --out train-resnet20
run train-lstm train --model lstm --dataset seq-fashion-mnist --limit 1000 --policy theano --epochs 1 --batch 50 \
  --optimizer adam --lr 1e-3 --seed 3 "${t[@]}" --out train-lstm
m=train-lenet5/model.dlm
run eval eval --weights "$m" --limit 1000 --threads 2
run eval-resnet20 eval --weights train-resnet20/model.dlm --dataset synthetic-cifar10 --limit 200 --threads 2
run quantize quantize --weights "$m" --scheme tflite --calib 200 --limit 1000 --threads 2 --out q.dlm
run quantize-ort quantize --weights "$m" --scheme ort --calib 200 --limit 1000 --threads 2 --out q-ort.dlm
run quantize-resnet20 quantize --weights train-resnet20/model.dlm --dataset synthetic-cifar10 --scheme torch_fbgemm \
  --calib 64 --limit 200 --threads 2 --out q-resnet20.dlm
run quantize-dyn quantize --weights train-lstm/model.dlm --dataset seq-fashion-mnist --mode dynamic --limit 500 \
  --threads 2 --out q-lstm.dlm
run attack-fgsm attack --weights "$m" --attack fgsm --eps 0.1 --limit 200 --threads 2 --out attack-fgsm
run attack-bim attack --weights "$m" --attack bim --eps 0.05 --step 0.01 --steps 5 --limit 100 --threads 2 \
  --convention torchattacks --out attack-bim
run attack-int8 attack --weights q.dlm --attack fgsm --eps 0.1 --limit 100 --threads 2 --judge "$m" --out attack-int8
run attack-boundary attack --weights q.dlm --attack boundary --iterations 20 --limit 10 --threads 2 \
  --out attack-boundary
run robustness robustness --model fp32="$m" --model int8=q.dlm --craft int8=fp32 --attacks fgsm,bim,boundary \
  --iterations 10 --samples 20 --repeats 2 --limit 100 --threads 2 --no-chart --out robustness
run export-onnx export --weights "$m" --format onnx --out lenet5.onnx
run export-onnx-lstm export --weights train-lstm/model.dlm --format onnx --out lstm.onnx
run export-tfjs export --weights train-resnet20/model.dlm --format tfjs --out tfjs
run export-qdq export --weights q-ort.dlm --quant-form qdq --out q-qdq.onnx
run export-qop export --weights q-ort.dlm --quant-form qop --out q-qop.onnx
run import import lenet5.onnx --policy tensorflow --out imported.dlm
run convert convert --weights "$m" --to onnx --check --limit 200 --repeats 1 --threads 2 --out convert
run convert-adv convert --weights "$m" --to onnx --check --limit 200 --repeats 1 --threads 2 \
  --adversarial attack-fgsm --out convert-adv
run convert-report convert-report convert-adv
run weights-export weights export --weights "$m" --out weights
run drift drift --weights "$m" --policies tensorflow,theano,torch --limit 500 --threads 2 --json drift.json
run drift-quant drift --weights "$m" --policies "torch;torch,quant_scheme=tflite" --quantize 200 --limit 300 \
  --threads 2 --json drift-quant.json
run attribute attribute --weights "$m" --from tensorflow --to torch --limit 300 --threads 2 --json attribute.json
run attribute-quant attribute --weights "$m" --from torch --to torch,quant_scheme=ort --quantize 200 --limit 300 \
  --threads 2
run policy-show policy show tensorflow
run policy-diff policy diff tensorflow torch
run model-show model show resnet20 --policy tensorflow
run explain explain conv_same_pad
run bad-knob train --model lenet5 --policy torch,no_such_knob=1 --out bad
echo "behaviour-runs: $n commands, outputs in $out"
