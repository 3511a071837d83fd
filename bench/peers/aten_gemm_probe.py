#!/usr/bin/env python3
"""How PyTorch's own CPU GEMM sums bfloat16 products, written out and checked bit for bit.

PyTorch runs a bfloat16 matrix product in oneDNN on a CPU with AVX-512 BW, VL and DQ when
m*k*n > 4096, and in ATen's own GEMM otherwise (an AVX2 CPU, a small product, or
torch.backends.mkldnn disabled, as here). This script states that GEMM's rules in NumPy and checks
them against PyTorch with oneDNN disabled, every element:

  x W^T (B stored transposed): a float32 dot product, l ascending, added to beta * C and rounded
      to bfloat16 once;
  A B and A^T B: in bfloat16's own arithmetic, C from beta * C and for l ascending
      c = R(c + R(a_l * b_l)), every product and every partial sum rounded.

driftlab's knob matmul_sum=per_term is these rules for dense layers (docs/REDUCED_PRECISION.md).
Then nn.Linear under torch.autocast('cpu', bfloat16), forward and backward (dx, dW per term; the
bias gradient a float32 sum rounded once), and F.conv2d under autocast (the slow convolution):
its forward, dx and dW follow the same rules through im2col (stated below); its bias gradient
follows neither rule tried here, so convolutions are not emulated.

Usage: /usr/bin/python3 bench/peers/aten_gemm_probe.py    (prints one line per check; exit 1 if a
stated rule misses an element)
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

BF = torch.bfloat16
failures = []


def r(x):
    """float32 values rounded to bfloat16 (round to nearest even), as float32."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(BF).float().numpy()


def per_term(a, b, c0):
    """C = c0 + A B in bfloat16 arithmetic, l ascending."""
    c = c0.astype(np.float32).copy()
    for l in range(a.shape[1]):
        c = r(c + r(np.outer(a[:, l], b[l, :]).astype(np.float32)))
    return c


def dot(a, b, c0=None):
    """R(c0 + the float32 dot products of A's rows and B's columns, l ascending)."""
    t = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for l in range(a.shape[1]):
        t += np.outer(a[:, l], b[l, :]).astype(np.float32)
    return r(t if c0 is None else c0.astype(np.float32) + t)


def dot4(a, b):
    """The same dot products as four strided partial sums, for contrast: another float32 order."""
    k = a.shape[1]
    s = np.zeros((4, a.shape[0], b.shape[1]), np.float32)
    for l in range(k):
        s[l % 4 if l < k - k % 4 else 0] += np.outer(a[:, l], b[l, :]).astype(np.float32)
    return r(((s[0] + s[1]) + s[2]) + s[3])


def check(what, mine, theirs):
    theirs = theirs.detach().float().numpy() if torch.is_tensor(theirs) else theirs
    differ = int((mine != theirs).sum())
    print('%-62s %6d of %6d differ' % (what, differ, mine.size))
    if differ:
        failures.append(what)


def randbf(*shape):
    return torch.randn(*shape).to(BF)


