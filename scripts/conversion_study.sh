#!/usr/bin/env bash
# The conversion table of Openja et al.'s study (docs/CONVERSION.md; docs/GLOSSARY.md): each model
# exported to ONNX by `driftlab convert` and run on the same test inputs in driftlab and in ONNX
# Runtime (onnxruntime-node, tests/oracles/ort): accuracy before/after, the study's absolute and
# relative errors of the softmax outputs, misclassification, load and inference time, file sizes.
# Models: LeNet-1 and LeNet-5 trained on Fashion-MNIST under each preset (the robustness
# study's, or trained here), the LSTM and GRU classifiers (seq-fashion-mnist, torch
# preset), ResNet-20 and VGG-16 trained one epoch on synthetic CIFAR-shaped data (CIFAR-10 is not
# installable here: their accuracy means nothing, their errors, times and sizes do).
#
#   scripts/conversion_study.sh [OUT_DIR] [MODELS_DIR]   (env: EPOCHS=5 LIMIT=1000 THREADS=2 REPEATS=5)
#
# MODELS_DIR: a robustness-study folder holding lenet{1,5}-{torch,tensorflow,theano}/model.dlm.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-conversion-study}
MODELS=${2:-$OUT/models}
EPOCHS=${EPOCHS:-5}
LIMIT=${LIMIT:-1000}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-5}
BIN=build/driftlab
mkdir -p "$OUT" "$MODELS"
OUT=$(realpath "$OUT") MODELS=$(realpath "$MODELS")
log() { echo "[$(date +%T)] $*"; }
train() {  # name model policy dataset extra...
  local name=$1 model=$2 policy=$3 dataset=$4
  shift 4
  if [ ! -f "$MODELS/$name/model.dlm" ]; then
    log "train $name"
    "$BIN" train --model "$model" --policy "$policy" --dataset "$dataset" --seed 1 --threads "$THREADS" --no-progress \
      --out "$MODELS/$name" "$@" > "$MODELS/$name.train.log"
  fi
}
for arch in lenet1 lenet5; do
  for preset in torch tensorflow theano; do train "$arch-$preset" "$arch" "$preset" fashion-mnist --epochs "$EPOCHS"; done
done
train lstm-torch lstm torch seq-fashion-mnist --epochs 3
train gru-torch gru torch seq-fashion-mnist --epochs 3
train resnet20-torch resnet20 torch synthetic-cifar10 --epochs 1 --limit 2048
train vgg16-torch vgg16 torch synthetic-cifar10 --epochs 1 --limit 512

run() {  # name dataset
  log "convert $1"
  "$BIN" convert --weights "$MODELS/$1/model.dlm" --to onnx --check --dataset "$2" --limit "$LIMIT" \
    --threads "$THREADS" --repeats "$REPEATS" --out "$OUT/$1" > "$OUT/$1.log"
}
for arch in lenet1 lenet5; do for preset in torch tensorflow theano; do run "$arch-$preset" fashion-mnist; done; done
run lstm-torch seq-fashion-mnist
run gru-torch seq-fashion-mnist
run resnet20-torch synthetic-cifar10
run vgg16-torch synthetic-cifar10

/usr/bin/python3 - "$OUT" <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*', 'convert.json'))):
    j = json.load(open(f))
    rows.append('| %s | %s | %s | %.4f | %.4f | %.2e | %.2e | %.2e | %.2e | %.2f | %.1f | %.1f | %.1f | %.1f | %d | %d |' % (
        j['model'], j['policy'], j['inputs'], j['accuracy_before'], j['accuracy_after'], j['abs_err_mean'],
        j['rel_err_mean'], j['max_abs'], j['logits_max_rel'], 100 * j['misclassification'], j['load_ms_before'],
        j['load_ms_after'], j['inference_ms_before'], j['inference_ms_after'], j['size_before'], j['size_after']))
print('| model | preset | inputs | acc. driftlab | acc. ORT | abs. err. (signed mean) | rel. err. (mean) | max abs | logits max rel | miscl. % '
      '| load ms driftlab | load ms ORT | infer. ms driftlab | infer. ms ORT | size driftlab (B) | size ONNX (B) |')
print('|' + '---|' * 16)
print('\n'.join(rows))
PY

# The browser column (the web platform of Guo et al.'s study, docs/GLOSSARY.md): LeNet-1 and
# LeNet-5 (tensorflow preset) as TF.js layers models in headless Chromium (TF.js 4.22, cpu
# backend), model.predict of 1,000 and 10,000 test images, beside driftlab's prediction time and
# ONNX Runtime's on the same inputs.
/usr/bin/python3 - "$OUT" <<'PY'
import numpy as np, sys
x = np.load(sys.argv[1] + '/lenet5-tensorflow/inputs.npy')
np.save(sys.argv[1] + '/inputs10k.npy', np.concatenate([x] * (10000 // len(x) + 1))[:10000])
PY
echo "| model | inputs | driftlab ms | ONNX Runtime ms | TF.js in Chromium ms |" > "$OUT/browser.md"
echo "|---|---|---|---|---|" >> "$OUT/browser.md"
for arch in lenet1 lenet5; do
  m="$MODELS/$arch-tensorflow/model.dlm"
  log "browser $arch"
  "$BIN" export --weights "$m" --format tfjs --out "$OUT/$arch-tfjs" > /dev/null
  node tests/oracles/tfjs/browser.js "$OUT/$arch-tfjs" "$OUT/$arch-tensorflow/inputs.npy" "$OUT/$arch-browser" \
    --nchw --sizes 1000,10000 > "$OUT/$arch-browser.log"
  "$BIN" predict --weights "$m" --sizes 1000 10000 --threads "$THREADS" > "$OUT/$arch-predict.log"
  for n in 1000 10000; do
    x="$OUT/$arch-tensorflow/inputs.npy"; [ "$n" = 10000 ] && x="$OUT/inputs10k.npy"
    node tests/oracles/ort/ort_run.js --model "$OUT/$arch-tensorflow/model.onnx" --x "$x" --out "$OUT/ort$n.npy" \
      --threads "$THREADS" --repeats "$REPEATS" > "$OUT/$arch-ort$n.json"
  done
  /usr/bin/python3 - "$OUT" "$arch" >> "$OUT/browser.md" <<'PY'
import json, re, statistics, sys
out, arch = sys.argv[1], sys.argv[2]
b = json.load(open('%s/%s-browser/browser.json' % (out, arch)))
pred = open('%s/%s-predict.log' % (out, arch)).read()
for i, n in enumerate((1000, 10000)):
    m = re.search(r'^\s*%d inputs: ([0-9.]+) s' % n, pred, re.M)
    o = json.load(open('%s/%s-ort%d.json' % (out, arch, n)))
    print('| %s | %d | %.1f | %.1f | %.1f |' % (arch, n, 1000 * float(m.group(1)), statistics.median(o['run_ms']), b['ms'][i]))
PY
done
cp "$OUT/lenet5-browser/screenshot.png" "$OUT/screenshot.png"
log "done: $OUT"
