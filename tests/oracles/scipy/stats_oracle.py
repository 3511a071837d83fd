#!/usr/bin/env python3
"""scipy.stats (Debian 12's python3-scipy, 1.10) on the test's data: wilcoxon(x, y) with its defaults
(statistic, pvalue) and mannwhitneyu(a, b).statistic / (len(a) * len(b)) (Vargha-Delaney A12).

Usage: stats_oracle.py CASE_DIR. CASE_DIR/cases.json lists the cases; each case's inputs are
CASE_DIR/<name>.<key>.npy (float64); results go to CASE_DIR/out/<name>.<key>.npy."""
import json, os, sys, warnings

import numpy as np
import scipy
from scipy import stats


def main(argv):
    folder = argv[1]
    with open(os.path.join(folder, 'cases.json')) as f:
        spec = json.load(f)
    os.makedirs(os.path.join(folder, 'out'), exist_ok=True)

    def get(c, key):
        return np.load(os.path.join(folder, '%s.%s.npy' % (c['name'], key))).astype(np.float64)

    def put(c, key, v):
        np.save(os.path.join(folder, 'out', '%s.%s.npy' % (c['name'], key)), np.asarray([v], dtype=np.float64))

    for c in spec['cases']:
        a, b = get(c, 'a'), get(c, 'b')
        if c['kind'] == 'wilcoxon':
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')  # "exact p-value ... zeros" and "sample size too small"
                r = stats.wilcoxon(a, b)
            put(c, 'statistic', float(r.statistic))
            put(c, 'pvalue', float(r.pvalue))
        elif c['kind'] == 'a12':
            u = stats.mannwhitneyu(a, b).statistic
            put(c, 'u', float(u))
            put(c, 'a12', float(u) / (len(a) * len(b)))
        else:
            raise KeyError("case '%s': unknown kind '%s'" % (c['name'], c['kind']))
    with open(os.path.join(folder, 'out', 'scipy_version.txt'), 'w') as f:
        f.write(scipy.__version__)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
