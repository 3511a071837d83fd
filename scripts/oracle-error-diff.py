#!/usr/bin/env python3
"""Compares the error tables two runs of an oracle suite printed (ctest -V output).

Every oracle test prints oracle::ErrorTable rows: case, quantity, shape, max abs err, max rel err,
tolerance, ok. Given two logs of the same suite (e.g. before and after a kernel change), this
prints per test the largest relative error of each run and the largest error/tolerance of each,
then how many of the tensors compared in both got a smaller, equal or larger error.

  DRIFTLAB_REQUIRE_ORACLES=1 ctest --test-dir build -R oracles.Tfjs -V > before.log   # one build
  DRIFTLAB_REQUIRE_ORACLES=1 ctest --test-dir build -R oracles.Tfjs -V > after.log    # the other
  scripts/oracle-error-diff.py before.log after.log
"""
import collections
import re
import sys

ROW = re.compile(r"\s+(.*?)\s+(\[[\d,]*\])\s+([\d.e+-]+)\s+([\d.e+-]+)\s+([\d.e+-]+)\s+(yes|no)$")


def parse(path):
    rows, test = {}, None
    with open(path) as f:
        for line in f:
            line = re.sub(r"^\d+: ", "", line.rstrip("\n"))
            m = re.match(r"\[ RUN      \] (\S+)", line)
            if m:
                test = m.group(1)
                continue
            m = ROW.match(line)
            if not m or test is None:
                continue
            key = (test, m.group(1), m.group(2))
            k, i = key, 0
            while k in rows:  # the same case and quantity twice in one test: number them
                i += 1
                k = key + (i,)
            rows[k] = (float(m.group(4)), float(m.group(5)))  # (max rel err, tolerance)
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = parse(sys.argv[1]), parse(sys.argv[2])
    common = [k for k in a if k in b]
    if not common:
        sys.exit("no error-table rows in common: are both files ctest -V logs of the same suite?")
    ratio = lambda r: r[0] / r[1] if r[1] > 0 else 0.0
    per = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for k in common:
        p = per[k[0]]
        p[0], p[1] = max(p[0], a[k][0]), max(p[1], b[k][0])
        p[2], p[3] = max(p[2], ratio(a[k])), max(p[3], ratio(b[k]))
    print("| test | max rel err A | max rel err B | max err/tol A | max err/tol B |")
    print("| --- | --- | --- | --- | --- |")
    for t, (ea, eb, ra, rb) in sorted(per.items()):
        print(f"| {t} | {ea:.3g} | {eb:.3g} | {ra:.3g} | {rb:.3g} |")
    lt = sum(1 for k in common if b[k][0] < a[k][0])
    eq = sum(1 for k in common if b[k][0] == a[k][0])
    print(f"\n{len(common)} tensors in both ({len(a)} in A, {len(b)} in B): B smaller {lt}, equal {eq}, "
          f"larger {len(common) - lt - eq}")
    print(f"largest err/tol: A {max(ratio(a[k]) for k in common):.3g}, B {max(ratio(b[k]) for k in common):.3g}")
    failed = [k for k in common if b[k][0] > b[k][1] > 0 or a[k][0] > a[k][1] > 0]
    if failed:
        print(f"{len(failed)} rows over their tolerance")


if __name__ == "__main__":
    main()
