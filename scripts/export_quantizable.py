#!/usr/bin/env python3
"""Exports one of torchvision's quantizable models (torchvision.models.quantization, 0.14) to ONNX for
driftlab's import: the float model PyTorch's eager-mode PTQ quantizes (ReLU where the plain model
has ReLU6), with random weights (torch.manual_seed(SEED); nothing downloaded).

    export_quantizable.py NAME OUT.onnx [--channels C] [--size S] [--classes K] [--seed SEED]

NAME: mobilenet_v2, resnet18, resnet50, ... --channels 1 replaces the first convolution by one of
one input channel (Fashion-MNIST-shaped inputs, --size 28). Dropout is replaced by the identity
(eval mode has no mask; driftlab's training draws its own where the graph keeps one). BatchNorm is
kept (training=PRESERVE, do_constant_folding=False) so that the graph trains and driftlab's
quantization folds it as torch.ao.quantization.fuse_modules does.
"""
import argparse

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('name')
    ap.add_argument('out')
    ap.add_argument('--channels', type=int, default=3)
    ap.add_argument('--size', type=int, default=32)
    ap.add_argument('--classes', type=int, default=10)
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    m = getattr(torchvision.models.quantization, a.name)(weights=None, quantize=False, num_classes=a.classes)
    if a.channels != 3:
        first = next(mod for mod in m.modules() if isinstance(mod, torch.nn.Conv2d))
        for parent in m.modules():
            for child_name, child in parent.named_children():
                if child is first:
                    setattr(parent, child_name, torch.nn.Conv2d(a.channels, first.out_channels, first.kernel_size,
                                                                first.stride, first.padding, bias=first.bias is not None))
    for parent in list(m.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Dropout):
                setattr(parent, child_name, torch.nn.Identity())
    m.eval()
    x = torch.rand(1, a.channels, a.size, a.size)
    torch.onnx.export(m, x, a.out, opset_version=13, input_names=['x'], output_names=['logits'],
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      dynamic_axes={'x': {0: 'n'}, 'logits': {0: 'n'}})


if __name__ == '__main__':
    main()
