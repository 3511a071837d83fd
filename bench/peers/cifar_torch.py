#!/usr/bin/env python3
"""ResNet-20 (option A) and VGG-16 (4096-4096-10 head) in PyTorch, the same architectures as
driftlab's models/cifar.cpp, timed on synthetic CIFAR-shaped data (random pixels and labels:
timing only). Prints one JSON object per measurement: training images/s at a batch size
(SGD momentum 0.9, a fresh model's steps with its first counted, and after the first: timing.py) and prediction time for N inputs in one batch.
Run with the Debian Python that has python3-torch (/usr/bin/python3).
"""
import argparse, json, sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from timing import predict_seconds, train_images_per_s


class Block(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(planes)
        self.c2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(planes)
        self.pad = (planes - cin) // 2 if (stride != 1 or cin != planes) else None
        self.stride = stride

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        s = x if self.pad is None else F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(y + s)


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.b = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                layers.append(Block(cin, planes, stride if i == 0 else 1))
                cin = planes
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.layers(F.relu(self.b(self.c(x))))
        return self.fc(x.mean((2, 3)))


def vgg16():
    cfg = [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M']
    layers, cin = [], 3
    for v in cfg:
        if v == 'M':
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
            cin = v
    layers += [nn.Flatten(), nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)]
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--models', default='resnet20,vgg16')
    ap.add_argument('--batch', type=int, default=128)
    ap.add_argument('--steps', type=int, default=10)
    ap.add_argument('--predict', type=int, default=1000)
    ap.add_argument('--threads', type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    for name in a.models.split(','):
        model = {'resnet20': ResNet20, 'vgg16': vgg16}[name]()
        params = sum(p.numel() for p in model.parameters())
        x = torch.rand(a.batch, 3, 32, 32)
        y = torch.randint(0, 10, (a.batch,))
        epoch, after_first = train_images_per_s(model, x, y, a.steps)
        print(json.dumps({'framework': 'pytorch ' + torch.__version__, 'model': name, 'params': params,
                          'work': 'train', 'batch': a.batch, 'images_per_s': epoch,
                          'images_per_s_after_first': after_first, 'threads': a.threads}),
              flush=True)
        if a.predict:
            secs = predict_seconds(model, torch.rand(a.predict, 3, 32, 32))
            print(json.dumps({'framework': 'pytorch ' + torch.__version__, 'model': name, 'work': 'predict',
                              'batch': a.predict, 'seconds': secs, 'threads': a.threads}), flush=True)

if __name__ == '__main__':
    sys.exit(main())
