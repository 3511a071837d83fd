#!/usr/bin/env python3
"""The LSTM classifier of driftlab's models/rnn.cpp (rnn_torch.Classifier: 28 steps of 28
features, nn.LSTM 128 units batch_first, last step, nn.Linear(128, 10)) in PyTorch 1.13, float32
and dynamically quantized (torch.ao.quantization.quantize_dynamic, default_dynamic_qconfig, qint8
weights of the LSTM and the Linear) on the qnnpack and onednn engines, for side-by-side timing
with bench/bm_quant_dynamic.cpp.

Run with the Debian Python that has python3-torch (/usr/bin/python3):

  rnn_dynamic_torch.py [--threads 1] [--inputs 1000] [--batches 256,1000] [--reps 5]

Timing: the best of --reps passes over `inputs` U(0,1) sequences in batches of `batch` (the last
batch smaller when batch does not divide inputs), after one warm-up pass, under torch.no_grad()
and torch.set_num_threads(threads). Prints one JSON object per measurement:
{"model", "engine", "batch", "threads", "inputs", "seconds", "ms_per_1000"}.
"""
import argparse, json, os, sys, time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rnn_torch import Classifier  # noqa: E402


def best_seconds(model, x, batch, reps):
    chunks = list(torch.split(x, batch))
    with torch.no_grad():
        for c in chunks:  # warm-up
            model(c)
        best = float('inf')
        for _ in range(reps):
            t0 = time.perf_counter()
            for c in chunks:
                model(c)
            best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', default='1')
    ap.add_argument('--inputs', type=int, default=1000)
    ap.add_argument('--batches', default='256,1000')
    ap.add_argument('--reps', type=int, default=5, help='timed passes (the best is kept)')
    a = ap.parse_args()
    from torch.ao.quantization import quantize_dynamic
    x = torch.rand(a.inputs, 28, 28, generator=torch.Generator().manual_seed(3))
    for threads in [int(t) for t in a.threads.split(',')]:
        torch.set_num_threads(threads)
        torch.manual_seed(1)
        fp32 = Classifier('lstm').eval()
        models = [('fp32', 'none', fp32)]
        for engine in ('qnnpack', 'onednn'):
            torch.backends.quantized.engine = engine
            models.append(('int8_dynamic', engine,
                           quantize_dynamic(fp32, {torch.nn.LSTM, torch.nn.Linear}, dtype=torch.qint8)))
        for kind, engine, model in models:
            if engine != 'none':
                torch.backends.quantized.engine = engine  # the engine the model's kernels run on
            for batch in [int(b) for b in a.batches.split(',')]:
                s = best_seconds(model, x, batch, a.reps)
                print(json.dumps({'model': 'lstm_' + kind, 'engine': engine, 'batch': batch, 'threads': threads,
                                  'inputs': a.inputs, 'seconds': round(s, 6),
                                  'ms_per_1000': round(1000 * s * 1000 / a.inputs, 3)}), flush=True)


if __name__ == '__main__':
    main()
