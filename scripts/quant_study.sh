#!/usr/bin/env bash
# The int8 study of docs/QUANT.md: LeNet-1 and LeNet-5 trained on Fashion-MNIST (torch preset,
# SGD momentum 0.9, batch 128, seed 1), quantized under every toolchain's scheme (calibration: the
# first 1000 training images in file order, batches of 32), each int8 model's test accuracy,
# per-layer SQNR and time (driftlab quantize --report), and the pairwise disagreement of the
# schemes' predictions on the 10,000 test images.
#
#   scripts/quant_study.sh [OUT_DIR] [EPOCHS]       (defaults: quant-study, 3)
#
# The LSTM and GRU classifiers (seq-fashion-mnist: 28 steps of 28 features; torch preset, 3 epochs, the
# recipe of docs/RNN.md) are quantized dynamically (int8 weights, each input's scale chosen per call:
# `quantize --mode auto` picks it for recurrent models) under the same five schemes.
#
# Needs build/driftlab and /usr/bin/python3 with numpy; the data in /usr/share/datasets/fashion-mnist.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-quant-study}
EPOCHS=${2:-3}
BIN=build/driftlab
DATA=/usr/share/datasets/fashion-mnist
SCHEMES="tflite torch_qnnpack torch_onednn torch_fbgemm ort"
mkdir -p "$OUT"
/usr/bin/python3 - "$DATA" "$OUT/test.npy" <<'PY'
import gzip, os, sys
import numpy as np
d, out = sys.argv[1], sys.argv[2]
def idx(stem):
    for n in (stem, stem + '.gz'):
        p = os.path.join(d, n)
        if os.path.exists(p):
            raw = open(p, 'rb').read()
            raw = gzip.decompress(raw) if raw[:2] == b'\x1f\x8b' else raw
            dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], 'big') for i in range(raw[3])]
            return np.frombuffer(raw, np.uint8, offset=4 + 4 * raw[3]).reshape(dims)
    raise SystemExit('missing ' + stem)
np.save(out, (idx('t10k-images-idx3-ubyte').astype(np.float32) / 255.0)[:, None])
np.save(out.replace('test.npy', 'labels.npy'), idx('t10k-labels-idx1-ubyte').astype(np.int64))
np.save(out.replace('test.npy', 'test_seq.npy'), idx('t10k-images-idx3-ubyte').astype(np.float32) / 255.0)
PY
for m in lenet1 lenet5 lstm gru; do
  case $m in
    lenet*) IN=test.npy; TRAIN="--epochs $EPOCHS" ;;
    *) IN=test_seq.npy; TRAIN="--dataset seq-fashion-mnist --epochs $EPOCHS --batch 128 --lr 0.05 --momentum 0.9 --normalize" ;;
  esac
  # shellcheck disable=SC2086
  [ -f "$OUT/$m/model.dlm" ] || $BIN train --model $m $TRAIN --no-progress --seed 1 --out "$OUT/$m"
  $BIN predict --weights "$OUT/$m/model.dlm" --input "$OUT/$IN" --output "$OUT/$m.fp32.npy"
  for s in $SCHEMES; do
    DATA_ARG=""
    case $m in lenet*) ;; *) DATA_ARG="--dataset seq-fashion-mnist" ;; esac
    # shellcheck disable=SC2086
    $BIN quantize --weights "$OUT/$m/model.dlm" --scheme $s --calib 1000 --out "$OUT/$m.$s.dlm" $DATA_ARG \
      --report "$OUT/$m.$s.json" > "$OUT/$m.$s.log"
    $BIN predict --weights "$OUT/$m.$s.dlm" --input "$OUT/$IN" --output "$OUT/$m.$s.npy"
  done
done
/usr/bin/python3 - "$OUT" $SCHEMES <<'PY'
import json, sys
import numpy as np
out, schemes = sys.argv[1], sys.argv[2:]
y = np.load(out + '/labels.npy')
for m in ('lenet1', 'lenet5', 'lstm', 'gru'):
    pred = {'fp32': np.load('%s/%s.fp32.npy' % (out, m)).argmax(1)}
    for s in schemes:
        pred[s] = np.load('%s/%s.%s.npy' % (out, m, s)).argmax(1)
    print('\n### %s\n' % m)
    print('| | accuracy | vs fp32 (points) | file bytes | int8/fp32 time | min SQNR (dB) |')
    print('|---|---|---|---|---|---|')
    acc32 = (pred['fp32'] == y).mean()
    print('| fp32 | %.4f | | | | |' % acc32)
    for s in schemes:
        r = json.load(open('%s/%s.%s.json' % (out, m, s)))
        sq = min(float(l['sqnr_db']) for l in r['sqnr'] if l['sqnr_db'] != 'inf')
        print('| %s | %.4f | %+.2f | %d | %.2fx | %.1f |' % (s, (pred[s] == y).mean(), 100 * ((pred[s] == y).mean() - acc32),
              r['file_bytes']['int8'], r['inference_s']['int8'] / r['inference_s']['fp32'], sq))
    names = ['fp32'] + schemes
    print('\nPredictions that differ (of %d test images):\n' % len(y))
    print('| | ' + ' | '.join(names) + ' |')
    print('|---' * (len(names) + 1) + '|')
    for a in names:
        print('| %s | ' % a + ' | '.join(str(int((pred[a] != pred[b]).sum())) for b in names) + ' |')
PY
