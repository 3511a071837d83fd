#!/usr/bin/env python3
"""The same GPU work as bench/bm_cuda.cpp, in PyTorch, timed with CUDA events.

Prints one JSON object per measurement: a large sgemm (FP32 and TF32 math), a 1 GiB
device-to-device copy, and conv2d forward / backward_data / backward_weight on the LeNet-5,
ResNet-20 and VGG-16 shapes of bm_cuda.cpp at batch 128 (cuDNN, float32, TF32 off unless the
row says tf32); then the whole models of bm_cuda.cpp's model_cases(): one training step
(the batch copied from the host, forward, cross-entropy, backward, SGD momentum 0.9, the
loss back on the host: BM_CudaTrainStep) and inference on input already on the device
(BM_CudaPredict), with the model definitions of bench/peers/lenet_torch.py, cifar_torch.py and rnn_torch.py
(nn.LSTM / nn.GRU: cuDNN's RNN).
And FGSM / BIM-10 written with autograd in eval() mode (bench/peers/attacks_torch.py's attack():
work=examples, the input and examples on the device; work=same, BM_CudaAttack's work: each batch
copied from the host, attacked, judged by a forward pass, the norms taken, and the examples,
predictions and norms copied back, attack_result(); --parts attacks) at bm_cuda's BM_CudaAttack sizes, and forward passes of
25 candidates (BM_CudaAttackQueries), TF32 off.
The median of --reps timed runs after --warmup runs is reported.
--profile MODEL:BATCH:train|predict --steps N: the work of one model case run N times between
torch.cuda.profiler.start() and stop() after two warm-up runs, for bench/kprof's window (driftlab's
side: bench/kprof/cuda_step.cpp); prints the wall time per step.
"""
import argparse, json, os, sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODEL_CASES = [  # model, training batches, prediction sizes (model_cases() in bm_cuda.cpp)
    ("lenet1", (32, 64, 128), (1000, 10000)),
    ("lenet5", (32, 64, 128), (1000, 10000)),
    ("resnet20", (128,), (1000,)),
    ("vgg16", (128,), (1000,)),
    ("lstm", (128,), (128, 1000)),
    ("gru", (128,), (128, 1000)),
]

CONV_SHAPES = [  # name, N, C, HW, K, R, pad, stride (the rows of conv_shapes() in bm_cuda.cpp)
    ("lenet5_conv1_b128", 128, 1, 28, 6, 5, 0, 1),
    ("lenet5_conv2_b128", 128, 6, 12, 16, 5, 0, 1),
    ("resnet20_s1_b128", 128, 16, 32, 16, 3, 1, 1),
    ("resnet20_s2_b128", 128, 32, 16, 32, 3, 1, 1),
    ("resnet20_s3_b128", 128, 64, 8, 64, 3, 1, 1),
    ("vgg16_c1_2_b128", 128, 64, 32, 64, 3, 1, 1),
    ("vgg16_c4_b128", 128, 512, 4, 512, 3, 1, 1),
]


