#!/usr/bin/env python3
"""PyTorch 1.13 side of driftlab's oracle tests (tests/oracles/test_torch_oracle.cpp), and the case
loop rnn_oracle.py shares.

Usage: /usr/bin/python3 oracle.py CASE_DIR [K/N]

The protocol of every oracle script (tests/oracles/oracle_util.h; tfjs/cases.js is the same loop
in JS): CASE_DIR/cases.json is {"threads": T, "cases": [{"name": ..., "kind": ..., "shard"?: ...,
<arguments>}, ...]}; with K/N only the cases whose shard (default 0) is K modulo N run. The C++
test writes every input of a case as CASE_DIR/<name>.<input>.npy (float32; labels as float64)
and this script writes every result as CASE_DIR/out/<name>.<result>.npy (float32; scalar losses
as float64 of shape (1,)). Weights always come from the test, never from PyTorch's own init
(except for the kinds 'init_*', whose point is PyTorch's init), so that only the formula under
test can differ. One run serves a whole group of cases: importing torch costs about a second.

Backward is exercised with a fixed random R: loss = sum(y * R), so dy = R (not all ones).

To add a kind: 1) write run_<kind>(c, case) below; 2) add it to KINDS; 3) write its inputs
from the C++ test and read its outputs there.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# The same LeNet and VGG-16 definitions the speed peers use (bench/peers/lenet_torch.py,
# cifar_torch.py), so that the oracle and the benchmark can never disagree about the architecture.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'bench', 'peers'))
from lenet_torch import lenet1, lenet5  # noqa: E402
from cifar_torch import ResNet20, vgg16  # noqa: E402



class RnnClassifier(nn.Module):
    """driftlab's 'lstm' / 'gru' models (models/rnn.cpp): 28 steps of 28 features, nn.LSTM or nn.GRU
    with 128 units (batch_first, its last step), nn.Linear(128, 10). parameters() order:
    weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, fc.weight, fc.bias, as driftlab's
    named_params() under the torch preset (gate row blocks LSTM i,f,g,o / GRU r,z,n)."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(28, 128, batch_first=True)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


ARCHS = {'lenet1': lenet1, 'lenet5': lenet5, 'vgg16': vgg16, 'resnet20': ResNet20,
         'lstm': lambda: RnnClassifier(nn.LSTM), 'gru': lambda: RnnClassifier(nn.GRU)}


class Case:
    def __init__(self, folder, name):
        self.folder, self.name = folder, name

    def get(self, key, dtype=torch.float32):
        a = np.load(os.path.join(self.folder, '%s.%s.npy' % (self.name, key)))
        return torch.from_numpy(np.ascontiguousarray(a)).to(dtype)

    def put(self, key, t):
        if isinstance(t, torch.Tensor):
            a = t.detach().cpu().numpy()
        else:
            a = np.asarray([t], dtype=np.float64)
        if a.dtype not in (np.float32, np.float64):
            a = a.astype(np.float32)
        np.save(os.path.join(self.folder, 'out', '%s.%s.npy' % (self.name, key)), a)


def leaf(t):
    return t.clone().requires_grad_(True)


def backward_with_r(case, y):
    """loss = sum(y * R): every dy is R."""
    r = case.get('r')
    (y * r).sum().backward()


def run_conv2d(c, case):
    # padding [t, b, l, r]: symmetric pads go to Conv2d's own padding (the real PyTorch path);
    # asymmetric ones (TF SAME emulation) to F.pad first, as PyTorch users write it.
    x, w = leaf(case.get('x')), leaf(case.get('w'))
    b = leaf(case.get('b')) if c.get('bias', True) else None
    t, bo, l, r = c['padding']
    xin = x
    if t == bo and l == r:
        pad = (t, l)
    else:
        xin = F.pad(x, (l, r, t, bo))
        pad = (0, 0)
    y = F.conv2d(xin, w, b, stride=c['stride'], padding=pad, dilation=c['dilation'])
    backward_with_r(case, y)
    case.put('y', y)
    case.put('dx', x.grad)
    case.put('dw', w.grad)
    if b is not None:
        case.put('db', b.grad)


