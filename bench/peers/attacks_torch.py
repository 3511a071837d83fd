#!/usr/bin/env python3
"""The work of bench/bm_attacks.cpp in PyTorch 1.13 (Debian's python3-torch), for side-by-side
timing: FGSM and BIM (10 steps) written with autograd on the same architectures in eval() mode
(F.cross_entropy, mean; x' = clamp(x + eps*sign(g)), BIM's projection as in
tests/oracles/torch/oracle.py run_attack), adversarial examples per second over 1,024 (LeNet-5) or
128 (ResNet-20) inputs in batches of 128 / 32; and forward passes of 25 and 128 candidates (the Boundary
attack's queries: Foolbox 2's candidates per step, Foolbox 3's batch) per second. Best of --reps after a warm-up. Prints one JSON object per row.
Each attack twice: work=examples, the examples alone (the attack loop as PyTorch users write it),
and work=same, the work of driftlab's run_gradient_attack (bench/bm_attacks.cpp): the examples,
the judging forward at x' and the per-sample perturbation norms (attack_result()).

  attacks_torch.py [--threads 1,2] [--reps 3] [--parts attacks,queries]
"""
import argparse, json, os, sys, time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cifar_torch import ResNet20  # noqa: E402
from lenet_torch import lenet5  # noqa: E402


def attack(model, x, y, eps, step, steps, lo, hi):
    x0 = x
    if steps == 0:
        x = x.clone().requires_grad_(True)
        F.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            return torch.clamp(x0 + eps * x.grad.sign(), lo, hi)
    for _ in range(steps):
        x = x.detach().requires_grad_(True)
        F.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            x = x + step * x.grad.sign()
            x = torch.clamp(x0 + torch.clamp(x - x0, -eps, eps), lo, hi)
    return x.detach()


def attack_result(model, x, y, eps, step, steps, lo, hi):
    """What driftlab's run_gradient_attack returns for a batch, not only the examples: the attack,
    then the judging forward (the prediction at x', for success), and the per-sample L0 / L2 /
    L-inf norms of x' - x, all handed back on the host. The "same work" rows time this."""
    xa = attack(model, x, y, eps, step, steps, lo, hi)
    with torch.no_grad():
        pred = model(xa).argmax(1)
        d = (xa - x).flatten(1).double()
        norms = torch.stack((d.ne(0).sum(1).double(), d.norm(dim=1), d.abs().amax(1)), 1)
    return xa.cpu(), pred.cpu(), norms.cpu()


def best(fn, reps):
    fn()
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        t.append(time.perf_counter() - s)
    return min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--parts', default='attacks,queries', help='attacks (FGSM, BIM), queries (forward passes)')
    a = ap.parse_args()
    parts = a.parts.split(',')
    for threads in [int(v) for v in a.threads.split(',')]:
        torch.set_num_threads(threads)
        for arch in ('lenet5', 'resnet20'):
            torch.manual_seed(0)
            model = (lenet5() if arch == 'lenet5' else ResNet20()).eval()
            for p in model.parameters():
                p.requires_grad_(False)  # input gradients only, as an attack needs
            n, batch = (1024, 128) if arch == 'lenet5' else (128, 32)
            shape = (n, 1, 28, 28) if arch == 'lenet5' else (n, 3, 32, 32)
            lo = 0.0 if arch == 'lenet5' else -1.0
            x = torch.rand(shape) * (1.0 - lo) + lo
            y = torch.arange(n) % 10
            for name, steps in (('fgsm', 0), ('bim-10', 10)) if 'attacks' in parts else ():
                # the examples only (work='examples'), and what driftlab's attack returns
                # (work='same': + judging forward and norms, attack_result())
                for work, fn in (('examples', attack), ('same', attack_result)):
                    def run():
                        for i in range(0, n, batch):
                            fn(model, x[i:i + batch], y[i:i + batch], 0.03, 0.01, steps, lo, 1.0)
                    s = best(run, a.reps)
                    print(json.dumps({'model': arch, 'attack': name, 'work': work, 'batch': batch,
                                      'threads': threads, 'inputs': n, 'seconds': s, 'ex_per_s': n / s}))
            for qb in (25, 128) if 'queries' in parts else ():  # Foolbox 2's candidates per step; Foolbox 3's batch of samples
                q = x[:qb].clone()  # n >= 128
                with torch.no_grad():
                    calls = 20
                    s = best(lambda: [model(q) for _ in range(calls)], a.reps)
                print(json.dumps({'model': arch, 'attack': 'queries', 'batch': qb, 'threads': threads,
                                  'queries_per_s': qb * calls / s}))


if __name__ == '__main__':
    main()
