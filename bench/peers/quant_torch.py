#!/usr/bin/env python3
"""LeNet-5 and ResNet-20 int8 inference in PyTorch 1.13, for side-by-side timing with
bench/bm_quant.cpp.

Run with the Debian Python that has python3-torch (/usr/bin/python3):

  quant_torch.py [--models lenet5,resnet20] [--threads 1,2] [--inputs 1000] [--batches 1000,100]

The models are the same as driftlab's: LeNet-5 (models/lenet.cpp, lenet_torch.lenet5) on 1x28x28
uniform [0,1) images, and ResNet-20 (models/cifar.cpp) on 3x32x32 U(-1,1) images (a normalised
CIFAR batch's range), as tests/oracles/torch/quant_oracle.py's quantizable_resnet20 rewrite
(ReLUs as modules, add_relu through FloatFunctional, AdaptiveAvgPool2d). Each is quantized by
eager post-training static quantization the way quant_oracle.py run_ptq does: conv(+bn)(+relu)
and linear+relu fused, QuantStub/DeQuantStub around the body, the engine's default qconfig,
calibration on 64 synthetic images, convert. Engines: qnnpack and onednn (Debian's build has no
fbgemm). Also the float32 model (ResNet-20: cifar_torch.ResNet20, the plain float module). Timing: the best of --reps (5) passes over `inputs` uniform [0,1)
images in batches of `batch`, after one warm-up pass, under torch.no_grad() and
torch.set_num_threads(threads) (OMP_WAIT_POLICY is left as the caller sets it). Prints one JSON
object per measurement: {"model", "engine", "batch", "threads", "inputs", "seconds", "img_per_s"}.
"""
import argparse, json, os, sys, time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'oracles', 'torch'))
from cifar_torch import ResNet20  # noqa: E402
from lenet_torch import lenet5  # noqa: E402


def quantizable(arch):
    """The float module and its fuse lists."""
    torch.manual_seed(1)
    if arch == 'resnet20':
        from quant_oracle import quantizable_resnet20
        return quantizable_resnet20()
    body = lenet5()
    pairs = [[str(i), str(i + 1)] for i, m in enumerate(body)
             if isinstance(m, (nn.Conv2d, nn.Linear)) and i + 1 < len(body) and isinstance(body[i + 1], nn.ReLU)]
    return body, pairs


def quantized(arch, engine, calib):
    from torch.ao.quantization import DeQuantStub, QuantStub, convert, fuse_modules, get_default_qconfig, prepare
    torch.backends.quantized.engine = engine
    body, pairs = quantizable(arch)
    body.eval()
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
    ap.add_argument('--models', default='lenet5,resnet20')
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--inputs', type=int, default=1000)
    ap.add_argument('--batches', default='1000,100')
    ap.add_argument('--reps', type=int, default=5, help='timed passes (the best is kept)')
    a = ap.parse_args()
    for arch in a.models.split(','):
        g = torch.Generator().manual_seed(3)
        if arch == 'resnet20':
            x = torch.rand(a.inputs, 3, 32, 32, generator=g) * 2 - 1
            calib = torch.rand(64, 3, 32, 32, generator=g) * 2 - 1
        else:
            x = torch.rand(a.inputs, 1, 28, 28, generator=g)
            calib = torch.rand(64, 1, 28, 28, generator=g)
        for threads in [int(t) for t in a.threads.split(',')]:
            torch.set_num_threads(threads)
            torch.manual_seed(1)
            models = [('fp32', 'none', (ResNet20() if arch == 'resnet20' else lenet5()).eval())]
            for engine in ('qnnpack', 'onednn'):
                models.append(('int8', engine, quantized(arch, engine, calib)))
            for kind, engine, model in models:
                if engine != 'none':
                    torch.backends.quantized.engine = engine  # the engine the model's kernels run on
                for batch in [int(b) for b in a.batches.split(',')]:
                    s = best_seconds(model, x, batch, a.reps)
                    print(json.dumps({'model': arch + '_' + kind, 'engine': engine, 'batch': batch,
                                      'threads': threads, 'inputs': a.inputs, 'seconds': round(s, 6),
                                      'img_per_s': round(a.inputs / s, 1)}), flush=True)


if __name__ == '__main__':
    main()
