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
            DeQuantStub after; or c['arch'] = 'resnet20' (quantizable_resnet20: parameters p<i>, BatchNorm
            statistics s<j>, conv+bn(+relu) fused, add_relu). Writes 'qparams' ([scale, zero_point]
            rows: the QuantStub, then every conv/linear and residual add in module order), 'y<i>' (the
            integer output of point i+1 on x), for each conv/linear j: 'w<j>' (int_repr of the int8
            weight), 'ws<j>' (its scales); and 'logits' (dequantized).

  dynamic   quantize_dynamic (default_dynamic_qconfig) of c['arch'] = 'linear' (inputs 'weight', 'bias')
            or 'lstm' / 'gru' (nn.LSTM/GRU(batch_first=True) -> last step -> nn.Linear; inputs 'weight_ih',
            'weight_hh', 'bias_ih', 'bias_hh', 'fc_weight', 'fc_bias') on engine c['engine'], run on 'x'.
            Writes 'y' (float32), 'y_fp32' (the float model's), and for linear 'wq' (int8 weight) and 'ws'.

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


def quantizable_resnet20():
    """bench/peers/cifar_torch.py's ResNet20 as a PyTorch user rewrites it for eager-mode PTQ: the same
    parameters and buffers in the same order, ReLUs as modules (to fuse conv+bn+relu), the block's
    `relu(y + s)` as FloatFunctional.add_relu, `x.mean((2, 3))` as AdaptiveAvgPool2d(1) + flatten."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, cin, planes, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(planes)
            self.r1 = nn.ReLU()
            self.c2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(planes)
            self.add = nn.quantized.FloatFunctional()
            self.pad = (planes - cin) // 2 if (stride != 1 or cin != planes) else None
            self.stride = stride

        def forward(self, x):
            y = self.b2(self.c2(self.r1(self.b1(self.c1(x)))))
            s = x if self.pad is None else F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.pad))
            return self.add.add_relu(y, s)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.b = nn.BatchNorm2d(16)
            self.r = nn.ReLU()
            layers, cin = [], 16
            for planes, stride in ((16, 1), (32, 2), (64, 2)):
                for i in range(3):
                    layers.append(Block(cin, planes, stride if i == 0 else 1))
                    cin = planes
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = self.layers(self.r(self.b(self.c(x))))
            return self.fc(torch.flatten(self.pool(x), 1))

    net = Net()
    fuse = [['c', 'b', 'r']]
    for i in range(len(net.layers)):
        fuse += [['layers.%d.c1' % i, 'layers.%d.b1' % i, 'layers.%d.r1' % i], ['layers.%d.c2' % i, 'layers.%d.b2' % i]]
    return net, fuse


def run_ptq(c, case):
    import torch.nn as nn
    from torch.ao.quantization import DeQuantStub, QuantStub, convert, fuse_modules, get_default_qconfig, prepare
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'bench', 'peers'))
    from lenet_torch import lenet1, lenet5

    torch.backends.quantized.engine = c['engine']
    if c['arch'] == 'resnet20':
        body, pairs = quantizable_resnet20()
        stats = [b for n, b in body.named_buffers() if n.endswith('running_mean') or n.endswith('running_var')]
        with torch.no_grad():
            for i, p in enumerate(body.parameters()):
                p.copy_(case.get('p%d' % i))
            for j, b in enumerate(stats):
                b.copy_(case.get('s%d' % j))
    else:
        body = {'lenet1': lenet1, 'lenet5': lenet5}[c['arch']]()
        with torch.no_grad():
            for name, p in body.named_parameters():
                p.copy_(case.get('p.' + name))
        pairs = [[str(i), str(i + 1)] for i, m in enumerate(body)
                 if isinstance(m, (nn.Conv2d, nn.Linear)) and i + 1 < len(body) and isinstance(body[i + 1], nn.ReLU)]
    body.eval()
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
    # What every observer is shown during calibration (the fp32 tensors, batch by batch), by the
    # qualified name of the module the observer belongs to: the test compares driftlab's own fp32
    # calibration tensors with these, and feeds these to driftlab's observers.
    seen = {}
    for name, m in model.named_modules():
        if name.endswith('activation_post_process'):
            owner = name[:-len('.activation_post_process')]
            m.register_forward_hook(lambda mod, inp, out, owner=owner: seen.setdefault(owner, []).append(inp[0].detach().clone()))
    with torch.no_grad():
        for k in range(c['calib_batches']):
            model(case.get('calib%d' % k))
    convert(model, inplace=True)
    # The observed points in the order they are computed (a block's convs, then its add), each read where its
    # output appears: quantized conv/linear modules, and the block module for the add_relu.
    def is_point(m):
        return (hasattr(m, 'weight') and callable(m.weight)) or (hasattr(m, 'add') and hasattr(m.add, 'scale'))

    def post_order(m, out):  # a block after its convs: the order its outputs are computed in
        for child in m.children():
            post_order(child, out)
        if is_point(m):
            out.append(m)
        return out

    points = post_order(model.body, [])
    outs = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out: outs.setdefault(id(mod), out)) for m in points]
    with torch.no_grad():
        logits = model(case.get('x'))
    for h in hooks:
        h.remove()
    rows = [[float(model.quant.scale), float(model.quant.zero_point)]]
    names = {id(m): n for n, m in model.named_modules()}
    case.put('a0', torch.cat(seen['quant']))
    li = 0
    for i, m in enumerate(points):
        q = m.add if hasattr(m, 'add') and hasattr(m.add, 'scale') else m
        case.put('a%d' % (i + 1), torch.cat(seen[names[id(q)]]))
        rows.append([float(q.scale), float(q.zero_point)])
        case.put('y%d' % i, outs[id(m)].int_repr())
        if q is m:
            w = m.weight()
            case.put('w%d' % li, w.int_repr())
            if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
                case.put('ws%d' % li, w.q_per_channel_scales().to(torch.float32))
            else:
                case.put('ws%d' % li, torch.tensor([w.q_scale()], dtype=torch.float32))
            li += 1
    case.put('qparams', torch.tensor(rows, dtype=torch.float64))
    case.put('logits', logits)


def run_dynamic(c, case):
    """torch.ao.quantization.quantize_dynamic (default_dynamic_qconfig, qint8) of one nn.Linear
    (c['arch'] = 'linear') or of an LSTM/GRU classifier (nn.LSTM/nn.GRU(batch_first=True), last step,
    nn.Linear head) on engine c['engine'], run on x."""
    import torch.nn as nn
    from torch.ao.quantization import quantize_dynamic
    torch.backends.quantized.engine = c['engine']
    if c['arch'] == 'linear':
        w = case.get('weight')
        model = nn.Sequential(nn.Linear(w.shape[1], w.shape[0]))
        with torch.no_grad():
            model[0].weight.copy_(w)
            model[0].bias.copy_(case.get('bias'))
        types = {nn.Linear}
    else:
        cell = nn.LSTM if c['arch'] == 'lstm' else nn.GRU
        w_ih, fc_w = case.get('weight_ih'), case.get('fc_weight')

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = cell(w_ih.shape[1], fc_w.shape[1], batch_first=True)
                self.fc = nn.Linear(fc_w.shape[1], fc_w.shape[0])

            def forward(self, x):
                out, _ = self.rnn(x)
                return self.fc(out[:, -1])

        model = Net()
        with torch.no_grad():
            for k in ('weight_ih', 'weight_hh', 'bias_ih', 'bias_hh'):
                getattr(model.rnn, k + '_l0').copy_(case.get(k))
            model.fc.weight.copy_(fc_w)
            model.fc.bias.copy_(case.get('fc_bias'))
        types = {nn.Linear, cell}
    model.eval()
    q = quantize_dynamic(model, types, dtype=torch.qint8)
    with torch.no_grad():
        case.put('y', q(case.get('x')))
        case.put('y_fp32', model(case.get('x')))
    if c['arch'] == 'linear':
        qw = q[0].weight()
        case.put('wq', qw.int_repr())
        case.put('ws', torch.tensor([qw.q_scale()], dtype=torch.float32))


KINDS = {'observer': run_observer, 'per_channel': run_per_channel, 'ptq': run_ptq, 'dynamic': run_dynamic}


if __name__ == '__main__':
    sys.exit(run_cases(sys.argv, KINDS))
