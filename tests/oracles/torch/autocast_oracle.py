#!/usr/bin/env python3
"""PyTorch side of the autocast oracle (tests/oracles/test_autocast_oracle_torch.cpp): driftlab's
zoo architectures (the definitions of oracle.py) under torch.autocast(device_type='cpu',
dtype=torch.bfloat16), PyTorch 1.13's CPU mixed precision.

Usage: /usr/bin/python3 autocast_oracle.py CASE_DIR [K/N]   (the protocol of oracle.py)

Kinds:
  autocast_layers: a Sequential architecture in eval() mode, layer by layer: each layer's input
    and output (as float32 values: a bfloat16 tensor's values are float32 numbers) and, in
    out/<name>.dtypes.txt, each layer's output dtype, one per line.
  autocast_step: the logits (and their dtype in out/<name>.logits_dtype.txt), F.cross_entropy and
    the gradients of the input and of every parameter, the forward and the loss under autocast and
    the backward after it (as torch.autocast's documentation asks), first in eval() mode, then in
    train() mode (prefix 'train.').
  autocast_ops: the ops ResNet-20 adds to LeNet-5's, each on bfloat16 inputs (x, y: values of
    the format) under autocast: F.batch_norm with running statistics (bn_eval) and with the batch's
    (bn_train, and the running statistics after it, momentum 0.1) and x.mean((2, 3)) (mean,
    ResNet-20's global average pooling).
  rnn_autocast: one nn.LSTM / nn.GRU (c['cell'], input x given (N,T,F), called with
    c['batch_first'] or on the time-major copy) with weights w_ih, w_hh, b_ih, b_hh under
    autocast: its output y (N,T,H), the gradients of sum(y * dy) (dx (N,T,F), g.w_ih, g.w_hh, g.b_ih,
    g.b_hh), and each step's values from bench/peers/rnn_autocast_probe.py's op-by-op form (which
    must give y bit for bit, or the case fails), batch-major (N,T,...): xs (the input projection), hr
    (the recurrent addmm), a (the rounded gate sums; GRU n: its argument), act (the gates), c (LSTM:
    the cell state) and h.
  autocast_mlp: Linear(F, H) -> ReLU -> Linear(H, K) (weights p0..p3) under autocast, with oneDNN
    enabled or not (c['mkldnn']: torch.backends.mkldnn.flags, which decides whether a bfloat16
    product runs in oneDNN or in ATen's own GEMM): the output y given x (N,F), then y.backward(dy):
    dx and every parameter's gradient g<i>.
Parameters come as p<i> and BatchNorm running statistics as s<j> (oracle.model_with_state).
"""
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', '..', '..', 'bench', 'peers'))
from oracle import model_with_state, run_cases  # noqa: E402
import rnn_autocast_probe as probe  # noqa: E402


def dtype_name(t):
    return str(t.dtype).replace('torch.', '')


def write_text(case, key, text):
    with open(os.path.join(case.folder, 'out', '%s.%s.txt' % (case.name, key)), 'w') as f:
        f.write(text)


def run_autocast_layers(c, case):
    model, _ = model_with_state(c, case)
    model.eval()
    h = case.get('x')
    dtypes = []
    with torch.no_grad(), torch.autocast(device_type='cpu', dtype=torch.bfloat16):
        for i, m in enumerate(model):
            case.put('in%d' % i, h.float())
            h = m(h)
            dtypes.append(dtype_name(h))
            case.put('out%d' % i, h.float())
    write_text(case, 'dtypes', '\n'.join(dtypes) + '\n')


def run_autocast_step(c, case):
    model, _ = model_with_state(c, case)
    labels = case.get('labels', torch.int64)
    params = list(model.parameters())
    for prefix, train_mode in (('', False), ('train.', True)):
        model.train(train_mode)
        model.zero_grad()
        x = case.get('x').requires_grad_(True)
        with torch.autocast(device_type='cpu', dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits, labels)
        loss.backward()
        write_text(case, prefix + 'logits_dtype', dtype_name(logits) + '\n')
        case.put(prefix + 'logits', logits.float())
        case.put(prefix + 'loss', float(loss.item()))
        case.put(prefix + 'dx', x.grad)
        for i, p in enumerate(params):
            case.put(prefix + 'g%d' % i, p.grad)


