#!/usr/bin/env python3
"""torchvision's MobileNetV2 and ResNet-50 (S2's models; Debian python3-torchvision 0.14, random
weights, nothing downloaded) at CIFAR's shape (3x32x32, 10 classes) in PyTorch, timed on synthetic
data as cifar_torch.py times the zoo, and exported for driftlab's graph import (bench/compare's
`graph` part): Dropout replaced by the identity on both sides (ONNX's training-mode Dropout is
not imported; its mask is random anyway), the ONNX file written with BatchNorm kept
(training=PRESERVE, no constant folding) so that driftlab trains the same model.

Prints one JSON object per measurement: the model's forward FLOPs per image (2 x the multiply-adds
of its convolutions, grouped ones counted per group, and linear layers: as flops.py counts),
training images/s at a batch size (SGD momentum 0.9: timing.py) and prediction time for N inputs
in one batch. --export DIR writes DIR/NAME.onnx first.
"""
import argparse, json, os, sys

import torch
import torch.nn as nn
import torchvision

from timing import predict_seconds, train_images_per_s


def build(name, classes):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None, num_classes=classes)
    for parent in list(m.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(parent, child_name, nn.Identity())
    return m


def forward_flops(model, size):
    macs = [0]

    def conv_hook(m, inp, out):
        macs[0] += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear_hook(m, inp, out):
        macs[0] += out.numel() * m.in_features

    hooks = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
    model.eval()
    with torch.no_grad():
        model(torch.rand(1, 3, size, size))
    for h in hooks:
        h.remove()
    return 2 * macs[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--models', default='mobilenet_v2,resnet50')
    ap.add_argument('--size', type=int, default=32)
    ap.add_argument('--classes', type=int, default=10)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--predict', type=int, default=1000)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--export', default='')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.models.split(','):
        model = build(name, a.classes)
        base = {'framework': 'pytorch ' + torch.__version__, 'torchvision': torchvision.__version__, 'model': name,
                'threads': a.threads}
        if a.export:
            model.eval()
            torch.onnx.export(model, torch.rand(1, 3, a.size, a.size), os.path.join(a.export, name + '.onnx'),
                              opset_version=13, input_names=['x'], output_names=['logits'],
                              training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                              dynamic_axes={'x': {0: 'n'}, 'logits': {0: 'n'}})
        print(json.dumps(dict(base, work='flops', flops=forward_flops(model, a.size),
                              params=sum(p.numel() for p in model.parameters()))), flush=True)
        torch.manual_seed(1)
        x = torch.rand(a.batch, 3, a.size, a.size)
        y = torch.randint(0, a.classes, (a.batch,))
        epoch, after_first = train_images_per_s(model, x, y, a.steps)
        print(json.dumps(dict(base, work='train', batch=a.batch, images_per_s=epoch,
                              images_per_s_after_first=after_first)), flush=True)
        if a.predict:
            secs = predict_seconds(model, torch.rand(a.predict, 3, a.size, a.size))
            print(json.dumps(dict(base, work='predict', batch=a.predict, seconds=secs)), flush=True)


if __name__ == '__main__':
    sys.exit(main())
