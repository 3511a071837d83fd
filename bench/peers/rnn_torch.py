#!/usr/bin/env python3
"""The LSTM and GRU classifiers of driftlab's models/rnn.cpp in PyTorch: 28 steps of 28
features into one nn.LSTM / nn.GRU layer of 128 units (batch_first), the last step's output
into nn.Linear(128, 10). Timed on synthetic sequences (random values and labels: timing only).
Prints one JSON object per measurement: training sequences/s at a batch size (SGD momentum 0.9,
a fresh model's steps with its first counted, and after the first: timing.py) and prediction time for N sequences in one batch.
Run with the Debian Python that has python3-torch (/usr/bin/python3).
"""
import argparse, json, sys

import torch
import torch.nn as nn

from timing import predict_seconds, train_images_per_s


class Classifier(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = {'lstm': nn.LSTM, 'gru': nn.GRU}[cell](28, 128, batch_first=True)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--models', default='lstm,gru')
    ap.add_argument('--batch', type=int, default=128)
    ap.add_argument('--steps', type=int, default=50)
    ap.add_argument('--predict', default='1000')
    ap.add_argument('--threads', type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    for name in a.models.split(','):
        model = Classifier(name)
        x = torch.rand(a.batch, 28, 28)
        y = torch.randint(0, 10, (a.batch,))
        epoch, after_first = train_images_per_s(model, x, y, a.steps)
        print(json.dumps({'framework': 'pytorch ' + torch.__version__, 'model': name, 'work': 'train',
                          'batch': a.batch, 'images_per_s': epoch, 'images_per_s_after_first': after_first,
                          'threads': a.threads}), flush=True)
        for n in [int(v) for v in a.predict.split(',') if v]:
            secs = predict_seconds(model, torch.rand(n, 28, 28))
            print(json.dumps({'framework': 'pytorch ' + torch.__version__, 'model': name, 'work': 'predict',
                              'batch': n, 'seconds': secs, 'threads': a.threads}), flush=True)

if __name__ == '__main__':
    sys.exit(main())
