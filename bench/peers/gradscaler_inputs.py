#!/usr/bin/env python3
"""The inputs of reduced_precision_capture.py's GradScaler run (its gradscaler_run), rebuilt without
a GPU: the same NumPy stream (default_rng(20261129), drawn in the capture's order) and the same
initial MLP (torch.manual_seed(1), nn.Linear(32, 64), nn.Linear(64, 10), initialised on the CPU
before the capture moved them to the device). The capture returned the run's scales and overflow
flags but not these (at most 8 files come back from a device run).

Usage: /usr/bin/python3 bench/peers/gradscaler_inputs.py OUT_DIR [CAPTURE_DIR]
Writes gs_x.npy (40, 16, 32), gs_y.npy (40, 16), gs_w0, gs_b0, gs_w2, gs_b2 (float32). With
CAPTURE_DIR (tests/data/h200_reduced_precision) it first checks the replayed stream against the
capture's own draws (mm_a, mm_b, conv_x, conv_w) bit for bit.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reduced_precision_capture import crafted  # noqa: E402


def main(out, capture=None):
    rng = np.random.default_rng(20261129)
    crafted(rng, 64, 256)                      # the TF32 probe of the matmul
    crafted(rng, 8 * 16 * 16, 16)              # the TF32 probe of the convolution
    a = rng.standard_normal((64, 512)).astype(np.float32)
    b = rng.standard_normal((512, 64)).astype(np.float32)
    x = rng.standard_normal((4, 16, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    if capture:
        for name, v in (('mm_a', a), ('mm_b', b), ('conv_x', x), ('conv_w', w)):
            c = np.load(os.path.join(capture, name + '.npy'))
            if c.shape != v.shape or not np.array_equal(c.view(np.uint32), v.view(np.uint32)):
                sys.exit('%s: the replayed stream differs from the capture' % name)
    torch.manual_seed(1)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    gx = (rng.standard_normal((40, 16, 32)) * 4).astype(np.float32)
    gy = rng.integers(0, 10, size=(40, 16)).astype(np.int64)
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, 'gs_x.npy'), gx)
    np.save(os.path.join(out, 'gs_y.npy'), gy.astype(np.float64))
    for name, t in (('gs_w0', mlp[0].weight), ('gs_b0', mlp[0].bias), ('gs_w2', mlp[2].weight), ('gs_b2', mlp[2].bias)):
        np.save(os.path.join(out, name + '.npy'), t.detach().numpy())
    return 0


if __name__ == '__main__':
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
