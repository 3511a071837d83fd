#!/usr/bin/env python3
"""PyTorch's CPU bfloat16 autocast, measured with PyTorch alone (docs/REDUCED_PRECISION.md,
"Autocast, emulated"): how far each convolution, BatchNorm and linear layer of ResNet-20 under
torch.autocast('cpu', dtype=torch.bfloat16) is from the correctly rounded exact result of its
(rounded) inputs, and how far a convolution is when oneDNN is turned off (the fallback PyTorch takes
on CPUs without AVX-512 BW/VL/DQ).

Usage: /usr/bin/python3 bench/peers/autocast_cpu_conv_probe.py
Prints one line per measurement.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar_torch import ResNet20  # noqa: E402


def bf(t):
    return t.to(torch.bfloat16).to(torch.float64)


def conv_paths():
    torch.manual_seed(0)
    x = torch.randn(8, 16, 12, 12)
    w = torch.randn(32, 16, 3, 3) * 0.1
    b = torch.randn(32)
    exact = F.conv2d(bf(x), bf(w), bf(b))
    for enabled in (True, False):
        torch.backends.mkldnn.enabled = enabled
        with torch.autocast('cpu', dtype=torch.bfloat16):
            y = F.conv2d(x, w, b)
        differ = int((y.double() != exact.to(torch.bfloat16).double()).sum())
        err = float((y.double() - exact).abs().max() / exact.abs().max())
        print('conv2d 16->32 3x3, batch 8, oneDNN %s: %d of %d outputs differ from the rounded exact sum; '
              'largest error %.3g of the largest output' % ('on' if enabled else 'off', differ, y.numel(), err))
    torch.backends.mkldnn.enabled = True


def resnet20_ties():
    torch.manual_seed(0)
    m = ResNet20().eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-.5, .5)
            mod.running_var.uniform_(.5, 1.5)
            mod.weight.data.uniform_(.5, 1.5)
            mod.bias.data.uniform_(-.5, .5)
    rows = []

    def hook(mod, inp, out):
        x = inp[0]
        if isinstance(mod, torch.nn.Conv2d):
            ref = F.conv2d(bf(x), bf(mod.weight), None, mod.stride, mod.padding)
        elif isinstance(mod, torch.nn.BatchNorm2d):
            ref = F.batch_norm(x.double(), mod.running_mean.double(), mod.running_var.double(),
                               mod.weight.double(), mod.bias.double(), False, 0, mod.eps)
        elif isinstance(mod, torch.nn.Linear):
            ref = F.linear(bf(x), bf(mod.weight), bf(mod.bias))
        else:
            return
        rows.append((type(mod).__name__, int((ref.to(torch.bfloat16) != out).sum()), out.numel()))

    for mod in m.modules():
        if len(list(mod.children())) == 0:
            mod.register_forward_hook(hook)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        m(torch.rand(8, 3, 32, 32) * 2 - 1)
    for kind in ('Conv2d', 'BatchNorm2d', 'Linear'):
        r = [(d, n) for k, d, n in rows if k == kind]
        print('ResNet-20 (eval, batch 8) %s: %d layers; outputs differing from the rounded exact result per '
              'layer: %s' % (kind, len(r), ', '.join('%d/%d' % x for x in r)))


if __name__ == '__main__':
    conv_paths()
    resnet20_ties()
