#!/usr/bin/env python3
"""The model and attack tables of one GPU run (scripts/gpu-run.sh remote's bm_cuda.json and
torch_cuda.jsonl), driftlab beside PyTorch from the same call, as Markdown.

  python3 scripts/gpu-table.py RUN_DIR [EARLIER_RUN_DIR]

With an earlier run's folder, a column gives that run's best driftlab time too (what changed).
Ratios are PyTorch / driftlab: above 1 driftlab is faster. The driftlab column is the faster of
its own kernels and cuBLAS/cuDNN, which are named."""
import json, os, sys


def load(d):
    bm, torch = {}, {}
    with open(os.path.join(d, "bm_cuda.json")) as f:
        for r in json.load(f)["benchmarks"]:
            if r.get("run_type") == "aggregate" or r.get("error_occurred"):
                continue
            scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[r["time_unit"]]
            bm[r["name"].rsplit("/", 1)[0]] = r["real_time"] * scale  # ms
    with open(os.path.join(d, "torch_cuda.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            w = r.get("what")
            if w == "train_step":
                torch[("train", r["model"], r["batch"])] = r["seconds"] * 1e3
            elif w == "predict":
                torch[("predict", r["model"], r["n"])] = r["seconds"] * 1e3
            elif w == "attack" and r["work"] == "same":
                torch[("attack", r["model"], r["attack"], r["n"], r["batch"])] = r["seconds"] * 1e3
            elif w == "attack_queries":
                torch[("queries", r["model"])] = r["seconds"] * 1e3
    return bm, torch


def best(bm, stem):
    c = [(bm[stem + "/" + impl], name) for impl, name in (("own", "own"), ("vendor", "cuDNN")) if stem + "/" + impl in bm]
    return min(c) if c else (None, None)


def fmt(v):
    return "-" if v is None else ("%.3f" % v if v < 10 else "%.1f" % v)


def main():
    run, bm_t = sys.argv[1], None
    bm, torch = load(run)
    earlier = load(sys.argv[2])[0] if len(sys.argv) > 2 else None
    models = [("lenet1", (32, 64, 128), (1000, 10000)), ("lenet5", (32, 64, 128), (1000, 10000)),
              ("resnet20", (128,), (1000,)), ("vgg16", (128,), (1000,)), ("lstm", (128,), (128, 1000)),
              ("gru", (128,), (128, 1000))]
    head = "| model | work | driftlab own (ms) | driftlab cuDNN (ms) | PyTorch 2.11 (ms) | PyTorch / best driftlab |"
    sep = "|---|---|---|---|---|---|"
    if earlier:
        head += " earlier best (ms) |"
        sep += "---|"
    print(head)
    print(sep)
    rows = []
    for m, batches, sizes in models:
        rows += [("BM_CudaTrainStep/%s/b%d" % (m, b), m, "train step B-%d" % b, ("train", m, b)) for b in batches]
        rows += [("BM_CudaPredict/%s/%d" % (m, n), m, "predict %s" % format(n, ","), ("predict", m, n)) for n in sizes]
    for stem, m, what, key in rows:
        own, ven = bm.get(stem + "/own"), bm.get(stem + "/vendor")
        b, _ = best(bm, stem)
        t = torch.get(key)
        line = "| %s | %s | %s | %s | %s | %s |" % (m, what, fmt(own), fmt(ven), fmt(t),
                                                   "**%.2fx**" % (t / b) if t and b else "-")
        if earlier:
            line += " %s |" % fmt(best(earlier, stem)[0])
        print(line)
    print()
    print("| model | attack | inputs / batch | driftlab (ms) | PyTorch 2.11, same work (ms) | PyTorch / driftlab |")
    print("|---|---|---|---|---|---|")
    for m, n, b in (("lenet5", 1024, 128), ("lenet5", 10000, 1000), ("resnet20", 128, 32), ("resnet20", 1024, 256)):
        for a in ("fgsm", "bim10"):
            d = bm.get("BM_CudaAttack/%s/%s/n%d/b%d/vendor" % (m, a, n, b))
            t = torch.get(("attack", m, a, n, b))
            print("| %s | %s | %s / %s | %s | %s | %s |" % (m, "FGSM" if a == "fgsm" else "BIM-10", format(n, ","),
                                                           format(b, ","), fmt(d), fmt(t),
                                                           "**%.2fx**" % (t / d) if t and d else "-"))
    for m in ("lenet5", "resnet20"):
        d, t = bm.get("BM_CudaAttackQueries/%s/vendor" % m), torch.get(("queries", m))
        print("| %s | Boundary queries | 25 per call | %s | %s | %s |" % (m, fmt(d), fmt(t),
                                                                          "**%.2fx**" % (t / d) if t and d else "-"))
    print()
    print("| other | driftlab (ms) |")
    print("|---|---|")
    for k in sorted(bm):
        if "int8" in k or "Gemm" in k or "Sgemm" in k:
            print("| %s | %s |" % (k, fmt(bm[k])))


if __name__ == "__main__":
    main()
