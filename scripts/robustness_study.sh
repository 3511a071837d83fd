#!/usr/bin/env bash
# The robustness study of docs/ROBUSTNESS.md: LeNet-1 and LeNet-5 trained on
# Fashion-MNIST under each of the three presets (torch, tensorflow, theano; SGD momentum 0.9,
# batch 128, seed 1), each quantized to int8 by the TFLite scheme (calibration: the first 1000
# training images), then per architecture:
#
#   s1:       the attacks of Guo et al.'s study (docs/GLOSSARY.md) under Foolbox 2's conventions:
#             FGSM's epsilon sweep (epsilons 100, max_epsilon 0.1), BIM with Foolbox 2's defaults
#             (its eps search from 0.3, step 0.05/0.3 of eps, 10 iterations, return_early),
#             Boundary (iterations 100, max_directions 5), single-pixel (max_pixels 100); the int8
#             models' FGSM and BIM examples crafted on their fp32 model (transfer), Boundary and
#             single-pixel queried on the integer model.
#   fb3:      the same models under Foolbox 3's conventions: FGSM at one eps 0.1 and BIM
#             (10 steps of rel_stepsize 0.2 * eps), the Foolbox 2 vs Foolbox 3 difference on FGSM.
#   ste:      white-box attacks ON the int8 models (straight-through gradients of the
#             fake-quantized graph, quant/ste.h) beside the same int8 model attacked by transfer
#             from its fp32 model and the fp32 model itself (torch preset; Foolbox 3's FGSM at
#             eps 0.1 and BIM).
#   uint8:    the 8-bit round trip of Abyane & Hemmati's study (docs/GLOSSARY.md) on the fp32
#             torch LeNet-5's Boundary examples, under Guo et al.'s Boundary settings (Foolbox 2,
#             100 iterations, 5 directions) and Abyane & Hemmati's own (Foolbox 3, 5000 steps),
#             the first 1000 test images.
#
# Each run's samples are the test images every compared model classifies correctly (at most
# SAMPLES of them), REPEATS runs with seeds 1.. (Guo et al.: 1000 images, 10 repeats).
#
#   scripts/robustness_study.sh [OUT_DIR]     (env: EPOCHS=5 SAMPLES=1000 REPEATS=3 THREADS=2
#                                              PARTS="s1 fb3 ste uint8")
#
# Needs build/driftlab, python3-matplotlib, the data in /usr/share/datasets/fashion-mnist.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-robustness-study}
EPOCHS=${EPOCHS:-5}
SAMPLES=${SAMPLES:-1000}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
PARTS=${PARTS:-s1 fb3 ste uint8}
BIN=build/driftlab
want() { [[ " $PARTS " == *" $1 "* ]]; }
mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*"; }

for arch in lenet1 lenet5; do
  for preset in torch tensorflow theano; do
    d="$OUT/$arch-$preset"
    if [ ! -f "$d/model.dlm" ]; then
      log "train $arch $preset"
      "$BIN" train --model "$arch" --policy "$preset" --epochs "$EPOCHS" --seed 1 --threads "$THREADS" \
        --no-progress --out "$d" > "$d.train.log"
    fi
    if [ ! -f "$d/int8.dlm" ]; then
      log "quantize $arch $preset"
      "$BIN" quantize --weights "$d/model.dlm" --scheme tflite --calib 1000 --threads "$THREADS" \
        --out "$d/int8.dlm" > "$d.quantize.log"
    fi
  done
  models=() crafts=()
  for preset in torch tensorflow theano; do
    models+=(--model "$preset=$OUT/$arch-$preset/model.dlm" --model "$preset-int8=$OUT/$arch-$preset/int8.dlm")
    crafts+=(--craft "$preset-int8=$preset")
  done
  if want s1; then
  log "s1 $arch"
  "$BIN" robustness "${models[@]}" "${crafts[@]}" --convention foolbox2 --attacks fgsm,bim,boundary,single-pixel \
    --epsilons 100 --max-epsilon 0.1 --iterations 100 --max-directions 5 \
    --max-pixels 100 --samples "$SAMPLES" --repeats "$REPEATS" --threads "$THREADS" --out "$OUT/$arch-s1"
  fi
  if want fb3; then
  log "fb3 $arch"
  "$BIN" robustness "${models[@]}" "${crafts[@]}" --convention foolbox3 --attacks fgsm,bim --eps 0.1 \
    --samples "$SAMPLES" --repeats 1 --threads "$THREADS" --out "$OUT/$arch-fb3"
  fi
  if want ste; then
  log "ste $arch"
  "$BIN" robustness --model "fp32=$OUT/$arch-torch/model.dlm" --model "int8-ste=$OUT/$arch-torch/int8.dlm" \
    --model "int8-transfer=$OUT/$arch-torch/int8.dlm" --craft int8-transfer=fp32 --convention foolbox3 \
    --attacks fgsm,bim --eps 0.1 --samples "$SAMPLES" --repeats 1 --threads "$THREADS" --out "$OUT/$arch-ste"
  fi
done

want uint8 && log "uint8"
want uint8 && for rule in off round; do
  extra=()
  [ "$rule" = off ] || extra=(--uint8 "$rule")
  "$BIN" attack --weights "$OUT/lenet5-torch/model.dlm" --attack boundary --iterations 100 \
    --max-directions 5 --limit 1000 --threads "$THREADS" "${extra[@]}" --out "$OUT/uint8-boundary-$rule" > /dev/null
  "$BIN" attack --weights "$OUT/lenet5-torch/model.dlm" --attack boundary --boundary-rules foolbox3 \
    --iterations 5000 --limit 1000 --threads "$THREADS" "${extra[@]}" --out "$OUT/uint8-boundary-fb3-$rule" > /dev/null
done
log "done: $OUT"
