#!/usr/bin/env python3
"""What PyTorch's CPU autocast does inside nn.LSTM and nn.GRU (bfloat16): their outputs are float32,
but the layers' own ops run under autocast's lists. Written out here op by op, forward and
backward, as a trace of the dispatched ATen ops showed them (torch.utils._python_dispatch
.TorchDispatchMode), and checked bit for bit against the real layers and autograd on random inputs.
It is the specification an emulation of autocast for recurrent layers must meet
(docs/REDUCED_PRECISION.md, "Recurrent layers under autocast").

Usage: /usr/bin/python3 bench/peers/rnn_autocast_probe.py   (PyTorch 1.13 from Debian; no GPU)
Prints, per cell and seed, how many outputs and gradient elements the written-out ops give bit for
bit; then which bfloat16 GEMMs PyTorch sums in float32 on this CPU (gemm_accumulation).
"""
import torch

BF = torch.bfloat16


def input_projection(x, w_ih, b_ih, contiguous):
    # F.linear on the whole (T, N, F) sequence at once. at::linear folds a contiguous 3-D input
    # into one addmm (the bias inside the float32 sum: one rounding); a non-contiguous one (the
    # transposed input of batch_first=True) goes through matmul, then the bias is added in bfloat16
    # (the product rounded, then the sum rounded again).
    T, N, F = x.shape
    if contiguous:
        return torch.addmm(b_ih, x.reshape(-1, F).to(BF), w_ih.t()).reshape(T, N, -1)
    return torch.mm(x.reshape(-1, F).to(BF), w_ih.t()).reshape(T, N, -1) + b_ih


