#!/usr/bin/env python3
"""The PyTorch peer's configuration, as bench/compare's peers run it: prints one JSON object.

  torch_config.py [--threads 2]

A speed ratio means little without what the peer ran on: its version, how it was built
(torch.__config__.show(): compiler, BLAS, oneDNN, CPU capability the ATen kernels dispatch to),
its thread pools after torch.set_num_threads(threads) as lenet_torch.py, cifar_torch.py and
rnn_torch.py set them, and which BLAS shared library the process actually loaded (Debian's
libblas is an alternative: OpenBLAS or the reference BLAS).
"""
import argparse, json, re, sys

import torch


def loaded_blas():
    """The BLAS/LAPACK shared objects mapped into this process (after a matmul has run)."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    libs = set()
    try:
        for line in open('/proc/self/maps'):
            path = line.split()[-1] if len(line.split()) >= 6 else ''
            if re.search(r'(blas|lapack|mkl|dnnl|gomp|iomp)', path.rsplit('/', 1)[-1]):
                libs.add(path)
    except OSError:
        pass
    return sorted(libs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--threads', type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    show = torch.__config__.show()
    cap = re.search(r'CPU capability usage: (\S+)', show)
    print(json.dumps({
        'version': torch.__version__,
        'python': sys.version.split()[0],
        'cpu_capability': cap.group(1) if cap else 'unknown',
        'num_threads': torch.get_num_threads(),
        'num_interop_threads': torch.get_num_interop_threads(),
        'mkldnn_available': torch.backends.mkldnn.is_available(),
        'openmp_available': torch.backends.openmp.is_available(),
        'loaded_libraries': loaded_blas(),
        'config_show': show,
        'parallel_info': torch.__config__.parallel_info(),
    }))


if __name__ == '__main__':
    main()
