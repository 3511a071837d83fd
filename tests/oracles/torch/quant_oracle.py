#!/usr/bin/env python3
"""PyTorch 1.13 side of driftlab's calibration-observer oracle (tests/oracles/test_quant_oracle_torch.cpp).

Usage: /usr/bin/python3 quant_oracle.py CASE_DIR [K/N]

The case-file protocol of oracle.py (its case loop is imported, not repeated): CASE_DIR/cases.json
lists the cases, inputs are CASE_DIR/<name>.<key>.npy, results CASE_DIR/out/<name>.<key>.npy.

Kind:
  observer  c['batches'] float32 inputs b0, b1, ... fed in order to one torch.ao.quantization
            observer: c['observer'] = 'minmax' (MinMaxObserver), 'moving_average'
            (MovingAverageMinMaxObserver(averaging_constant=c['averaging_constant'])) or 'histogram'
            (HistogramObserver(bins=c['bins'], upsample_rate=c['upsample_rate'])). Writes 'range'
            (float32 [min, max]): min_val/max_val for the min/max observers, the result of
            _non_linear_param_search() for the histogram observer; and for the histogram observer
            its state: 'hist' (the float32 histogram), 'state' ([min_val, max_val]).
  per_channel  PerChannelMinMaxObserver(ch_axis=0) on w: 'min' and 'max' per channel.

To add a kind: 1) write run_<kind>(c, case) below; 2) add it to KINDS; 3) write its inputs from the C++
test and read its outputs there.
"""
import os
import sys

import torch
from torch.ao.quantization.observer import (HistogramObserver, MinMaxObserver, MovingAverageMinMaxObserver,
                                            PerChannelMinMaxObserver)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle import run_cases  # noqa: E402


def make_observer(c):
    kind = c['observer']
    if kind == 'minmax':
        return MinMaxObserver()
    if kind == 'moving_average':
        return MovingAverageMinMaxObserver(averaging_constant=c['averaging_constant'])
    if kind == 'histogram':
        return HistogramObserver(bins=c['bins'], upsample_rate=c['upsample_rate'])
    raise KeyError('unknown observer %r' % kind)


def run_observer(c, case):
    obs = make_observer(c)
    for k in range(c['batches']):
        obs(case.get('b%d' % k))
    if c['observer'] == 'histogram':
        lo, hi = obs._non_linear_param_search()
        case.put('hist', obs.histogram)
        case.put('state', torch.stack([obs.min_val, obs.max_val]))
    else:
        lo, hi = obs.min_val, obs.max_val
    case.put('range', torch.stack([lo.reshape(()), hi.reshape(())]).to(torch.float32))


def run_per_channel(c, case):
    obs = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    obs(case.get('w'))
    case.put('min', obs.min_val)
    case.put('max', obs.max_val)


KINDS = {'observer': run_observer, 'per_channel': run_per_channel}


if __name__ == '__main__':
    sys.exit(run_cases(sys.argv, KINDS))