def lstm_by_hand(x, contiguous, w_ih, w_hh, b_ih, b_hh, saved=None):
    # saved: a list to append each step's values to (a dict: the backward's and the oracle test's).
    T, N, _ = x.shape
    H = w_hh.shape[1]
    xs = input_projection(x, w_ih, b_ih, contiguous)
    h = torch.zeros(N, H)
    c = torch.zeros(N, H)
    outs = []
    for t in range(T):
        hb = h.to(BF)
        hr = torch.addmm(b_hh, hb, w_hh.t())  # the bias inside the sum
        gates = hr.clone().add_(xs[t])  # then a bfloat16 add
        i, f, g, o = gates.chunk(4, 1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()  # bfloat16 results
        c_prev, c = c, (f * c).add_(i * g)  # f*c: float32 (bf16 x f32); i*g: bfloat16; the sum float32
        tc = c.tanh()
        h = o * tc  # float32
        outs.append(h)
        if saved is not None:
            saved.append(dict(hb=hb, i=i, f=f, g=g, o=o, c_prev=c_prev, tc=tc, xs=xs[t], hr=hr, a=gates,
                              act=torch.cat([i, f, g, o], 1), c=c, h=h))
    return torch.stack(outs, 0)


def gru_by_hand(x, contiguous, w_ih, w_hh, b_ih, b_hh, saved=None):
    # saved: a list to append each step's values to (a dict: the backward's and the oracle test's).
    T, N, _ = x.shape
    H = w_hh.shape[1]
    xs = input_projection(x, w_ih, b_ih, contiguous)
    h = torch.zeros(N, H)
    outs = []
    for t in range(T):
        hb = h.to(BF)
        xr, xz, xn = xs[t].chunk(3, 1)
        rec = torch.addmm(b_hh, hb, w_hh.t())
        hr, hz, hn = rec.chunk(3, 1)
        a_r, a_z = hr.add(xr), hz.add(xz)
        r = a_r.sigmoid()  # bfloat16
        z = a_z.sigmoid()
        a_n = xn.add(hn.mul(r))  # r * (h W_hn + b_hn): bfloat16, then + the input part
        n = a_n.tanh()
        h_prev, h = h, (h - n).mul_(z).add_(n)  # float32
        outs.append(h)
        if saved is not None:
            saved.append(dict(hb=hb, h_prev=h_prev, r=r, z=z, n=n, hn=hn, xs=xs[t], hr=rec,
                              a=torch.cat([a_r, a_z, a_n], 1), act=torch.cat([r, z, n], 1), h=h))
    return torch.stack(outs, 0)


def main():
    for cell, mod, by_hand in (("lstm", torch.nn.LSTM, lstm_by_hand), ("gru", torch.nn.GRU, gru_by_hand)):
        for batch_first in (False, True):
            for seed in (0, 1, 2):
                torch.manual_seed(seed)
                layer = mod(28, 32, batch_first=batch_first)
                x = torch.randn(7, 5, 28)  # (T, N, F), or (N, T, F) under batch_first
                with torch.no_grad():
                    with torch.autocast("cpu", dtype=BF):
                        y, _ = layer(x)
                    ws = [t.detach().to(BF) for t in (layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0,
                                                       layer.bias_hh_l0)]
                    seq = x.transpose(0, 1) if batch_first else x
                    ym = by_hand(seq, not batch_first, *ws)
                    if batch_first:
                        ym = ym.transpose(0, 1)
                    # The other input-projection rule, to show the two differ.
                    other = by_hand(seq, batch_first, *ws)
                    if batch_first:
                        other = other.transpose(0, 1)
                print("%s batch_first=%s seed %d: output %s, %d of %d bit for bit (largest difference %.3g); "
                      "with the other input-projection rounding %d of %d" % (
                          cell, batch_first, seed, str(y.dtype).replace("torch.", ""), int((y == ym).sum()),
                          y.numel(), float((y - ym).abs().max()), int((y == other).sum()), y.numel()))


def R(t):
    return t.to(BF)


def lstm_backward_by_hand(x, dy, w_ih, w_hh, b_ih, b_hh):
    """The gradients of sum(y * dy) for a (T, N, F) contiguous sequence: dx, dW_ih, dW_hh, db_ih, db_hh."""
    T, N, F = x.shape
    H = w_hh.shape[1]
    xb = R(x).reshape(-1, F)
    saved = []
    lstm_by_hand(x, True, w_ih, w_hh, b_ih, b_hh, saved)
    dw_hh = db_hh = None
    dh_next = torch.zeros(N, H)
    dc_next = torch.zeros(N, H)
    dgates_all = [None] * T
    for t in reversed(range(T)):
        s = saved[t]
        hb, i, f, g, o, c_prev, tc = s['hb'], s['i'], s['f'], s['g'], s['o'], s['c_prev'], s['tc']
        dh = dy[t] + dh_next                      # float32
        dc = (dh * o) * (1 - tc * tc)             # tanh_backward in float32
        if t < T - 1:
            dc = dc + dc_next
        d_o = R(dh * tc)                          # a gradient takes its tensor's dtype
        d_ig = R(dc)                              # i*g is bfloat16
        d_i, d_g = d_ig * g, d_ig * i             # bfloat16 products
        dc_next = dc * f                          # float32
        d_f = R(dc * c_prev)
        dgates = torch.cat([torch.ops.aten.sigmoid_backward(d_i, i), torch.ops.aten.sigmoid_backward(d_f, f),
                            torch.ops.aten.tanh_backward(d_g, g), torch.ops.aten.sigmoid_backward(d_o, o)], 1)
        dgates_all[t] = dgates
        dh_next = torch.mm(dgates, w_hh).float()  # through the cast of h: a bfloat16 product, then float32
        dw, db = torch.mm(dgates.t(), hb), dgates.sum(0)
        # The weight was cast once (autocast's cache): its gradient accumulates in bfloat16.
        dw_hh = dw if dw_hh is None else dw_hh + dw
        db_hh = db if db_hh is None else db_hh + db
    dg = torch.stack(dgates_all, 0).reshape(T * N, 4 * H)
    return (torch.mm(dg, w_ih).float().reshape(T, N, F), torch.mm(dg.t(), xb).float(), dw_hh.float(),
            dg.sum(0).float(), db_hh.float())


def gru_backward_by_hand(x, dy, w_ih, w_hh, b_ih, b_hh):
    T, N, F = x.shape
    H = w_hh.shape[1]
    xb = R(x).reshape(-1, F)
    saved = []
    gru_by_hand(x, True, w_ih, w_hh, b_ih, b_hh, saved)
    dw_hh = db_hh = None
    dh_next = torch.zeros(N, H)
    dgx_all = [None] * T
    for t in reversed(range(T)):
        s = saved[t]
        hb, h_prev, r, z, n, hn = s['hb'], s['h_prev'], s['r'], s['z'], s['n'], s['hn']
        dh = dy[t] + dh_next
        d_hmn = dh * z                            # d(h - n), float32
        dz = R(dh * (h_prev - n))
        dn = R(dh) + R(-d_hmn)                    # n's two uses, each gradient cast, summed in bfloat16
        da_n = torch.ops.aten.tanh_backward(dn, n)
        da_r = torch.ops.aten.sigmoid_backward(da_n * hn, r)
        da_z = torch.ops.aten.sigmoid_backward(dz, z)
        dgh = torch.cat([da_r, da_z, da_n * r], 1)
        dgx_all[t] = torch.cat([da_r, da_z, da_n], 1)
        dh_next = d_hmn + torch.mm(dgh, w_hh).float()
        dw, db = torch.mm(dgh.t(), hb), dgh.sum(0)
        dw_hh = dw if dw_hh is None else dw_hh + dw
        db_hh = db if db_hh is None else db_hh + db
    dg = torch.stack(dgx_all, 0).reshape(T * N, 3 * H)
    return (torch.mm(dg, w_ih).float().reshape(T, N, F), torch.mm(dg.t(), xb).float(), dw_hh.float(),
            dg.sum(0).float(), db_hh.float())


def check_backward():
    for cell, mod, by_hand in (("lstm", torch.nn.LSTM, lstm_backward_by_hand), ("gru", torch.nn.GRU, gru_backward_by_hand)):
        for seed in (0, 1, 2):
            torch.manual_seed(seed)
            layer = mod(28, 32)
            x = torch.randn(7, 5, 28, requires_grad=True)
            dy = torch.randn(7, 5, 32)
            with torch.autocast("cpu", dtype=BF):
                y, _ = layer(x)
            (y * dy).sum().backward()
            with torch.no_grad():
                ws = [R(t.detach()) for t in (layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0, layer.bias_hh_l0)]
                mine = by_hand(x.detach(), dy, *ws)
            refs = (x.grad, layer.weight_ih_l0.grad, layer.weight_hh_l0.grad, layer.bias_ih_l0.grad,
                    layer.bias_hh_l0.grad)
            names = ("dx", "dW_ih", "dW_hh", "db_ih", "db_hh")
            print("%s backward seed %d: %s" % (cell, seed, ", ".join(
                "%s %d of %d" % (nm, int((m == r).sum()), r.numel()) for nm, m, r in zip(names, mine, refs))))


def gemm_accumulation():
    """Where PyTorch's CPU bfloat16 GEMM sums in float32: k ones times k ones is k in float32 but stops
    at 256 in bfloat16 (256 + 1 rounds back to 256). Shapes of both sides of the 4096 m*k*n line, in
    the forward's form (x W^T) and the backward's (a plain product, a^T b), with oneDNN on and off."""
    ones = lambda *s: torch.ones(*s, dtype=BF)
    for mkldnn in (True, False):
        with torch.backends.mkldnn.flags(enabled=mkldnn):
            for m, k, n in ((1, 1024, 1), (4, 1024, 1), (4, 1025, 1), (16, 1024, 16)):
                xw = torch.mm(ones(m, k), ones(n, k).t())[0, 0].item()
                plain = torch.mm(ones(m, k), ones(k, n))[0, 0].item()
                atb = torch.mm(ones(k, m).t(), ones(k, n))[0, 0].item()
                f32 = torch.tensor(float(k)).to(BF).item()
                print("oneDNN %s, m*k*n %6d (k %d): x W^T %g, plain %g, a^T b %g  (a float32 sum, rounded: %g)" % (
                    "on " if mkldnn else "off", m * k * n, k, xw, plain, atb, f32))


if __name__ == "__main__":
    main()
    check_backward()
    gemm_accumulation()
