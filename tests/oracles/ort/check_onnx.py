#!/usr/bin/env python3
"""ONNX's own checker (Debian python3-onnx, full_check: shapes inferred too) over every model of
the 'run' cases in CASE_DIR/cases.json: the exported models of tests/oracles/test_onnx_oracle.cpp.

Usage: /usr/bin/python3 check_onnx.py CASE_DIR [K/N]

Exits non-zero naming the first model the checker refuses; prints how many passed.
"""
import json
import os
import sys

import onnx


def main():
    d = sys.argv[1]
    k, n = (int(v) for v in sys.argv[2].split('/')) if len(sys.argv) > 2 else (0, 1)
    cases = json.load(open(os.path.join(d, 'cases.json')))['cases']
    passed = 0
    for c in cases:
        if c.get('kind') != 'run' or c.get('shard', 0) % n != k or not c.get('check', True):
            continue
        path = os.path.join(d, c['model'])
        try:
            onnx.checker.check_model(onnx.load(path), full_check=True)
        except Exception as e:  # the checker's own exception types vary across versions
            sys.exit('%s: onnx.checker.check_model(full_check=True) refused it: %s' % (c['model'], e))
        passed += 1
    print('onnx %s checker (full_check): %d models passed' % (onnx.__version__, passed))


if __name__ == '__main__':
    main()