def run_pool2d(c, case):
    x = leaf(case.get('x'))
    if c['pool'] == 'max':
        y = F.max_pool2d(x, c['kernel'], c['stride'], c['padding'])  # pads with -inf
    else:
        y = F.avg_pool2d(x, c['kernel'], c['stride'], c['padding'], count_include_pad=c['count_include_pad'])
    backward_with_r(case, y)
    case.put('y', y)
    case.put('dx', x.grad)


def run_linear(c, case):
    x, w, b = leaf(case.get('x')), leaf(case.get('w')), leaf(case.get('b'))
    y = F.linear(x, w, b)
    backward_with_r(case, y)
    case.put('y', y)
    case.put('dx', x.grad)
    case.put('dw', w.grad)
    case.put('db', b.grad)


MODULES = {'relu': nn.ReLU, 'tanh': nn.Tanh, 'sigmoid': nn.Sigmoid, 'hardsigmoid': nn.Hardsigmoid,
           'flatten': nn.Flatten}


def run_module(c, case):
    x = leaf(case.get('x'))
    y = MODULES[c['module']]()(x)
    backward_with_r(case, y)
    case.put('y', y)
    case.put('dx', x.grad)


def run_xent(c, case):
    z = leaf(case.get('z'))
    labels = case.get('labels', torch.int64)
    loss = nn.CrossEntropyLoss()(z, labels)  # reduction='mean', from logits (log_softmax + nll)
    loss.backward()
    case.put('loss', float(loss.item()))
    case.put('dz', z.grad)


def run_batchnorm(c, case):
    """nn.BatchNorm1d/2d (eps 1e-5, momentum 0.1) in training mode: forward and backward on
    batch x0, two more training forwards (x1, x2), then the running statistics and the output
    of eval mode on xe with them."""
    x = case.get('x0')
    bn = (nn.BatchNorm2d if x.dim() == 4 else nn.BatchNorm1d)(x.shape[1], eps=1e-5, momentum=0.1)
    with torch.no_grad():
        bn.weight.copy_(case.get('gamma'))
        bn.bias.copy_(case.get('beta'))
    bn.train()
    x = leaf(x)
    y = bn(x)
    backward_with_r(case, y)
    case.put('y', y)
    case.put('dx', x.grad)
    case.put('dgamma', bn.weight.grad)
    case.put('dbeta', bn.bias.grad)
    with torch.no_grad():
        bn(case.get('x1'))
        bn(case.get('x2'))
    case.put('running_mean', bn.running_mean)
    case.put('running_var', bn.running_var)
    bn.eval()
    with torch.no_grad():
        case.put('y_eval', bn(case.get('xe')))


class ResBlock(nn.Module):
    """ResNet basic block, relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the
    shortcut 'identity', 'A' (bench/peers/cifar_torch.py Block: x[:, :, ::s, ::s] with zero
    channels padded on both sides) or 'B' (1x1 conv with stride s, then BatchNorm)."""

    def __init__(self, cin, planes, stride, shortcut):
        super().__init__()
        self.c1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(planes)
        self.c2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(planes)
        self.shortcut, self.stride, self.pad = shortcut, stride, (planes - cin) // 2
        if shortcut == 'B':
            self.sc = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        if self.shortcut == 'identity':
            s = x
        elif self.shortcut == 'A':
            s = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.pad))
        else:
            s = self.sc(x)
        return F.relu(y + s)


def run_resblock(c, case):
    """One block in training mode: forward, dX and every parameter gradient. Parameters come
    as p<i> in registration order (c1, b1, c2, b2[, sc.0, sc.1]), gradients go out as g<i>."""
    block = ResBlock(c['cin'], c['planes'], c['stride'], c['shortcut'])
    params = list(block.parameters())
    assert len(params) == c['num_params'], (len(params), c['num_params'])
    with torch.no_grad():
        for i, p in enumerate(params):
            p.copy_(case.get('p%d' % i))
    block.train()
    x = leaf(case.get('x'))
    y = block(x)
    backward_with_r(case, y)
    case.put('y', y)
    case.put('dx', x.grad)
    for i, p in enumerate(params):
        case.put('g%d' % i, p.grad)