def main():
    torch.manual_seed(0)
    with torch.backends.mkldnn.flags(enabled=False):
        for m, k, n in ((5, 37, 7), (16, 64, 16), (3, 302, 9), (8, 39, 11), (64, 84, 10)):
            x, w, b, g = randbf(m, k), randbf(n, k), randbf(n), randbf(m, n)
            xf, wf, bf, gf = (t.float().numpy() for t in (x, w, b, g))
            shape = 'm %d k %d n %d' % (m, k, n)
            check('addmm(b, x, W^T): float32 dot, %s' % shape, dot(xf, wf.T, np.broadcast_to(bf, (m, n))),
                  torch.addmm(b, x, w.t()))
            check('mm(g, W): per term in bfloat16, %s' % shape, per_term(gf, wf, np.zeros((m, k))), torch.mm(g, w))
            check('mm(g^T, x): per term in bfloat16, %s' % shape, per_term(gf.T, xf, np.zeros((n, k))),
                  torch.mm(g.t(), x))
            # nn.Linear under autocast: the same products, forward and backward.
            lin = torch.nn.Linear(k, n)
            xx = x.float().clone().requires_grad_(True)
            with torch.autocast('cpu', dtype=BF):
                out = lin(xx)
            out.backward(g.float())
            wb, bb = lin.weight.detach().to(BF).float().numpy(), lin.bias.detach().to(BF).float().numpy()
            check('nn.Linear autocast: output, %s' % shape, dot(xf, wb.T, np.broadcast_to(bb, (m, n))), out)
            check('nn.Linear autocast: dx per term, %s' % shape, per_term(gf, wb, np.zeros((m, k))), xx.grad)
            check('nn.Linear autocast: dW per term, %s' % shape, per_term(gf.T, xf, np.zeros((n, k))), lin.weight.grad)
            check('nn.Linear autocast: db a float32 sum rounded once, %s' % shape, r(gf.sum(0, dtype=np.float64)),
                  lin.bias.grad)
        for m, k, n in ((64, 4096, 64), (100, 100, 100), (32, 257, 128)):
            x, w = randbf(m, k), randbf(n, k)
            xf, wf = x.float().numpy(), w.float().numpy()
            t = torch.mm(x, w.t())
            shape = 'm %d k %d n %d' % (m, k, n)
            check('mm(x, W^T): float32 dot, %s' % shape, dot(xf, wf.T), t)
            print('%-62s %6d of %6d differ (printed: an order PyTorch 1.13 does not use)'
                  % ('  the same as four strided partial sums', int((dot4(xf, wf.T) != t.float().numpy()).sum()), t.numel()))
        conv()
    print('every stated rule held' if not failures else 'MISSED: ' + '; '.join(failures))
    return 1 if failures else 0


def conv():
    """F.conv2d under autocast without oneDNN (the slow convolution: im2col, then ATen's GEMM per image)."""
    torch.manual_seed(1)
    n, c, h, w, o, kk = 2, 3, 6, 6, 4, 3
    x, wt, b = randbf(n, c, h, w), randbf(o, c, kk, kk), randbf(o)
    xx = x.float().requires_grad_(True)
    ww, bb = torch.nn.Parameter(wt.float()), torch.nn.Parameter(b.float())
    with torch.autocast('cpu', dtype=BF):
        y = F.conv2d(xx, ww, bb, padding=1)
    g = randbf(*y.shape)
    y.backward(g.float())
    cols = F.unfold(x.float(), kk, padding=1).numpy()  # (N, C*K*K, H*W), rows in (c, kh, kw) order
    wf, bf = wt.float().numpy().reshape(o, -1), b.float().numpy()
    gn = g.float().numpy().reshape(n, o, -1)
    fwd = np.stack([per_term(wf, cols[i], np.repeat(bf[:, None], h * w, 1)) for i in range(n)])
    check('conv2d autocast: output W cols per term from the bias', fwd, y.detach().float().numpy().reshape(n, o, -1))
    dw = np.zeros((o, c * kk * kk), np.float32)
    for i in range(n):  # image by image, each a float32 dot over H*W added to the bfloat16 sum
        dw = dot(gn[i], cols[i].T, dw)
    check('conv2d autocast: dW float32 dots, added image by image', dw, ww.grad.numpy().reshape(o, -1))
    gx = np.zeros((n, c, h, w), np.float32)
    for i in range(n):  # W^T g per term, then col2im adding in bfloat16 in (c, kh, kw, y, x) order
        dc = per_term(wf.T, gn[i], np.zeros((c * kk * kk, h * w))).reshape(c, kk, kk, h, w)
        for ch in range(c):
            for kh in range(kk):
                for kw in range(kk):
                    for oy in range(h):
                        for ox in range(w):
                            iy, ix = oy + kh - 1, ox + kw - 1
                            if 0 <= iy < h and 0 <= ix < w:
                                gx[i, ch, iy, ix] = r(gx[i, ch, iy, ix] + dc[ch, kh, kw, oy, ox])
    check('conv2d autocast: dx per term, col2im in bfloat16', gx, xx.grad)
    once = r(gn.sum((0, 2), dtype=np.float64))
    by_image = np.zeros(o, np.float32)
    for i in range(n):
        by_image = r(by_image + gn[i].sum(1, dtype=np.float32))
    got = bb.grad.numpy()
    print('conv2d autocast: db, not a stated rule: rounded once %d of %d differ, image by image %d of %d differ'
          % (int((once != got).sum()), o, int((by_image != got).sum()), o))


if __name__ == '__main__':
    sys.exit(main())
