#!/usr/bin/env python3
"""How far each math mode moves a training run: LeNet-5 (Fashion-MNIST, batch 64) and ResNet-20
(synthetic CIFAR-shaped data, batch 128) trained 1 and 100 SGD steps from the same initial weights
and batches under the torch preset with math_conv = math_matmul = float32 | tf32 | bfloat16 |
float16, under autocast (bfloat16, float16, float16 with the dynamic loss scale), and, for scale, float32 with another summation order (conv_backend=gemm_backend=eigen,
conv_block_backend=reference: the same arithmetic in Eigen's order instead of oneDNN's). Against the float32 run:
the worst weight tensor's difference per its size (sizes floored at 1% of the model's largest
weight: BatchNorm's beta is one step's update after one step), the logits on 1,000 test inputs
(max difference per the largest logit) and the predictions that differ. Every run predicts under
its own mode.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/math_drift.py [--out DIR] [--steps 1,100]
       [--models lenet5,resnet20] [--modes 'tf32;autocast bfloat16']
Prints a markdown table (docs/REDUCED_PRECISION.md holds one run's).
"""
import argparse
import os
import tempfile

import numpy as np

import driftlab

MODES = [("float32", "torch"),
         ("float32, Eigen kernels", "torch,conv_backend=eigen,gemm_backend=eigen,conv_block_backend=reference"),
         ("tf32", "torch,math_conv=tf32,math_matmul=tf32"),
         ("tf32 (ties away)", "torch,math_conv=tf32,math_matmul=tf32,tf32_rounding=nearest_away"),
         ("bfloat16", "torch,math_conv=bfloat16,math_matmul=bfloat16"),
         ("float16", "torch,math_conv=float16,math_matmul=float16"),
         ("autocast bfloat16", "torch,autocast=bfloat16"),
         ("autocast float16", "torch,autocast=float16"),
         ("autocast float16, dynamic loss scale", "torch,autocast=float16,loss_scale=dynamic"),
         ("autocast float16, bias rounded twice",
          "torch,autocast=float16,conv_bias_rounding=twice,matmul_bias_rounding=twice")]
MODELS = [("lenet5", "fashion-mnist", 64), ("resnet20", "synthetic-cifar10", 128)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--steps", default="1,100")
    ap.add_argument("--models", default="lenet5,resnet20")
    ap.add_argument("--modes", default="", help="the modes to run, by name, ';'-separated (float32 always runs)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="math_drift_")
    print("| model | steps | mode | worst weight tensor (diff / its size, floored) | logits (diff / largest) | predictions differing of 1,000 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, data, batch in MODELS:
        if model not in a.models.split(","):
            continue
        x, _ = driftlab.dataset(data, split="test", limit=1000)
        for steps in [int(s) for s in a.steps.split(",")]:
            runs = {}
            wanted = [m for m in a.modes.split(";") if m]
            modes = [(n, p) for n, p in MODES if n == "float32" or not wanted or n in wanted]
            for name, policy in modes:
                d = os.path.join(out, "%s_%d_%s" % (model, steps, name.replace(" ", "_").replace(",", "").replace("(", "").replace(")", "")))
                driftlab.train(model=model, policy=policy, dataset=data, limit=steps * batch, epochs=1, batch=batch,
                               seed=1, out=d)
                m = driftlab.Model.load(os.path.join(d, "model.dlm"))
                runs[name] = (m.weights(), m.predict(x))
            w0, y0 = runs["float32"]
            for name, _ in modes[1:]:
                w, y = runs[name]
                worst, at = 0.0, ""
                floor = 0.01 * max(float(np.abs(v).max()) for v in w0.values())
                for k, v in w0.items():
                    r = float(np.abs(w[k] - v).max() / max(float(np.abs(v).max()), floor))
                    if r > worst:
                        worst, at = r, k
                logit = float(np.abs(y - y0).max() / np.abs(y0).max())
                flips = int((y.argmax(1) != y0.argmax(1)).sum())
                print("| %s | %d | %s | %.2e (%s) | %.2e | %d |" % (model, steps, name, worst, at, logit, flips), flush=True)


if __name__ == "__main__":
    main()