def run_autocast_ops(c, case):
    x = case.get('x').bfloat16()
    gamma, beta = case.get('gamma'), case.get('beta')
    mean, var = case.get('mean'), case.get('var')
    with torch.no_grad(), torch.autocast(device_type='cpu', dtype=torch.bfloat16):
        outs = {'bn_eval': F.batch_norm(x, mean, var, gamma, beta, False, 0.1, 1e-5),
                'bn_train': F.batch_norm(x, mean, var, gamma, beta, True, 0.1, 1e-5),
                'mean': x.mean((2, 3))}
    dtypes = []
    for k, v in outs.items():
        case.put(k, v.float())
        dtypes.append('%s %s' % (k, dtype_name(v)))
    case.put('mean_after', mean)
    case.put('var_after', var)
    write_text(case, 'dtypes', '\n'.join(dtypes) + '\n')


def run_rnn_autocast(c, case):
    cell = {'lstm': torch.nn.LSTM, 'gru': torch.nn.GRU}[c['cell']]
    by_hand = probe.lstm_by_hand if c['cell'] == 'lstm' else probe.gru_by_hand
    bf = bool(c['batch_first'])
    x = case.get('x')  # (N, T, F)
    dy = case.get('dy')
    names = ('w_ih', 'w_hh', 'b_ih', 'b_hh')
    layer = cell(x.shape[2], case.get('w_hh').shape[1], batch_first=bf)
    with torch.no_grad():
        for k, attr in zip(names, ('weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0')):
            getattr(layer, attr).copy_(case.get(k))
    xin = (x if bf else x.transpose(0, 1).contiguous()).requires_grad_(True)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out, _ = layer(xin)
    y = out if bf else out.transpose(0, 1)
    (y * dy).sum().backward()
    case.put('y', y.float())
    case.put('dx', xin.grad if bf else xin.grad.transpose(0, 1))
    for k, attr in zip(names, ('weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0')):
        case.put('g.' + k, getattr(layer, attr).grad)
    saved = []
    with torch.no_grad():
        ws = [case.get(k).to(torch.bfloat16) for k in names]
        mine = by_hand(x.transpose(0, 1), not bf, *ws, saved=saved)
    if not torch.equal(mine.transpose(0, 1), y.detach()):
        raise RuntimeError('the op-by-op form does not give nn.%s\'s output bit for bit' % cell.__name__)
    for key in ('xs', 'hr', 'a', 'act', 'c', 'h'):
        if key in saved[0]:
            case.put(key, torch.stack([s[key].float() for s in saved], 1))  # (N, T, ...)


def run_autocast_mlp(c, case):
    x, dy = case.get('x'), case.get('dy')
    p = [case.get('p%d' % i) for i in range(4)]
    model = torch.nn.Sequential(torch.nn.Linear(p[0].shape[1], p[0].shape[0]), torch.nn.ReLU(),
                                torch.nn.Linear(p[2].shape[1], p[2].shape[0]))
    with torch.no_grad():
        for mine, theirs in zip(model.parameters(), p):
            mine.copy_(theirs)
    xin = x.clone().requires_grad_(True)
    with torch.backends.mkldnn.flags(enabled=bool(c['mkldnn'])):
        with torch.autocast('cpu', dtype=torch.bfloat16):
            y = model(xin)
        y.backward(dy.to(y.dtype))
    case.put('y', y.float())
    case.put('dx', xin.grad)
    for i, q in enumerate(model.parameters()):
        case.put('g%d' % i, q.grad)


KINDS = {'autocast_mlp': run_autocast_mlp, 'rnn_autocast': run_rnn_autocast, 'autocast_layers': run_autocast_layers, 'autocast_step': run_autocast_step, 'autocast_ops': run_autocast_ops}

if __name__ == '__main__':
    sys.exit(run_cases(sys.argv, KINDS))
