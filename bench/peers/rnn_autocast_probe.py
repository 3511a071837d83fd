#!/usr/bin/env python3
"""What PyTorch's CPU autocast does inside nn.LSTM and nn.GRU (bfloat16): their outputs are float32,
but the layers' own ops run under autocast's lists. Written out here op by op, as a trace of the
dispatched ATen ops showed them (torch.utils._python_dispatch.TorchDispatchMode), and checked bit
for bit against the real layers on random inputs. It is the specification an emulation of autocast
for recurrent layers must meet (docs/REDUCED_PRECISION.md, "Recurrent layers under autocast").

Usage: /usr/bin/python3 bench/peers/rnn_autocast_probe.py   (PyTorch 1.13 from Debian; no GPU)
Prints, per cell and seed, how many outputs the written-out ops give bit for bit.
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


def lstm_by_hand(x, contiguous, w_ih, w_hh, b_ih, b_hh):
    T, N, _ = x.shape
    H = w_hh.shape[1]
    xs = input_projection(x, w_ih, b_ih, contiguous)
    h = torch.zeros(N, H)
    c = torch.zeros(N, H)
    outs = []
    for t in range(T):
        gates = torch.addmm(b_hh, h.to(BF), w_hh.t()).add_(xs[t])  # addmm: the bias inside; then bf16 add
        i, f, g, o = gates.chunk(4, 1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()  # bfloat16 results
        c = (f * c).add_(i * g)  # f*c: float32 (bf16 x f32); i*g: bfloat16; the sum float32
        h = o * c.tanh()  # float32
        outs.append(h)
    return torch.stack(outs, 0)


def gru_by_hand(x, contiguous, w_ih, w_hh, b_ih, b_hh):
    T, N, _ = x.shape
    H = w_hh.shape[1]
    xs = input_projection(x, w_ih, b_ih, contiguous)
    h = torch.zeros(N, H)
    outs = []
    for t in range(T):
        xr, xz, xn = xs[t].chunk(3, 1)
        hr, hz, hn = torch.addmm(b_hh, h.to(BF), w_hh.t()).chunk(3, 1)
        r = hr.add(xr).sigmoid()  # bfloat16
        z = hz.add(xz).sigmoid()
        n = xn.add(hn.mul(r)).tanh()  # r * (h W_hn + b_hn): bfloat16, then + the input part
        h = (h - n).mul_(z).add_(n)  # float32
        outs.append(h)
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


if __name__ == "__main__":
    main()
