#!/usr/bin/env python3
"""Each preset's time for the same work, relative to the torch preset's: driftlab against itself.

bench/compare times the presets one after another (torch's rows, then tensorflow's, then
theano's), so a slow minute of a shared VM lands on one preset; on the 2-vCPU VMs its per-preset
ratios moved by up to 40% between runs. This script interleaves the presets (round r runs every
preset's work in turn) and keeps the fastest of --rounds runs per preset and row, so that a ratio
says what the preset's kernels cost. Rows: LeNet-1/5 one training epoch on the 60,000
Fashion-MNIST images at B-32/64/128 (SGD lr 0.01, momentum 0.9), their prediction of 1,000 / 10,000
test images in one batch, the LSTM/GRU classifiers' epoch of 12,800 seq-fashion-mnist sequences at
B-128 and their prediction of 128 / 1,000 sequences; with --rows cifar, ResNet-20 and VGG-16 on
1,280 synthetic CIFAR-shaped images at B-128 and their prediction of 1,000.

  bench/preset_speed.py [--build build] [--threads 2] [--rounds 5] [--presets torch,tensorflow,theano]
                        [--rows lenet,rnn,cifar] [--markdown out.md]

Prints a markdown table: per row the torch preset's best time and each other preset's best time
as a ratio to it, and the largest ratio; the header records the date, CPU and commit.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit('preset_speed: %s failed (%d):\n%s' % (' '.join(cmd), r.returncode, r.stderr[-2000:]))
    return r.stdout + r.stderr


def epoch_seconds(run_dir):
    with open(os.path.join(run_dir, 'metrics.json')) as f:
        return float(json.load(f)['epochs'][0]['seconds'])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--presets', default='torch,tensorflow,theano')
    ap.add_argument('--rows', default='lenet,rnn')
    ap.add_argument('--markdown')
    a = ap.parse_args()
    dl = os.path.join(a.build, 'driftlab')
    presets = a.presets.split(',')
    if presets[0] != 'torch':
        sys.exit('preset_speed: the first preset is the one the others are compared with; give torch first')
    parts = a.rows.split(',')
    tmp = tempfile.mkdtemp(prefix='preset_speed_')
    common = ['--threads', str(a.threads), '--no-progress', '--seed', '1', '--epochs', '1']
    # (row name, function(preset) -> seconds); the prediction rows need a model file per preset
    rows = []
    models = {}

    def train_row(model, batch, extra):
        def f(p):
            out = os.path.join(tmp, 'run')
            run([dl, 'train', '--model', model, '--policy', p, '--batch', str(batch), '--out', out] + common + extra)
            return epoch_seconds(out)
        return f

    def predict_row(model, size, dataset):
        def f(p):
            out = run([dl, 'predict', '--weights', models[(model, p)], '--sizes', str(size), '--threads', str(a.threads),
                       '--dataset', dataset])
            m = re.search(r'([0-9.]+) s \(', out)
            if not m:
                sys.exit('preset_speed: no time in predict output:\n' + out)
            return float(m.group(1))
        return f

    lenet = ['--lr', '0.01', '--momentum', '0.9']
    rnn = ['--dataset', 'seq-fashion-mnist', '--limit', '12800', '--lr', '0.01', '--momentum', '0.9']
    if 'lenet' in parts:
        for m in ('lenet1', 'lenet5'):
            for b in (32, 64, 128):
                rows.append(('%s train B-%d' % (m, b), train_row(m, b, lenet)))
            for n in (1000, 10000):
                rows.append(('%s predict %d' % (m, n), predict_row(m, n, 'fashion-mnist')))
    if 'cifar' in parts:
        cifar = ['--dataset', 'synthetic-cifar10', '--limit', '1280', '--lr', '0.01', '--momentum', '0.9']
        for m in ('resnet20', 'vgg16'):
            rows.append(('%s train B-128' % m, train_row(m, 128, cifar)))
            rows.append(('%s predict 1000' % m, predict_row(m, 1000, 'synthetic-cifar10')))
    if 'rnn' in parts:
        for m in ('lstm', 'gru'):
            rows.append(('%s train B-128' % m, train_row(m, 128, rnn)))
            for n in (128, 1000):
                rows.append(('%s predict %d' % (m, n), predict_row(m, n, 'seq-fashion-mnist')))
    # one small model file per model and preset for the prediction rows (timing does not depend on the weights' values)
    for name, _ in rows:
        m = name.split()[0]
        for p in presets:
            if (m, p) in models:
                continue
            out = os.path.join(tmp, '%s-%s' % (m, p))
            ds = (['--dataset', 'seq-fashion-mnist'] if m in ('lstm', 'gru') else
                  ['--dataset', 'synthetic-cifar10'] if m in ('resnet20', 'vgg16') else [])
            run([dl, 'train', '--model', m, '--policy', p, '--limit', '256', '--batch', '128', '--out', out] + common + ds)
            models[(m, p)] = os.path.join(out, 'model.dlm')
    best = {}
    for r in range(a.rounds):
        for name, f in rows:
            for p in presets:
                t = f(p)
                best[(name, p)] = min(best.get((name, p), t), t)
        print('round %d of %d done' % (r + 1, a.rounds), file=sys.stderr)
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'], capture_output=True,
                           text=True).stdout.strip()
    cpu = ''
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('model name'):
                cpu = line.split(':', 1)[1].strip()
                break
    lines = ['%s, %s, %d threads, commit %s%s; best of %d interleaved rounds per preset and row.' %
             (datetime.date.today().isoformat(), cpu, a.threads, commit, '-dirty' if dirty else '', a.rounds), '',
             '| work | torch (s) | ' + ' | '.join('%s / torch' % p for p in presets[1:]) + ' |',
             '| --- | --- | ' + ' | '.join('---' for _ in presets[1:]) + ' |']
    worst = 0.0
    for name, _ in rows:
        t = best[(name, 'torch')]
        ratios = [best[(name, p)] / t for p in presets[1:]]
        worst = max([worst] + ratios)
        lines.append('| %s | %.4f | %s |' % (name, t, ' | '.join('%.2fx' % x for x in ratios)))
    lines += ['', 'largest ratio: %.2fx' % worst]
    text = '\n'.join(lines) + '\n'
    print(text)
    if a.markdown:
        with open(a.markdown, 'w') as f:
            f.write(text)


if __name__ == '__main__':
    main()
