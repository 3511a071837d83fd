#!/usr/bin/env python3
"""PyTorch 1.13 side of driftlab's int8-graph oracle (tests/oracles/test_quant_graph_oracle_torch.cpp):
torchvision's quantizable models (torchvision.models.quantization, 0.14) quantized by eager-mode
static PTQ on PyTorch's own engines, and the same float model exported to ONNX for driftlab.

    quant_graph_oracle.py OUT_DIR NAME SIZE CALIB_BATCHES CALIB_ROWS TEST_ROWS ENGINE...

NAME: mobilenet_v2 or resnet50 (torchvision.models.quantization.NAME(weights=None, quantize=False,
num_classes=10): random weights from torch.manual_seed(0), nothing downloaded; ReLU6 already
replaced by ReLU, as torchvision does for its quantizable models). BatchNorm statistics and affine
parameters drawn (running_mean ~ N(0, 0.1), running_var ~ U(0.5, 1.5), weight ~ U(0.5, 1.5), bias
~ N(0, 0.1)); Dropout replaced by the identity; eval(). Writes:

  OUT_DIR/NAME.onnx        the float model, torch.onnx.export opset 13, BatchNorm kept
                           (training=PRESERVE, do_constant_folding=False): driftlab folds it itself
  OUT_DIR/calib<k>.npy     CALIB_BATCHES batches of CALIB_ROWS x 3 x SIZE x SIZE, U(-1, 1) (seed 1)
  OUT_DIR/x.npy            TEST_ROWS test inputs, U(-1, 1) (seed 2)

and for each ENGINE (qnnpack, onednn), the model fused (its fuse_model(): conv+bn(+relu)), given
get_default_qconfig(ENGINE), prepared, calibrated batch by batch, converted, run on x:

  ENGINE.qparams.npy  float64 rows [scale, zero_point]: the QuantStub, then every point in the order
                      its output is computed (each quantized conv / linear, each residual add)
  ENGINE.names.txt    the points' module names, one per line (the QuantStub first)
  ENGINE.a<i>.npy     the fp32 tensors point i's observer was shown during calibration, concatenated
                      (torch 1.13 shows a fused ConvReLU2d's observer each batch twice: kept)
  ENGINE.y<i>.npy     point i+1's integer output on x (int_repr)
  ENGINE.w<j>.npy, ENGINE.ws<j>.npy  conv/linear j's int8 weight and its scales
  ENGINE.logits.npy   the dequantized logits
"""
import copy
import os
import sys

import numpy as np
import torch
import torchvision
from torch.ao.quantization import convert, get_default_qconfig, prepare
import torch.nn.quantized as nnq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchvision_models import randomise_batchnorm  # noqa: E402


def build(name):
    torch.manual_seed(0)
    m = randomise_batchnorm(getattr(torchvision.models.quantization, name)(weights=None, quantize=False, num_classes=10))
    for parent in list(m.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Dropout):
                setattr(parent, child_name, torch.nn.Identity())
    return m.eval()


def quantize(float_model, engine, calib, x, out):
    torch.backends.quantized.engine = engine
    model = copy.deepcopy(float_model).eval()
    model.fuse_model()
    model.qconfig = get_default_qconfig(engine)
    prepare(model, inplace=True)
    seen = {}
    for name, m in model.named_modules():
        if name.endswith('activation_post_process'):
            owner = name[:-len('.activation_post_process')]
            m.register_forward_hook(
                lambda mod, inp, o, owner=owner: seen.setdefault(owner, []).append(inp[0].detach().clone()))
    with torch.no_grad():
        for c in calib:
            model(c)
    convert(model, inplace=True)
    names = {id(m): n for n, m in model.named_modules()}

    def add_of(m):  # the residual add a block returns (one that ran during calibration)
        for cn, c in m.named_children():
            if isinstance(c, nnq.QFunctional) and names[id(c)] in seen:
                return c
        return None

    def is_point(m):
        return (hasattr(m, 'weight') and callable(m.weight)) or add_of(m) is not None

    def post_order(m, acc):  # a block after its convs: the order its outputs are computed in
        for child in m.children():
            post_order(child, acc)
        if is_point(m):
            acc.append(m)
        return acc

    points = post_order(model, [])
    outs = {}
    hooks = [m.register_forward_hook(lambda mod, inp, o: outs.setdefault(id(mod), o)) for m in points]
    with torch.no_grad():
        logits = model(x)
    for h in hooks:
        h.remove()
    rows = [[float(model.quant.scale), float(model.quant.zero_point)]]
    listed = ['quant']
    np.save(f'{out}/{engine}.a0.npy', torch.cat(seen['quant']).numpy())
    li = 0
    for i, m in enumerate(points):
        q = add_of(m) or m
        np.save(f'{out}/{engine}.a{i + 1}.npy', torch.cat(seen[names[id(q)]]).numpy())
        rows.append([float(q.scale), float(q.zero_point)])
        listed.append(names[id(q)])
        np.save(f'{out}/{engine}.y{i}.npy', outs[id(m)].int_repr().numpy())
        if q is m:
            w = m.weight()
            np.save(f'{out}/{engine}.w{li}.npy', w.int_repr().numpy())
            if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
                ws = w.q_per_channel_scales().to(torch.float32)
            else:
                ws = torch.tensor([w.q_scale()], dtype=torch.float32)
            np.save(f'{out}/{engine}.ws{li}.npy', ws.numpy())
            li += 1
    np.save(f'{out}/{engine}.qparams.npy', np.array(rows, dtype=np.float64))
    with open(f'{out}/{engine}.names.txt', 'w') as f:
        f.write('\n'.join(listed) + '\n')
    np.save(f'{out}/{engine}.logits.npy', logits.numpy())


def main(argv):
    out, name, size, batches, rows, test_rows = argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5]), int(argv[6])
    engines = argv[7:]
    torch.set_num_threads(1)
    m = build(name)
    torch.manual_seed(1)
    calib = [torch.rand(rows, 3, size, size) * 2 - 1 for _ in range(batches)]
    torch.manual_seed(2)
    x = torch.rand(test_rows, 3, size, size) * 2 - 1
    torch.onnx.export(m, x, f'{out}/{name}.onnx', opset_version=13, input_names=['x'], output_names=['logits'],
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      dynamic_axes={'x': {0: 'n'}, 'logits': {0: 'n'}})
    for k, c in enumerate(calib):
        np.save(f'{out}/calib{k}.npy', c.numpy())
    np.save(f'{out}/x.npy', x.numpy())
    for engine in engines:
        quantize(m, engine, calib, x, out)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
