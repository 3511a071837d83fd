#!/usr/bin/env python3
"""What PyTorch's reduced-precision math modes compute on a GPU, captured once for the CPU side.

The CPU emulation of the GPU math modes (TF32, float16, bfloat16) needs the device's answers
where no device is lent: this script runs on a lent GPU machine (scripts/gpu-run.sh remote,
step `rp_capture`) and writes one .npz with the inputs and PyTorch's outputs, which tests/oracles read as fixtures
(the expected values come from the device, never from driftlab):

- tf32 operand rounding: C = A @ I and C = I @ B under torch.backends.cuda.matmul.allow_tf32
  (cuBLAS), and a convolution with a delta kernel under torch.backends.cudnn.allow_tf32 (cuDNN).
  Every product is x * 1 and every sum adds zeros, so C holds the operand exactly as the tensor
  cores received it: truncated to TF32, rounded to nearest even or away from zero. A's values
  include crafted mantissas (low 13 bits 0x1000 with bit 13 even and odd, 0x0fff, 0x1001).
- general matmul and conv2d outputs in float32, tf32, and under torch.autocast float16 and
  bfloat16 (the operands, the outputs, the dtype autocast gave).
- the autocast op lists: the output dtype of each op of a small CNN (conv, BatchNorm, ReLU,
  max pool, linear, log_softmax, cross-entropy, add, matmul) under autocast(cuda, float16),
  autocast(cuda, bfloat16) and autocast(cpu, bfloat16).
- GradScaler's dynamic loss scale: an MLP trained 40 SGD steps with autocast float16 and
  GradScaler(init_scale=2**20, growth_interval=4): scale, found_inf and the loss of each step,
  the initial weights and the data, the largest unscaled gradient of each step.

Usage: python3 reduced_precision_capture.py OUT.npz
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F


def crafted(rng, m, k):
    """float32 values in [0.5, 4) whose low 13 mantissa bits are chosen to tell roundings apart."""
    a = rng.uniform(0.5, 4.0, size=(m, k)).astype(np.float32)
    bits = a.view(np.uint32).copy()
    low = np.array([0x1000, 0x0FFF, 0x1001, 0x1FFF, 0x0001, 0x0000], dtype=np.uint32)
    sel = rng.integers(0, len(low) + 2, size=bits.shape)  # two of eight keep their random bits
    for i, v in enumerate(low):
        bits = np.where(sel == i, (bits & ~np.uint32(0x1FFF)) | v, bits)
    # both parities of bit 13 (the TF32 mantissa's last bit) occur through the random upper bits
    sign = np.where(rng.integers(0, 2, size=bits.shape) == 1, np.uint32(0x80000000), np.uint32(0))
    return (bits | sign).view(np.float32)


def main(out):
    # Without a GPU (a dry run of this script here): the CPU stands in where it can; the file is then
    # no fixture (its "device" says so).
    gpu = torch.cuda.is_available()
    dev = torch.device("cuda" if gpu else "cpu")
    rng = np.random.default_rng(20261129)
    res = {"torch_version": np.array(torch.__version__), "device": np.array(torch.cuda.get_device_name(0) if gpu else "cpu (dry run)"),
           "cudnn_version": np.array(torch.backends.cudnn.version())}

    def mm(a, b, tf32):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        r = (torch.from_numpy(a).to(dev) @ torch.from_numpy(b).to(dev)).cpu().numpy()
        torch.backends.cuda.matmul.allow_tf32 = False
        return r

    def conv(x, w, tf32, pad=1):
        torch.backends.cudnn.allow_tf32 = tf32
        r = F.conv2d(torch.from_numpy(x).to(dev), torch.from_numpy(w).to(dev), padding=pad).cpu().numpy()
        torch.backends.cudnn.allow_tf32 = True  # PyTorch's default
        return r

    # tf32 operand rounding, cuBLAS
    a = crafted(rng, 64, 256)
    eye = np.eye(256, dtype=np.float32)
    res["ident_a"] = a
    res["ident_a_times_i_tf32"] = mm(a, eye, True)
    res["ident_a_times_i_fp32"] = mm(a, eye, False)
    res["ident_i_times_at_tf32"] = mm(eye, np.ascontiguousarray(a.T), True)
    # tf32 operand rounding, cuDNN: a 3x3 delta kernel mapping channel c to channel c
    xc = crafted(rng, 8 * 16 * 16, 16).reshape(8, 16, 16, 16)
    wd = np.zeros((16, 16, 3, 3), dtype=np.float32)
    for c in range(16):
        wd[c, c, 1, 1] = 1.0
    res["ident_conv_x"] = xc
    res["ident_conv_tf32"] = conv(xc, wd, True)
    res["ident_conv_fp32"] = conv(xc, wd, False)

    # general matmul and conv in each mode
    A = rng.standard_normal((64, 512)).astype(np.float32)
    B = rng.standard_normal((512, 64)).astype(np.float32)
    res["mm_a"], res["mm_b"] = A, B
    res["mm_fp32"] = mm(A, B, False)
    res["mm_tf32"] = mm(A, B, True)
    X = rng.standard_normal((4, 16, 16, 16)).astype(np.float32)
    W = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    res["conv_x"], res["conv_w"] = X, W
    res["conv_fp32"] = conv(X, W, False)
    res["conv_tf32"] = conv(X, W, True)
    for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        if not gpu and dt == torch.float16:
            continue
        with torch.autocast(dev.type, dtype=dt):
            y = torch.from_numpy(A).to(dev) @ torch.from_numpy(B).to(dev)
            z = F.conv2d(torch.from_numpy(X).to(dev), torch.from_numpy(W).to(dev), padding=1)
        res["mm_" + name] = y.float().cpu().numpy()
        res["conv_" + name] = z.float().cpu().numpy()
        res["mm_%s_dtype" % name] = np.array(str(y.dtype))

    # autocast op lists
    def op_dtypes(device, dt):
        torch.manual_seed(0)
        d = torch.device(device)
        x = torch.randn(4, 3, 16, 16, device=d)
        labels = torch.tensor([0, 1, 2, 3], device=d)
        conv1 = torch.nn.Conv2d(3, 8, 3, padding=1).to(d)
        bn = torch.nn.BatchNorm2d(8).to(d)
        fc = torch.nn.Linear(8 * 8 * 8, 10).to(d)
        out = []
        with torch.autocast(device, dtype=dt):
            h = conv1(x); out.append(("conv2d", h.dtype))
            h = bn(h); out.append(("batch_norm", h.dtype))
            h = F.relu(h); out.append(("relu", h.dtype))
            h = F.max_pool2d(h, 2); out.append(("max_pool2d", h.dtype))
            s = h + h; out.append(("add", s.dtype))
            h = fc(h.flatten(1)); out.append(("linear", h.dtype))
            m = h @ h.t(); out.append(("matmul", m.dtype))
            ls = F.log_softmax(h, 1); out.append(("log_softmax", ls.dtype))
            sm = F.softmax(h, 1); out.append(("softmax", sm.dtype))
            loss = F.cross_entropy(h, labels); out.append(("cross_entropy", loss.dtype))
            mse = F.mse_loss(h, torch.zeros_like(h)); out.append(("mse_loss", mse.dtype))
            e = torch.exp(h); out.append(("exp", e.dtype))
            sg = torch.sigmoid(h); out.append(("sigmoid", sg.dtype))
            th = torch.tanh(h); out.append(("tanh", th.dtype))
            sq = h.sum(); out.append(("sum", sq.dtype))
        return np.array(["%s %s" % (k, str(v)) for k, v in out])

    if gpu:
        res["autocast_cuda_fp16"] = op_dtypes("cuda", torch.float16)
        res["autocast_cuda_bf16"] = op_dtypes("cuda", torch.bfloat16)
    res["autocast_cpu_bf16"] = op_dtypes("cpu", torch.bfloat16)
    if not gpu:
        np.savez_compressed(out, **res)
        print("dry run (no GPU): wrote", out)
        return

    np.savez_compressed(out, **res)  # kept if the part below fails
    try:
        gradscaler_run(dev, rng, res)
    except Exception as e:  # noqa: BLE001 (the file says what failed)
        res["gs_error"] = np.array(repr(e))
    np.savez_compressed(out, **res)
    print("wrote", out, "; tf32 identity matmul changed", int((res["ident_a_times_i_tf32"] != a).sum()), "of", a.size,
          "values; GradScaler scales", list(res.get("gs_scale", [])[:12]), res.get("gs_error", ""))


def gradscaler_run(dev, rng, res):
    """GradScaler's dynamic rule on a run that overflows."""
    torch.manual_seed(1)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
    res["gs_w0"] = mlp[0].weight.detach().cpu().numpy(); res["gs_b0"] = mlp[0].bias.detach().cpu().numpy()
    res["gs_w2"] = mlp[2].weight.detach().cpu().numpy(); res["gs_b2"] = mlp[2].bias.detach().cpu().numpy()
    gx = (rng.standard_normal((40, 16, 32)) * 4).astype(np.float32)
    gy = rng.integers(0, 10, size=(40, 16)).astype(np.int64)
    res["gs_x"], res["gs_y"] = gx, gy
    opt = torch.optim.SGD(mlp.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 20, growth_interval=4)
    scales, infs, losses, gmax = [], [], [], []
    for i in range(40):
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(mlp(torch.from_numpy(gx[i]).to(dev)), torch.from_numpy(gy[i]).to(dev))
        scales.append(scaler.get_scale())
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        infs.append(int(any(not bool(torch.isfinite(p.grad).all()) for p in mlp.parameters())))
        gmax.append(max(float(p.grad.detach().abs().max()) for p in mlp.parameters()))
        scaler.step(opt)
        scaler.update()
        losses.append(float(loss))
    res["gs_scale"] = np.array(scales)
    res["gs_found_inf"] = np.array(infs)
    res["gs_loss"] = np.array(losses)
    res["gs_grad_max"] = np.array(gmax)
    res["gs_final_w2"] = mlp[2].weight.detach().cpu().numpy()


if __name__ == "__main__":
    main(sys.argv[1])
