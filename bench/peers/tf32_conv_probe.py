#!/usr/bin/env python3
"""Does cuDNN round a convolution's operands to TF32 under torch.backends.cudnn.allow_tf32 = True?

A delta kernel (channel c to channel c, centre tap 1) makes every output an input value times 1
plus zeros, so the output shows the operand as the tensor cores received it. Per shape (the
convolutions of LeNet-5, ResNet-20 and VGG-16 at batch 128, and the capture's small one) and
per cudnn.benchmark setting: how many outputs changed, and whether each changed one is the
input rounded to nearest even / away / truncated to TF32. Prints one JSON line per case.
Usage: python3 tf32_conv_probe.py > probe.jsonl
"""
import json

import numpy as np
import torch
import torch.nn.functional as F


def rnd(x, mode):
    u = x.view(np.uint32).astype(np.uint64)
    low = u & 0x1FFF
    kept = u & 0xFFFFE000
    up = {"trunc": np.zeros(u.shape, bool), "rna": low >= 0x1000,
          "rne": (low > 0x1000) | ((low == 0x1000) & (((kept >> 13) & 1) == 1))}[mode]
    return (kept + up.astype(np.uint64) * 0x2000).astype(np.uint32).view(np.float32)


dev = torch.device("cuda")
rng = np.random.default_rng(7)
for n, c, hw, r in ((8, 16, 16, 3), (128, 1, 28, 5), (128, 6, 12, 5), (128, 16, 32, 3), (128, 32, 16, 3),
                    (128, 64, 8, 3), (128, 64, 32, 3), (128, 512, 4, 3)):
    x = rng.uniform(0.5, 4.0, size=(n, c, hw, hw)).astype(np.float32)
    w = np.zeros((c, c, r, r), dtype=np.float32)
    for i in range(c):
        w[i, i, r // 2, r // 2] = 1.0
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        torch.backends.cudnn.allow_tf32 = True
        y = F.conv2d(torch.from_numpy(x).to(dev), torch.from_numpy(w).to(dev), padding=r // 2).cpu().numpy()
        changed = y != x
        row = {"n": n, "c": c, "hw": hw, "r": r, "benchmark": bench, "changed": int(changed.sum()), "of": int(y.size)}
        for m in ("trunc", "rna", "rne"):
            row[m] = int((rnd(x, m) == y).sum())
        print(json.dumps(row), flush=True)

# The backward convolutions (batch 1): dgrad with the delta kernel (dx = dy rounded), and wgrad
# with dy 1 at one position per output channel (dW[k, c, r, s] = one x value times 1).
for c, hw, r in ((16, 32, 3), (32, 16, 3), (64, 8, 3), (64, 32, 3), (512, 4, 3)):
    for n in (1, 128):
        dy = rng.uniform(0.5, 4.0, size=(n, c, hw, hw)).astype(np.float32)
        w = np.zeros((c, c, r, r), dtype=np.float32)
        for i in range(c):
            w[i, i, r // 2, r // 2] = 1.0
        torch.backends.cudnn.benchmark = False
        dx = torch.nn.grad.conv2d_input((n, c, hw, hw), torch.from_numpy(w).to(dev), torch.from_numpy(dy).to(dev),
                                        padding=r // 2).cpu().numpy()
        row = {"op": "dgrad", "n": n, "c": c, "hw": hw, "changed": int((dx != dy).sum()), "of": int(dx.size)}
        for m in ("trunc", "rna", "rne"):
            row[m] = int((rnd(dy, m) == dx).sum())
        print(json.dumps(row), flush=True)
    x = rng.uniform(0.5, 4.0, size=(1, c, hw, hw)).astype(np.float32)
    g = np.zeros((1, c, hw, hw), dtype=np.float32)
    g[0, :, hw // 2, hw // 2] = 1.0
    dw = torch.nn.grad.conv2d_weight(torch.from_numpy(x).to(dev), (c, c, r, r), torch.from_numpy(g).to(dev),
                                     padding=r // 2).cpu().numpy()
    win = x[0, :, hw // 2 - r // 2: hw // 2 + r // 2 + 1, hw // 2 - r // 2: hw // 2 + r // 2 + 1]  # (c, r, r)
    want = np.broadcast_to(win[None], dw.shape)
    row = {"op": "wgrad", "n": 1, "c": c, "hw": hw, "changed": int((dw != want).sum()), "of": int(dw.size)}
    for m in ("trunc", "rna", "rne"):
        row[m] = int((np.broadcast_to(rnd(np.ascontiguousarray(win), m)[None], dw.shape) == dw).sum())
    print(json.dumps(row), flush=True)

# cuBLAS matmuls of several shapes (allow_tf32): C = A @ I.
torch.backends.cuda.matmul.allow_tf32 = True
for m_, k_ in ((16, 16), (64, 64), (128, 1024), (1024, 1024), (4096, 512)):
    a = rng.uniform(0.5, 4.0, size=(m_, k_)).astype(np.float32)
    y = (torch.from_numpy(a).to(dev) @ torch.eye(k_, device=dev)).cpu().numpy()
    row = {"op": "matmul", "m": m_, "k": k_, "changed": int((y != a).sum()), "of": int(y.size)}
    for m in ("trunc", "rna", "rne"):
        row[m] = int((rnd(a, m) == y).sum())
    print(json.dumps(row), flush=True)
