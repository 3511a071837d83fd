#!/usr/bin/env python3
"""PyTorch 1.13 side of driftlab's calibration-observer oracle (tests/oracles/test_quant_oracle_torch.cpp).

Usage: /usr/bin/python3 quant_oracle.py CASE_DIR [K/N]

The case-file protocol of oracle.py (its case loop is imported, not repeated): CASE_DIR/cases.json
lists the cases, inputs are CASE_DIR/<name>.<key>.npy, results CASE_DIR/out/<name>.<key>.npy.

Kind:
  observer  c['batches'] float32 inputs b0, b1, ... fed in order to one torch.ao.quantization
            observer: c['observer'] = 'minmax' (MinMaxObserver), 'moving_average'
            (MovingAverageMinMaxObserver(averaging_constant=c['averaging_constant'])) or 'histogram'
            (HistogramObserver(bins=c['bins'], upsample_rate=c['upsample_rate'])). Writes 'range'
            (float32 [min, max]): min_val/max_val for the min/max observers, the result of
            _non_linear_param_search() for the histogram observer; and for the histogram observer
            its state: 'hist' (the float32 histogram), 'state' ([min_val, max_val]).
  per_channel  PerChannelMinMaxObserver(ch_axis=0) on w: 'min' and 'max' per channel.
  ptq       eager-mode static PTQ of c['arch'] (lenet1 / lenet5 of bench/peers/lenet_torch.py) on the
            engine c['engine'] ('qnnpack' / 'onednn') with its get_default_qconfig: weights 'p.<torch
            name>', calibration batches 'calib0', 'calib1', ... (c['calib_batches'] of them, fed in
            order), test input 'x'. conv+relu and linear+relu fused (fuse_modules), QuantStub before,
            DeQuantStub after. Writes 'qparams' ([scale, zero_point] rows: the QuantStub, then every
            conv/linear in order), for each conv/linear i: 'w<i>' (int_repr of the int8 weight),
            'ws<i>' (its scales), 'y<i>' (int_repr of its output on x); and 'logits' (dequantized).

To add a kind: 1) write run_<kind>(c, case) below; 2) add it to KINDS; 3) write its inputs from the C++
test and read its outputs there.
"""
import os
import sys

import torch
from torch.ao.quantization.observer import (HistogramObserver, MinMaxObserver, MovingAverageMinMaxObserver,
                                            PerChannelMinMaxObserver)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle import run_cases  # noqa: E402


def make_observer(c):
    kind = c['observer']
    if kind == 'minmax':
        return MinMaxObserver()
    if kind == 'moving_average':
        return MovingAverageMinMaxObserver(averaging_constant=c['averaging_constant'])
    if kind == 'histogram':
        return HistogramObserver(bins=c['bins'], upsample_rate=c['upsample_rate'])
    raise KeyError('unknown observer %r' % kind)


def run_observer(c, case):
    obs = make_observer(c)
    for k in range(c['batches']):
        obs(case.get('b%d' % k))
    if c['observer'] == 'histogram':
        lo, hi = obs._non_linear_param_search()
        case.put('hist', obs.histogram)
        case.put('state', torch.stack([obs.min_val, obs.max_val]))
    else:
        lo, hi = obs.min_val, obs.max_val
    case.put('range', torch.stack([lo.reshape(()), hi.reshape(())]).to(torch.float32))


def run_per_channel(c, case):
    obs = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    obs(case.get('w'))
    case.put('min', obs.min_val)
    case.put('max', obs.max_val)


def run_ptq(c, case):
    import torch.nn as nn
    from torch.ao.quantization import DeQuantStub, QuantStub, convert, fuse_modules, get_default_qconfig, prepare
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'bench', 'peers'))
    from lenet_torch import lenet1, lenet5

    torch.backends.quantized.engine = c['engine']
    body = {'lenet1': lenet1, 'lenet5': lenet5}[c['arch']]()
    with torch.no_grad():
        for name, p in body.named_parameters():
            p.copy_(case.get('p.' + name))
    body.eval()
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
    model.qconfig = get_default_qconfig(c['engine'])
    prepare(model, inplace=True)
    with torch.no_grad():
        for k in range(c['calib_batches']):
            model(case.get('calib%d' % k))
    convert(model, inplace=True)
    rows = [[float(model.quant.scale), float(model.quant.zero_point)]]
    linears = [m for m in model.body if hasattr(m, 'weight') and callable(m.weight)]
    outs = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: outs.append(out)) for m in linears]
    with torch.no_grad():
        logits = model(case.get('x'))
    for h in hooks:
        h.remove()
    for i, m in enumerate(linears):
        rows.append([float(m.scale), float(m.zero_point)])
        w = m.weight()
        case.put('w%d' % i, w.int_repr())
        if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            case.put('ws%d' % i, w.q_per_channel_scales().to(torch.float32))
        else:
            case.put('ws%d' % i, torch.tensor([w.q_scale()], dtype=torch.float32))
        case.put('y%d' % i, outs[i].int_repr())
    case.put('qparams', torch.tensor(rows, dtype=torch.float64))
    case.put('logits', logits)


KINDS = {'observer': run_observer, 'per_channel': run_per_channel, 'ptq': run_ptq}


if __name__ == '__main__':
    sys.exit(run_cases(sys.argv, KINDS))
