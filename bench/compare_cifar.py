#!/usr/bin/env python3
"""driftlab vs PyTorch on the CIFAR models in the same run: training images/s at a batch size
on synthetic CIFAR-shaped data (random pixels and labels: timing only) and prediction time for
1,000 inputs in one batch. Ratios are driftlab / PyTorch throughput (>1: driftlab faster).

Usage: bench/compare_cifar.py [--build build] [--models resnet20,vgg16] [--batch 128]
                              [--images 1280] [--threads 2] [--policy torch]
"""
import argparse, datetime, json, os, re, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit('failed: %s\n%s%s' % (' '.join(cmd), p.stdout, p.stderr))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--models', default='resnet20,vgg16')
    ap.add_argument('--batch', default='128')
    ap.add_argument('--images', default='1280', help='synthetic training images per driftlab epoch')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--policy', default='torch')
    ap.add_argument('--python', default='/usr/bin/python3')
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    dl = os.path.join(a.build, 'driftlab')
    commit = subprocess.run(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD'], capture_output=True,
                            text=True).stdout.strip()
    print('%s, %d threads, commit %s, policy %s, synthetic-cifar10' % (datetime.date.today().isoformat(), a.threads,
                                                                        commit, a.policy))
    print()
    print('| model | work | driftlab | PyTorch | driftlab / PyTorch |')
    print('| --- | --- | --- | --- | --- |')
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models.split(','):
            steps = max(1, int(a.images) // int(a.batch))
            out = os.path.join(tmp, m)
            run([dl, 'train', '--model', m, '--policy', a.policy, '--dataset', 'synthetic-cifar10', '--limit',
                 a.images, '--batch', a.batch, '--epochs', '1', '--threads', str(a.threads), '--no-progress',
                 '--out', out], env)
            ours = json.load(open(os.path.join(out, 'metrics.json')))['epochs'][0]['images_per_s']
            peer_lines = run([a.python, os.path.join(HERE, 'peers', 'cifar_torch.py'), '--models', m, '--batch',
                              a.batch, '--steps', str(steps), '--threads', str(a.threads)], env).strip().splitlines()
            peer = [json.loads(l) for l in peer_lines]
            train = [p for p in peer if p['work'] == 'train'][0]
            pred = [p for p in peer if p['work'] == 'predict'][0]
            print('| %s | train B-%s, images/s | %.1f | %.1f | %.2fx |' % (m, a.batch, ours, train['images_per_s'],
                                                                         ours / train['images_per_s']))
            text = run([dl, 'predict', '--weights', os.path.join(out, 'model.dlm'), '--dataset', 'synthetic-cifar10',
                        '--limit', '1000', '--sizes', '1000', '--threads', str(a.threads)], env)
            s = float(re.search(r'1000 inputs: ([0-9.]+) s', text).group(1))
            print('| %s | predict 1,000, s | %.3f | %.3f | %.2fx |' % (m, s, pred['seconds'], pred['seconds'] / s))


if __name__ == '__main__':
    main()
