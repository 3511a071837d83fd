#!/usr/bin/env python3
"""What a first write to fresh memory costs on this machine, against a second write to the same
pages (docs/BENCHMARKS.md, "what a first touch of memory costs here"): an anonymous mapping of
--mb MiB, advised as transparent huge pages (host_memory's blocks of >= 2 MiB are) or not, written
1 MiB at a time twice. A VM whose host backs guest memory on first use shows it in the first pass.

  /usr/bin/python3 bench/first_touch.py [--mb 800] [--rounds 2]
"""
import argparse
import mmap
import time


def one(mb, huge):
    n = mb << 20
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    chunk = b'\x01' * (1 << 20)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        for off in range(0, n, 1 << 20):
            m[off:off + (1 << 20)] = chunk
        times.append(time.perf_counter() - t0)
    m.close()
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--mb', type=int, default=800)
    ap.add_argument('--rounds', type=int, default=2)
    a = ap.parse_args()
    for _ in range(a.rounds):
        for huge in (True, False):
            first, second = one(a.mb, huge)
            print('%d MiB, %s: first write %.3f s (%.2f GB/s), second %.3f s (%.1f GB/s)' % (
                a.mb, 'huge pages advised' if huge else '4 KiB pages', first, (a.mb << 20) / first / 1e9, second,
                (a.mb << 20) / second / 1e9), flush=True)


if __name__ == '__main__':
    main()
