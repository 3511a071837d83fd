#!/usr/bin/env python3
"""LeNet-5 int8 inference in PyTorch 1.13, for side-by-side timing with bench/bm_quant.cpp.

Run with the Debian Python that has python3-torch (/usr/bin/python3):

  quant_torch.py [--threads 1,2] [--inputs 1000] [--batches 1000,100]

The model is the same LeNet-5 as models/lenet.cpp (lenet_torch.lenet5), quantized by eager
post-training static quantization the way tests/oracles/torch/quant_oracle.py run_ptq does:
conv/linear + ReLU fused, QuantStub/DeQuantStub around the body, the engine's default qconfig,
calibration on 64 synthetic images, convert. Engines: qnnpack and onednn (Debian's build has no
fbgemm). Also the float32 model. Timing: the best of 5 passes over `inputs` uniform [0,1)
images in batches of `batch`, after one warm-up pass, under torch.no_grad() and
torch.set_num_threads(threads) (OMP_WAIT_POLICY is left as the caller sets it). Prints one JSON
object per measurement: {"model", "engine", "batch", "threads", "inputs", "seconds", "img_per_s"}.
"""
import argparse, json, os, sys, time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lenet_torch import lenet5  # noqa: E402


def quantized_lenet5(engine, calib):
    from torch.ao.quantization import DeQuantStub, QuantStub, convert, fuse_modules, get_default_qconfig, prepare
    torch.backends.quantized.engine = engine
    torch.manual_seed(1)
    body = lenet5().eval()
    pairs = [[str(i), str(i + 1)] for i, m in enumerate(body)
             if isinstance(m, (nn.Conv2d, nn.Linear)) and i + 1 < len(body) and isinstance(body[i + 1], nn.ReLU)]
    fuse_modules(body, pairs, inplace=True)

    class Wrapped(nn.Module):
        def __init__(self, b):
            super().__init__()
            self.quant, self.body, self.dequant = QuantStub(), b, DeQuantStub()

        def forward(self, x):
            return self.dequant(self.body(self.quant(x)))

    model = Wrapped(body).eval()
    model.qconfig = get_default_qconfig(engine)
    prepare(model, inplace=True)
    with torch.no_grad():
        model(calib)
    convert(model, inplace=True)
    return model


def best_seconds(model, x, batch, reps=5):
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
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--inputs', type=int, default=1000)
    ap.add_argument('--batches', default='1000,100')
    a = ap.parse_args()
    g = torch.Generator().manual_seed(3)
    x = torch.rand(a.inputs, 1, 28, 28, generator=g)
    calib = torch.rand(64, 1, 28, 28, generator=g)
    for threads in [int(t) for t in a.threads.split(',')]:
        torch.set_num_threads(threads)
        models = [('fp32', 'none', lenet5().eval())]
        for engine in ('qnnpack', 'onednn'):
            models.append(('int8', engine, quantized_lenet5(engine, calib)))
        for kind, engine, model in models:
            if engine != 'none':
                torch.backends.quantized.engine = engine  # the engine the model's kernels run on
            for batch in [int(b) for b in a.batches.split(',')]:
                s = best_seconds(model, x, batch)
                print(json.dumps({'model': 'lenet5_' + kind, 'engine': engine, 'batch': batch, 'threads': threads,
                                  'inputs': a.inputs, 'seconds': round(s, 6), 'img_per_s': round(a.inputs / s, 1)}),
                      flush=True)


if __name__ == '__main__':
    main()