def load_weights(model, case):
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(case.get('p.' + name))


def run_model(c, case):
    """Forward output and input gradient of every layer, loss, and every parameter gradient."""
    model = ARCHS[c['arch']]()
    load_weights(model, case)
    x = leaf(case.get('x'))
    labels = case.get('labels', torch.int64)
    h, outs = x, []
    for m in model:
        h = m(h)
        h.retain_grad()
        outs.append(h)
    loss = F.cross_entropy(h, labels)
    loss.backward()
    case.put('loss', float(loss.item()))
    for i, o in enumerate(outs):
        case.put('y%d' % i, o)
        case.put('dx%d' % i, (x if i == 0 else outs[i - 1]).grad)  # gradient of layer i's input
    for name, p in model.named_parameters():
        case.put('g.' + name, p.grad)


def model_with_state(c, case):
    """The case's architecture with parameters p<i> (model.parameters() order) and BatchNorm running
    statistics s<j> (running_mean, running_var of each, module order): the order driftlab's
    named_params() / named_buffers() list them in. Returns (model, stats)."""
    model = ARCHS[c['arch']]()
    params = list(model.parameters())
    stats = [b for n, b in model.named_buffers() if n.endswith('running_mean') or n.endswith('running_var')]
    assert len(params) == c['num_params'], (len(params), c['num_params'])
    assert len(stats) == c['num_stats'], (len(stats), c['num_stats'])
    with torch.no_grad():
        for i, p in enumerate(params):
            p.copy_(case.get('p%d' % i))
        for j, b in enumerate(stats):
            b.copy_(case.get('s%d' % j))
    return model, stats


def run_model_input_grad(c, case):
    """The loss F.cross_entropy (mean), the logits and dL/dx of a whole model, first in eval() mode
    (BatchNorm normalises with its running statistics and moves nothing), then in train() mode
    (batch statistics; prefix 'train.'). Parameters come as p<i> in model.parameters() order and
    the BatchNorm running statistics as s<j> in module order (running_mean, running_var of each),
    the order driftlab's named_params() / named_buffers() list them in. Also writes the running
    statistics after the eval pass (stats_after_eval.s<j>)."""
    model, stats = model_with_state(c, case)
    labels = case.get('labels', torch.int64)
    for prefix, train_mode in (('', False), ('train.', True)):
        model.train(train_mode)
        x = case.get('x').requires_grad_(True)
        logits = model(x)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        case.put(prefix + 'loss', float(loss.item()))
        case.put(prefix + 'logits', logits)
        case.put(prefix + 'dx', x.grad)
        if not train_mode:
            for j, b in enumerate(stats):
                case.put('stats_after_eval.s%d' % j, b)


def run_attack(c, case):
    """FGSM, BIM and L-inf PGD written with PyTorch autograd on a model in eval() mode, the loss
    F.cross_entropy (mean): the gradient at the clean input (g0), FGSM's
    clamp(x + eps * sign(g0), lo, hi), and BIM / PGD's steps x <- x + step * sign(g);
    x <- clamp(x0 + clamp(x - x0, -eps, eps), lo, hi) from x0 (BIM) or from clamp(x0 + noise, lo, hi)
    (PGD; the noise comes from the test, drawn by driftlab's RNG). Parameters and BatchNorm
    statistics as in run_model_input_grad."""
    model, stats = model_with_state(c, case)
    model.eval()
    put_sign_attacks(c, case, model, case.get('x'), case.get('labels', torch.int64), case.get('noise'))


