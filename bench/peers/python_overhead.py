#!/usr/bin/env python3
"""What the Python module adds to a call: Model.predict through `import driftlab` against the same
call through the C++ library face (bench/bm_face.cpp, BM_FacePredict), in one run on one machine.

    PYTHONPATH=build/python python3 bench/peers/python_overhead.py [build/bm_face]

LeNet-5 (torch preset, seed 1), float32 inputs U(0, 1) of 1 and 1,000 images: the median wall time
of a call over repeated calls (after warm-up), for an input read in place (64-byte aligned, a
multiple of 64 bytes: docs/PYTHON.md) and for one the module copies (NumPy's own allocation).
Prints microseconds per call and the difference to the C++ face's median (Google Benchmark's
repetitions). Both use the default OpenMP threads.
"""
import json
import statistics
import subprocess
import sys
import time

import numpy as np

import driftlab


def aligned(shape):
    n = int(np.prod(shape)) * 4
    raw = np.empty(n + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    a = raw[off:off + n].view(np.float32).reshape(shape)
    a[...] = np.random.default_rng(2).uniform(0, 1, size=shape)
    return a


def median_us(f, calls):
    for _ in range(max(3, calls // 10)):
        f()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    bm = sys.argv[1] if len(sys.argv) > 1 else "build/bm_face"
    out = subprocess.run([bm, "--benchmark_format=json", "--benchmark_repetitions=5",
                          "--benchmark_report_aggregates_only=true"], capture_output=True, text=True, check=True)
    cpp = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            cpp[int(b["run_name"].split("inputs:")[1].split("/")[0])] = b["real_time"]  # microseconds
    m = driftlab.Model.zoo("lenet5", "torch", 1)
    print("inputs  C++ face (us)  Python in place (us)  +us     Python copied (us)  +us")
    for n, calls in ((1, 2000), (1000, 50)):
        x = aligned((n, 1, 28, 28))
        assert driftlab._input_address(x) == x.ctypes.data
        xc = np.array(x)  # NumPy's allocation: copied unless it happens to be 64-byte aligned
        a = median_us(lambda: m.predict(x), calls)
        c = median_us(lambda: m.predict(xc), calls)
        print("%6d  %13.1f  %20.1f  %+6.1f  %18.1f  %+6.1f" % (n, cpp[n], a, a - cpp[n], c, c - cpp[n]))


if __name__ == "__main__":
    main()