def timed(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        b.record()
        fn()
        e.record()
        e.synchronize()
        times.append(b.elapsed_time(e) / 1000.0)
    times.sort()
    return times[len(times) // 2]


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--parts", default="kernels,models,attacks", help="any of kernels, models, attacks (comma-separated)")
    ap.add_argument("--profile", help="MODEL:BATCH:train|predict, run --steps times inside a profiler window")
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    emit(what="context", torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
         gpu=torch.cuda.get_device_name(0))
    torch.backends.cudnn.benchmark = False  # PyTorch's default: heuristics, as driftlab's default
    if a.profile:
        return profile(a, dev)
    parts = a.parts.split(",")
    if "kernels" in parts:
        kernels(a, dev)
    if "models" in parts:
        models(a, dev)
    if "attacks" in parts:
        attacks(a, dev)
    return 0


ATTACK_CASES = [  # arch, inputs, batch (BM_CudaAttack in bm_cuda.cpp)
    ("lenet5", 1024, 128), ("lenet5", 10000, 1000),
    ("resnet20", 128, 32), ("resnet20", 1024, 256),
]


def attacks(a, dev):
    from attacks_torch import attack, attack_result
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    queried = set()
    for arch, n, batch in ATTACK_CASES:
        torch.manual_seed(0)
        model, shape = build(arch)
        model = model.to(dev).eval()
        for p in model.parameters():
            p.requires_grad_(False)  # input gradients only, as an attack needs
        lo = 0.0 if arch == "lenet5" else -1.0
        x = (torch.rand(n, *shape) * (1.0 - lo) + lo).to(dev)
        y = (torch.arange(n) % 10).to(dev)
        x_host, y_host = x.cpu(), y.cpu()
        for name, steps in (("fgsm", 0), ("bim10", 10)):
            def run():
                for i in range(0, n, batch):
                    attack(model, x[i:i + batch], y[i:i + batch], 0.03, 0.01, steps, lo, 1.0)

            def run_same():  # BM_CudaAttack's work: host in, judged, norms, host out
                for i in range(0, n, batch):
                    xb, yb = x_host[i:i + batch].to(dev), y_host[i:i + batch].to(dev)
                    attack_result(model, xb, yb, 0.03, 0.01, steps, lo, 1.0)
            t = timed(run, a.warmup, max(3, a.reps // 4))
            emit(what="attack", model=arch, attack=name, work="examples", n=n, batch=batch, seconds=t, ex_per_s=n / t)
            t = timed(run_same, a.warmup, max(3, a.reps // 4))
            emit(what="attack", model=arch, attack=name, work="same", n=n, batch=batch, seconds=t, ex_per_s=n / t)
        if arch not in queried:
            queried.add(arch)
            q = x[:25].clone()
            with torch.no_grad():
                t = timed(lambda: model(q), a.warmup, a.reps)
            emit(what="attack_queries", model=arch, seconds=t, queries_per_s=25 / t)


def build(name):
    if name in ("lstm", "gru"):
        import rnn_torch
        return rnn_torch.Classifier(name), (28, 28)
    if name in ("lenet1", "lenet5"):
        import lenet_torch
        return getattr(lenet_torch, name)(), (1, 28, 28)
    import cifar_torch
    return (cifar_torch.ResNet20() if name == "resnet20" else cifar_torch.vgg16()), (3, 32, 32)


def train_step(name, batch, dev):
    """BM_CudaTrainStep's work as a function: the batch copied from the host, forward,
    cross-entropy, backward, SGD momentum 0.9, the loss back on the host."""
    model, shape = build(name)
    model = model.to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x_host, y_host = torch.rand(batch, *shape), torch.arange(batch) % 10

    def step():
        x, y = x_host.to(dev), y_host.to(dev)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def models(a, dev):
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products, as bm_cuda's model cases
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    for name, batches, sizes in MODEL_CASES:
        for batch in batches:
            t = timed(train_step(name, batch, dev), a.warmup, a.reps)
            emit(what="train_step", model=name, batch=batch, seconds=t, images_per_s=batch / t)
        model, shape = build(name)
        model = model.to(dev).eval()
        for n in sizes:
            x = torch.rand(n, *shape, device=dev)
            with torch.no_grad():
                t = timed(lambda: model(x), a.warmup, a.reps)
            emit(what="predict", model=name, n=n, seconds=t, images_per_s=n / t)


def profile(a, dev):
    import time
    name, batch, mode = a.profile.split(":")
    batch = int(batch)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    if mode == "train":
        step = train_step(name, batch, dev)
    else:
        model, shape = build(name)
        model = model.to(dev).eval()
        x = torch.rand(batch, *shape, device=dev)

        def step():
            with torch.no_grad():
                return model(x)
    step(), step()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    torch.cuda.profiler.stop()
    print(f"torch {name} b{batch} {mode}: {a.steps} steps, {1e6 * t / a.steps:.1f} us per step (host clock)")
    return 0


def kernels(a, dev):

    n = 8192
    A = torch.randn(n, n, device=dev)
    B = torch.randn(n, n, device=dev)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        t = timed(lambda: torch.mm(A, B), a.warmup, a.reps)
        emit(what="sgemm", n=n, tf32=tf32, seconds=t, flops_per_s=2.0 * n ** 3 / t)
    torch.backends.cuda.matmul.allow_tf32 = False
    del A, B

    nbytes = 1 << 30
    src = torch.zeros(nbytes // 4, device=dev)
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src), a.warmup, a.reps)
    emit(what="copy_d2d", bytes=nbytes, seconds=t, bytes_per_s=2.0 * nbytes / t)
    del src, dst

    torch.backends.cudnn.allow_tf32 = False
    for name, N, C, HW, K, R, pad, stride in CONV_SHAPES:
        x = torch.randn(N, C, HW, HW, device=dev, requires_grad=True)
        w = torch.randn(K, C, R, R, device=dev, requires_grad=True)
        y = F.conv2d(x, w, padding=pad, stride=stride)
        dy = torch.randn_like(y)
        P = y.shape[2] * y.shape[3]
        flops = 2.0 * N * K * P * C * R * R
        fwd = lambda: F.conv2d(x, w, padding=pad, stride=stride)
        bwd_data = lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, stride=stride, padding=pad)
        bwd_weight = lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, stride=stride, padding=pad)
        for pass_name, fn in (("forward", fwd), ("backward_data", bwd_data), ("backward_weight", bwd_weight)):
            with torch.no_grad():
                t = timed(fn, a.warmup, a.reps)
            emit(what="conv2d", shape=name, pass_=pass_name, seconds=t, flops_per_s=flops / t)


if __name__ == "__main__":
    sys.exit(main())