def put_sign_attacks(c, case, forward, x0, labels, noise=None):
    """g0 (dL/dx of F.cross_entropy(forward(x)) at x0), FGSM's clamp(x0 + eps * sign(g0), lo, hi),
    and BIM's steps x <- x + step * sign(g); x <- clamp(x0 + clamp(x - x0, -eps, eps), lo, hi) from
    x0, and PGD's from clamp(x0 + noise, lo, hi) when a noise is given; torchattacks' BIM
    (bim_torchattacks: its max/min projection). With c['iterates'], also
    every step's start <name>_x<k> and gradient <name>_g<k> (k = 0 .. steps-1)."""
    lo, hi, eps, step = c['lo'], c['hi'], c['eps'], c['step']

    def grad(x):
        x = x.clone().requires_grad_(True)
        F.cross_entropy(forward(x), labels).backward()
        return x.grad

    g0 = grad(x0)
    case.put('g0', g0)
    with torch.no_grad():
        case.put('fgsm', torch.clamp(x0 + eps * g0.sign(), lo, hi))
    starts = {'bim': x0.clone()}
    if noise is not None:
        with torch.no_grad():
            starts['pgd'] = torch.clamp(x0 + noise, lo, hi)
    for name, x in starts.items():
        for k in range(c['steps']):
            g = grad(x)
            if c.get('iterates'):  # each step's start and gradient: bim_x<k>, bim_g<k>
                case.put('%s_x%d' % (name, k), x)
                case.put('%s_g%d' % (name, k), g)
            with torch.no_grad():
                x = x + step * g.sign()
                x = torch.clamp(x0 + torch.clamp(x - x0, -eps, eps), lo, hi)
        case.put(name, x)
    # torchattacks' BIM (torchattacks/attacks/bim.py): its max/min projection, written as its lines
    # are (with the bounds lo, hi in place of its hard-coded 0 and 1)
    x = x0.clone()
    for k in range(c['steps']):
        g = grad(x)
        with torch.no_grad():
            adv = x + step * g.sign()
            a = torch.clamp(x0 - eps, min=lo)
            b = (adv >= a).float() * adv + (a > adv).float() * a
            cc = (b > x0 + eps).float() * (x0 + eps) + (x0 + eps >= b).float() * b
            x = torch.clamp(cc, max=hi)
    case.put('bim_torchattacks', x)


def run_ste_attack(c, case):
    """The straight-through gradient of an int8 model as PyTorch QAT computes it: the fake-quantized
    float graph written with torch.fake_quantize_per_tensor_affine (its autograd passes the gradient
    where the unclamped quantized value lies in [quant_min, quant_max]) around F.conv2d / F.linear
    over the given float weights (the dequantized int8 weights), F.relu, F.max_pool2d, the global
    average pool and residual blocks. c['layers'] describes the graph in order ({'type':
    'fake_quant', 'scale', 'zero_point', 'qmin', 'qmax'}, {'type': 'conv2d', 'id', 'stride', 'pad'},
    {'type': 'dense', 'id'}, {'type': 'relu'}, {'type': 'maxpool', 'window', 'stride'}, {'type':
    'flatten'}, {'type': 'gap'}, {'type': 'residual', 'main': [...], 'option_a', 'stride',
    'pad_before'}); the weights are inputs w<id>, b<id>. Writes the logits, g0 (dL/dx of
    F.cross_entropy at the clean input), FGSM and BIM as run_attack."""
    params = {}

    def collect(layers):
        for l in layers:
            if l['type'] in ('conv2d', 'dense'):
                params[l['id']] = (case.get('w%d' % l['id']), case.get('b%d' % l['id']))
            if l['type'] == 'residual':
                collect(l['main'])

    collect(c['layers'])

    def run(layers, x):
        for l in layers:
            t = l['type']
            if t == 'fake_quant':
                x = torch.fake_quantize_per_tensor_affine(x, l['scale'], l['zero_point'], l['qmin'], l['qmax'])
            elif t == 'conv2d':
                w, b = params[l['id']]
                x = F.conv2d(x, w, b, stride=l['stride'], padding=l['pad'])
            elif t == 'dense':
                w, b = params[l['id']]
                x = F.linear(x, w, b)
            elif t == 'relu':
                x = F.relu(x)
            elif t == 'maxpool':
                x = F.max_pool2d(x, l['window'], l['stride'])
            elif t == 'flatten':
                x = torch.flatten(x, 1)
            elif t == 'gap':
                x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            elif t == 'residual':  # main(x) + shortcut(x); option A: x[:, :, ::s, ::s], zero channels around
                y = run(l['main'], x)
                if l['option_a']:
                    s = l['stride']
                    sc = x[:, :, ::s, ::s]
                    after = y.shape[1] - sc.shape[1] - l['pad_before']
                    sc = F.pad(sc, (0, 0, 0, 0, l['pad_before'], after))
                else:
                    sc = x
                x = y + sc
            else:
                raise ValueError('ste_attack: unknown layer %r' % t)
        return x

    def forward(x):
        return run(c['layers'], x)

    x0 = case.get('x')
    with torch.no_grad():
        case.put('logits', forward(x0))
    put_sign_attacks(c, case, forward, x0, case.get('labels', torch.int64))


