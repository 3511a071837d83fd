#!/usr/bin/env python3
"""PyTorch 1.13 side of driftlab's recurrent oracle tests (tests/oracles/test_rnn_oracle_torch.cpp).

Usage: /usr/bin/python3 rnn_oracle.py CASE_DIR [K/N]

The case-file protocol of oracle.py (whose case loop is imported, not repeated): CASE_DIR/cases.json
lists the cases, inputs are CASE_DIR/<name>.<key>.npy, results CASE_DIR/out/<name>.<key>.npy.
Weights come from the test in PyTorch's own layout and names (weight_ih_l0 (G*u,in), weight_hh_l0
(G*u,u), bias_ih_l0, bias_hh_l0; gate row blocks LSTM i,f,g,o, GRU r,z,n), except in the kinds whose
point is PyTorch's own state ('rnn_state', 'init_embedding').

Kinds:
  rnn             nn.LSTM / nn.GRU (one layer, batch_first) on x (N,T,F) with the given weights;
                  y = every step's output (N,T,u) or the last one (N,u) (c['return_sequences']);
                  loss = sum(y * R). Writes y, dx and g.<weight name> for the four weights, in
                  float32 and (prefix 'f64.') float64.
  rnn_train       c['steps'] steps of c['optimizer'] (oracle.make_optimizer) of a classifier
                  [Embedding(num_ids, dim) ->] LSTM/GRU (last step) -> Linear(u, classes) with
                  F.cross_entropy, batch k = xs[k], labels[k]; parameters p.<state_dict name>.
                  Runs in float32 (prefix '') and float64 (prefix 'f64.'); writes losses and the
                  final p.<name>.
  rnn_state       torch.manual_seed(seed); nn.LSTM/GRU(F, u, batch_first=True): PyTorch's own
                  initial state, written as out/<name>.<state_dict key>.npy (what a user exports
                  from a trained PyTorch model), and its output y on x.
  init_embedding  torch.manual_seed(seed); nn.Embedding(num_ids, dim).weight as weight.

To add a kind: 1) write run_<kind>(c, case) below; 2) add it to KINDS; 3) write its inputs from the C++
test and read its outputs there.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle import leaf, make_optimizer, run_cases  # noqa: E402

CELLS = {'lstm': nn.LSTM, 'gru': nn.GRU}
WEIGHTS = ('weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0')


def make_rnn(c, dtype=torch.float32):
    return CELLS[c['cell']](c['input_size'], c['hidden'], num_layers=1, batch_first=True).to(dtype)


def run_rnn(c, case):
    """In float32 (prefix '') and in float64 (prefix 'f64.', the same inputs widened)."""
    for prefix, dtype in (('', torch.float32), ('f64.', torch.float64)):
        rnn = make_rnn(c, dtype)
        with torch.no_grad():
            for k in WEIGHTS:
                getattr(rnn, k).copy_(case.get(k, dtype))
        x = leaf(case.get('x', dtype))
        out, _ = rnn(x)
        y = out if c['return_sequences'] else out[:, -1]
        (y * case.get('r', dtype)).sum().backward()  # backward_with_r, in this dtype
        case.put(prefix + 'y', y)
        case.put(prefix + 'dx', x.grad)
        for k in WEIGHTS:
            case.put(prefix + 'g.' + k, getattr(rnn, k).grad)


def run_rnn_packed(c, case):
    """Post-padded sequences of the given lengths through nn.utils.rnn.pack_padded_sequence: the
    final hidden state h_n (each sequence's state at its last real step), dX (zero at padded
    steps) and every weight gradient, loss sum(h_n * R)."""
    rnn = make_rnn(c)
    with torch.no_grad():
        for k in WEIGHTS:
            getattr(rnn, k).copy_(case.get(k))
    x = leaf(case.get('x'))
    lengths = case.get('lengths', torch.int64)
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    _, state = rnn(packed)
    h = (state[0] if isinstance(state, tuple) else state)[0]  # LSTM (h_n, c_n); layer 0
    (h * case.get('r')).sum().backward()
    case.put('y', h)
    case.put('dx', x.grad)
    for k in WEIGHTS:
        case.put('g.' + k, getattr(rnn, k).grad)


class Classifier(nn.Module):
    """[Embedding ->] one recurrent layer, its last step -> Linear: driftlab's RNN classifier (models/rnn.cpp)."""

    def __init__(self, c):
        super().__init__()
        emb = c.get('embedding')
        self.emb = nn.Embedding(emb['num_ids'], emb['dim']) if emb else None
        self.rnn = CELLS[c['cell']](c['input_size'], c['hidden'], batch_first=True)
        self.fc = nn.Linear(c['hidden'], c['num_classes'])

    def forward(self, x):
        if self.emb is not None:
            x = self.emb(x.long())
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def run_rnn_train(c, case):
    for prefix, dtype in (('', torch.float32), ('f64.', torch.float64)):
        model = Classifier(c).to(dtype)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(case.get('p.' + name, dtype))
        xs = case.get('xs', dtype)
        ys = case.get('labels', torch.int64)
        opt, sched = make_optimizer(c, model.parameters())
        losses = []
        for k in range(c['steps']):
            opt.zero_grad()
            loss = F.cross_entropy(model(xs[k]), ys[k])
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(loss.item())
        case.put(prefix + 'losses', torch.tensor(losses, dtype=torch.float64))
        for name, p in model.named_parameters():
            case.put(prefix + 'p.' + name, p)


def run_rnn_state(c, case):
    torch.manual_seed(c['seed'])
    rnn = make_rnn(c)
    for k, v in rnn.state_dict().items():
        case.put(k, v)
    with torch.no_grad():
        case.put('y', rnn(case.get('x'))[0])


def run_init_embedding(c, case):
    torch.manual_seed(c['seed'])
    case.put('weight', nn.Embedding(c['num_ids'], c['dim']).weight)


KINDS = {'rnn': run_rnn, 'rnn_packed': run_rnn_packed, 'rnn_train': run_rnn_train, 'rnn_state': run_rnn_state,
         'init_embedding': run_init_embedding}


if __name__ == '__main__':
    sys.exit(run_cases(sys.argv, KINDS))
