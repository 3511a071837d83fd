"""The timing the PyTorch speed peers share (cifar_torch.py, rnn_torch.py): training steps on one
fixed synthetic batch, and prediction in one batch, measured the way driftlab measures its own."""
import time

import torch
import torch.nn.functional as F


def train_images_per_s(model, x, y, steps):
    """Images/s of `steps` SGD steps (lr 0.01, momentum 0.9, cross-entropy) on (x, y) of a fresh
    model, two ways: (epoch, after_first). epoch counts the first step, as driftlab's epoch counts
    its own (and lenet_torch.py's epoch PyTorch's): both sides pay their first-step costs (fresh
    memory, oneDNN primitives) once per run. after_first leaves the first step out (what this
    function returned before 2026-11-27: the comparison then charged the first step to driftlab
    alone). steps >= 2."""
    assert steps >= 2, 'train_images_per_s: at least 2 steps'
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    t0 = time.perf_counter()
    step()
    t1 = time.perf_counter()
    for _ in range(steps - 1):
        step()
    t2 = time.perf_counter()
    n = x.shape[0]
    return n * steps / (t2 - t0), n * (steps - 1) / (t2 - t1)


def predict_seconds(model, x):
    """Best of 3 forward passes of x in one batch after a warm-up call, as driftlab predict reports."""
    model.eval()
    with torch.no_grad():
        model(x)
        secs = float('inf')
        for _ in range(3):
            t0 = time.perf_counter()
            model(x)
            secs = min(secs, time.perf_counter() - t0)
    return secs