def run_onnx_export(c, case):
    """torch.onnx.export of c['arch'] as a user writes it: torch.manual_seed(c['seed']), PyTorch's
    own initialisation, BatchNorm running statistics and affine parameters drawn at random (so that
    the eval-mode export's Conv+BatchNorm folding is visible), eval(), the default
    do_constant_folding, opset c['opset'], a dynamic batch axis. c['leaky']: every ReLU replaced
    by LeakyReLU(0.1), a node driftlab cannot map. Writes out/<name>.model.onnx and the model's
    logits on x ('logits')."""
    torch.manual_seed(c['seed'])
    model = ARCHS[c['arch']]()
    if c.get('leaky'):
        for parent in model.modules():
            for k, child in parent.named_children():
                if isinstance(child, nn.ReLU):
                    setattr(parent, k, nn.LeakyReLU(0.1))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    model.eval()
    x = case.get('x')
    path = os.path.join(case.folder, 'out', '%s.model.onnx' % case.name)
    torch.onnx.export(model, x[:2], path, input_names=['x'], output_names=['logits'],
                      dynamic_axes={'x': {0: 'batch'}, 'logits': {0: 'batch'}}, opset_version=c['opset'])
    with torch.no_grad():
        case.put('logits', model(x))


def make_optimizer(c, params):
    """torch.optim for c['optimizer'] (default 'sgd'), and the StepLR of c['schedule']
    ({'step_size', 'gamma'}, stepped after every optimiser step) or None."""
    kind = c.get('optimizer', 'sgd')
    wd = c.get('weight_decay', 0.0)
    if kind == 'sgd':
        opt = torch.optim.SGD(params, lr=c['lr'], momentum=c['momentum'], nesterov=c.get('nesterov', False),
                              weight_decay=wd)
    elif kind == 'adam':
        opt = torch.optim.Adam(params, lr=c['lr'], betas=(c['beta1'], c['beta2']), eps=c['eps'], weight_decay=wd)
    elif kind == 'adamw':
        opt = torch.optim.AdamW(params, lr=c['lr'], betas=(c['beta1'], c['beta2']), eps=c['eps'], weight_decay=wd)
    elif kind == 'rmsprop':
        opt = torch.optim.RMSprop(params, lr=c['lr'], alpha=c['alpha'], eps=c['eps'], weight_decay=wd,
                                  momentum=c['momentum'])
    else:
        raise ValueError('unknown optimizer ' + kind)
    sched = None
    if c.get('schedule'):
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=c['schedule']['step_size'],
                                                gamma=c['schedule']['gamma'])
    return opt, sched


def train(c, case, dtype, mkldnn):
    torch.backends.mkldnn.enabled = mkldnn
    try:
        model = ARCHS[c['arch']]().to(dtype)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(case.get('p.' + name, dtype))
        xs = case.get('xs', dtype)
        ys = case.get('labels', torch.int64)
        opt, sched = make_optimizer(c, model.parameters())
        lr_at = {int(k): v for k, v in c.get('lr_at', {}).items()}
        losses = []
        for k in range(c['steps']):
            if k in lr_at:
                for g in opt.param_groups:
                    g['lr'] = lr_at[k]
            opt.zero_grad()
            loss = F.cross_entropy(model(xs[k]), ys[k])
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(loss.item())
        return model, losses
    finally:
        torch.backends.mkldnn.enabled = True


