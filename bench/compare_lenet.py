#!/usr/bin/env python3
"""driftlab vs PyTorch on the same machine in the same run: LeNet-1/LeNet-5 training epoch
time on Fashion-MNIST at several batch sizes, and prediction time for 1,000 / 10,000 inputs in
one batch. Each (model, batch) pair runs driftlab then PyTorch back to back, so both see the
same machine state; results are reported as ratios (PyTorch time / driftlab time, >1 means
driftlab is faster). Writes a Markdown table to stdout and all raw numbers as JSON.

Usage: bench/compare_lenet.py [--build build] [--threads 2] [--batches 32,64,128]
                              [--models lenet1,lenet5] [--policy torch] [--json out.json]
PyTorch comes from Debian (python3-torch, /usr/bin/python3); see ../shared/PEERS.md.
"""
import argparse, datetime, json, os, platform, re, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit('failed: %s\n%s%s' % (' '.join(cmd), p.stdout, p.stderr))
    return p.stdout


def cpu_name():
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--batches', default='32,64,128')
    ap.add_argument('--models', default='lenet1,lenet5')
    ap.add_argument('--policy', default='torch')
    ap.add_argument('--lr', default='0.01')
    ap.add_argument('--json', default='')
    ap.add_argument('--python', default='/usr/bin/python3')
    a = ap.parse_args()
    driftlab = os.path.join(a.build, 'driftlab')
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    commit = subprocess.run(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD'], capture_output=True,
                            text=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(','):
            for b in a.batches.split(','):
                out = os.path.join(tmp, '%s_%s' % (model, b))
                run([driftlab, 'train', '--model', model, '--policy', a.policy, '--epochs', '1', '--batch', b,
                     '--lr', a.lr, '--momentum', '0.9', '--seed', '1', '--threads', str(a.threads),
                     '--no-progress', '--out', out], env)
                m = json.load(open(os.path.join(out, 'metrics.json')))
                ours = m['epochs'][0]['seconds']
                peer = json.loads(run([a.python, os.path.join(HERE, 'peers', 'lenet_torch.py'), '--models', model,
                                       '--batches', b, '--predict', '', '--lr', a.lr,
                                       '--threads', str(a.threads)], env).strip().splitlines()[-1])
                rows.append({'model': model, 'work': 'train epoch B-%s' % b, 'driftlab_s': ours,
                             'pytorch_s': peer['seconds'], 'driftlab_acc': m['test']['accuracy'],
                             'pytorch_acc': peer['test_acc'], 'pytorch': peer['framework']})
            text = run([driftlab, 'predict', '--weights', os.path.join(out, 'model.dlm'), '--sizes', '1000,10000',
                        '--threads', str(a.threads)], env)
            ours = {int(n): float(s) for n, s in re.findall(r'(\d+) inputs: ([0-9.]+) s', text)}
            peer_lines = run([a.python, os.path.join(HERE, 'peers', 'lenet_torch.py'), '--models', model,
                              '--batches', '', '--predict', '1000,10000', '--threads', str(a.threads)], env)
            for line in peer_lines.strip().splitlines():
                p = json.loads(line)
                rows.append({'model': model, 'work': 'predict %d' % p['batch'], 'driftlab_s': ours[p['batch']],
                             'pytorch_s': p['seconds'], 'pytorch': p['framework']})
    meta = {'date': datetime.date.today().isoformat(), 'machine': '%s, %d cores' % (cpu_name(), os.cpu_count()),
            'threads': a.threads, 'commit': commit, 'policy': a.policy, 'lr': a.lr}
    print('%s, %s, %d threads, commit %s, policy %s' % (meta['date'], meta['machine'], a.threads, commit, a.policy))
    print()
    print('| model | work | driftlab (s) | PyTorch (s) | PyTorch / driftlab | test acc driftlab / PyTorch |')
    print('| --- | --- | --- | --- | --- | --- |')
    for r in rows:
        acc = '%.4f / %.4f' % (r['driftlab_acc'], r['pytorch_acc']) if 'driftlab_acc' in r else ''
        print('| %s | %s | %.3f | %.3f | %.2fx | %s |' % (r['model'], r['work'], r['driftlab_s'], r['pytorch_s'],
                                                          r['pytorch_s'] / r['driftlab_s'], acc))
    if a.json:
        json.dump({'meta': meta, 'rows': rows}, open(a.json, 'w'), indent=2)


if __name__ == '__main__':
    main()