def run_train(c, case):
    """c['steps'] steps of c['optimizer'] (make_optimizer: SGD, Adam, AdamW, RMSprop, with a per-step
    StepLR), batch k = xs[k], labels[k]; lr changes per c['lr_at'].

    Three runs from the same weights: float32 as PyTorch runs by default (convolutions through
    mkldnn = oneDNN), prefix ''; float32 with torch.backends.mkldnn.enabled = False (PyTorch's
    native convolution, another summation order), prefix 'native.'; float64, prefix 'f64.'.
    """
    for prefix, dtype, mkldnn in (('', torch.float32, True), ('native.', torch.float32, False),
                                  ('f64.', torch.float64, True)):
        model, losses = train(c, case, dtype, mkldnn)
        case.put(prefix + 'losses', torch.tensor(losses, dtype=torch.float64))
        for name, p in model.named_parameters():
            case.put(prefix + 'p.' + name, p)


def run_optim(c, case):
    """The optimiser alone: the T rows of grads (T,n) applied to one float32 parameter p (n) by
    make_optimizer(c) (its StepLR stepped after every step). Writes traj (T,n)."""
    p = torch.nn.Parameter(case.get('p').clone())
    g = case.get('grads')
    opt, sched = make_optimizer(c, [p])
    traj = []
    for t in range(g.shape[0]):
        p.grad = g[t].clone()
        opt.step()
        if sched is not None:
            sched.step()
        traj.append(p.detach().clone())
    case.put('traj', torch.stack(traj))


def run_init_model(c, case):
    """torch.manual_seed(S); ARCH(): PyTorch's own default initialisation."""
    torch.manual_seed(c['seed'])
    model = ARCHS[c['arch']]()
    for name, p in model.named_parameters():
        case.put('p.' + name, p)


def run_init_linear(c, case):
    torch.manual_seed(c['seed'])
    m = nn.Linear(c['in_features'], c['out_features'])
    case.put('weight', m.weight)
    case.put('bias', m.bias)


def run_lstm(c, case):
    """nn.LSTM(batch_first) with the test's weights (PyTorch's own layout: gate rows i, f, g, o)."""
    x = leaf(case.get('x'))
    lstm = nn.LSTM(c['input'], c['hidden'], batch_first=True)
    with torch.no_grad():
        for key in ('weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0'):
            getattr(lstm, key).copy_(case.get(key))
    y, _ = lstm(x)
    backward_with_r(case, y)
    case.put('y', y)
    case.put('dx', x.grad)


KINDS = {'conv2d': run_conv2d, 'pool2d': run_pool2d, 'linear': run_linear, 'module': run_module,
         'xent': run_xent, 'batchnorm': run_batchnorm, 'resblock': run_resblock, 'model': run_model,
         'model_input_grad': run_model_input_grad, 'attack': run_attack, 'ste_attack': run_ste_attack, 'train': run_train, 'optim': run_optim, 'init_model': run_init_model,
         'init_linear': run_init_linear, 'lstm': run_lstm, 'onnx_export': run_onnx_export}


def run_cases(argv, kinds):
    """SCRIPT CASE_DIR [K/N]: runs every case of CASE_DIR/cases.json (those of shard K of N)
    through kinds[case['kind']], naming the case when one fails; records torch's version."""
    if len(argv) not in (2, 3):
        sys.exit('usage: %s CASE_DIR [K/N]' % argv[0])
    folder, shard, shards = argv[1], 0, 1
    if len(argv) == 3:
        shard, shards = (int(v) for v in argv[2].split('/'))
        if not 0 <= shard < shards:
            sys.exit('bad shard %r (K/N, 0 <= K < N)' % argv[2])
    with open(os.path.join(folder, 'cases.json')) as f:
        spec = json.load(f)
    os.makedirs(os.path.join(folder, 'out'), exist_ok=True)
    torch.set_num_threads(int(spec.get('threads', 1)))
    for c in spec['cases']:
        if c.get('shard', 0) % shards != shard:
            continue
        if c['kind'] not in kinds:
            raise KeyError("case '%s': unknown kind '%s'" % (c['name'], c['kind']))
        try:
            kinds[c['kind']](c, Case(folder, c['name']))
        except Exception as e:
            raise RuntimeError("case '%s' (%s) failed" % (c['name'], c['kind'])) from e
    with open(os.path.join(folder, 'out', 'torch_version.txt'), 'w') as f:
        f.write(torch.__version__)
    return 0


if __name__ == '__main__':
    sys.exit(run_cases(sys.argv, KINDS))
