#!/usr/bin/env python3
"""ONNX writer and quantizer-formula transcription of driftlab's ONNX Runtime int8 oracle
(tests/oracles/test_quant_oracle_ort.cpp; run by oracle.sh before ort_oracle.js).

Usage: /usr/bin/python3 make_models.py CASE_DIR [K/N] [--summary]   (needs python3-onnx and python3-numpy)
       --summary: after ort_oracle.js ran, print the node types of the graphs ORT optimized.

The case-file protocol of tests/oracles/oracle_util.h: CASE_DIR/cases.json lists the cases, inputs are
CASE_DIR/<file>.npy, results CASE_DIR/out/<name>.<key>.npy. Models go to CASE_DIR/<name>.<variant>.onnx
and a list of them to CASE_DIR/<name>.models.json, which ort_oracle.js runs.

Kinds:
  qparams   A TRANSCRIPTION, in numpy, of onnxruntime/python/tools/quantization (quant_utils.py
            compute_scale_zp / quantize_nparray, base_quantizer.py quantize_bias_static_impl), NOT
            ORT running: ORT's Python package (quantize_static) is not installable here. Inputs:
            'ranges' (float32 (P, 2) calibrated [min, max] of each activation), per weighted layer
            k 'fw<k>' (float32 weight) and 'fb<k>' (float32 bias); c['act_dtype'] 'int8'/'uint8',
            c['per_channel'] (list of bools per layer). Outputs: 'act' (float64 (P, 2): scale as
            float32 then widened, zero point), 'w<k>' (int8), 'ws<k>' (float32), 'b<k>' (int32),
            the bias from the transcribed weight scale and the transcribed input scale.
  model     An int8 model whose numbers driftlab computed, written as ONNX Runtime's quantize_static
            would write it. c['input'] = {'scale': file, 'zp': int} (the input QuantizeLinear),
            c['layers'] in order, each {'op': 'conv'|'dense'|'maxpool'|'flatten', ...}: conv/dense
            carry 'w' (int8 file), 'ws' (float32 file, 1 or K scales), 'b' (int32 file or absent),
            'in_scale' (file), 'out_scale' (file), 'out_zp', 'relu', and conv 'pads' [t, l, b, r],
            'strides', 'dilations'; maxpool 'kernel', 'strides', 'pads'. c['shape'] is the input
            shape (N, C, H, W). Variants written:
              qdq       QDQ format (quantize_static's default): QuantizeLinear/DequantizeLinear around
                        Conv and Gemm (transB=1, as torch.onnx exports nn.Linear), int8 weights and an
                        int32 bias dequantized with scale s_in*s_w (float32) and zero point 0; a fused
                        ReLU is not in the graph (QDQRemovableActivation drops a Relu whose input is
                        quantized: the output zero point clamps); MaxPool and Reshape get QDQ pairs with
                        the input's scale and zero point (QDQDirect8BitOp, quantize_output_same_as_input).
              qdq_relu  the same with each fused Relu kept between the op and its QuantizeLinear
                        (quantize_static extra option QDQKeepRemovableActivations=True).
              qop       QOperator format: QLinearConv, QGemm (com.microsoft, what QLinearGemm emits for a
                        Gemm), MaxPool and Reshape on int8 directly, one QuantizeLinear in and one
                        DequantizeLinear out.
            Every layer's integer output ('y<k>', the output of its QuantizeLinear, or of the QLinear
            op) is a graph output as well as the float 'logits'.

To add a kind: 1) write run_<kind>(c, case) below; 2) add it to KINDS; 3) write its inputs from the
C++ test and read its outputs there.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13      # QuantizeLinear/DequantizeLinear per-axis, MaxPool int8 (opset >= 12)
IR_VERSION = 8  # what onnx 1.12 writes for opset 13 and ORT 1.23 reads


class Case:
    def __init__(self, d, c):
        self.dir, self.c = d, c

    def get(self, key):
        return np.load(os.path.join(self.dir, '%s.%s.npy' % (self.c['name'], key)))

    def file(self, f):
        return np.load(os.path.join(self.dir, f))

    def put(self, key, arr):
        os.makedirs(os.path.join(self.dir, 'out'), exist_ok=True)
        np.save(os.path.join(self.dir, 'out', '%s.%s.npy' % (self.c['name'], key)), arr)


# ------------------------------------------------------------------------------------------------
# qparams: transcription of ORT's quantizer formulas (onnxruntime main, quant_utils.py)

INT_RANGE = {'int8': (np.array(-128, np.int8), np.array(127, np.int8)),
             'uint8': (np.array(0, np.uint8), np.array(255, np.uint8))}
SYMMETRIC_RANGE = {'int8': (np.array(-127, np.int8), np.array(127, np.int8)),
                   'uint8': (np.array(0, np.uint8), np.array(254, np.uint8))}


def compute_scale_zp(rmin, rmax, qmin, qmax, symmetric=False):
    """quant_utils.py compute_scale_zp, line by line (min_real_range None)."""
    rmin = np.minimum(rmin, np.array(0, dtype=rmin.dtype))
    rmax = np.maximum(rmax, np.array(0, dtype=rmax.dtype))
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin = -absmax
        rmax = +absmax
    dr = np.array(rmax - rmin, dtype=np.float64)                       # the subtraction in float32
    dq = np.array(qmax, dtype=np.float64) - np.array(qmin, dtype=np.float64)
    scale = np.array(dr / dq)
    if scale < np.finfo(rmax.dtype).tiny:
        return np.array(0, dtype=qmin.dtype), np.array(1.0, dtype=rmax.dtype)
    if symmetric:
        zero_point = np.array(np.round((qmin + qmax) / np.array(2.0, dtype=np.float64)), dtype=qmin.dtype)
    else:
        zero_point = np.array(np.round(qmin - rmin / scale), dtype=qmin.dtype)  # float64, half to even
    return zero_point, scale.astype(rmax.dtype)


def quantize_nparray(dtype, arr, scale, zero_point):
    """quant_utils.py quantize_nparray: float32 division, np.round, + zp, clip to the type's range."""
    qmin, qmax = INT_RANGE[dtype]
    arr_fp32 = np.asarray((arr.astype(np.float32) / scale).round() + zero_point)
    np.clip(arr_fp32, qmin, qmax, out=arr_fp32)
    return arr_fp32.astype(np.dtype(dtype))


def quantize_weight(w, per_channel):
    """quantize_data (per tensor) / quantize_weight_per_channel_impl (axis 0): symmetric int8 weights."""
    qmin, qmax = SYMMETRIC_RANGE['int8']
    if not per_channel:
        zp, s = compute_scale_zp(np.array(w.min(), w.dtype), np.array(w.max(), w.dtype), qmin, qmax, True)
        return quantize_nparray('int8', w.ravel(), s, zp).reshape(w.shape), np.array([s], np.float32)
    qs, ss = [], []
    for i in range(w.shape[0]):
        ch = w.take(i, 0)
        zp, s = compute_scale_zp(np.array(ch.min(), w.dtype), np.array(ch.max(), w.dtype), qmin, qmax, True)
        qs.append(quantize_nparray('int8', ch.ravel(), s, zp).reshape((1,) + ch.shape))
        ss.append(s)
    return np.concatenate(qs, 0), np.array(ss, np.float32)


def quantize_bias(b, input_scale, weight_scale):
    """base_quantizer.py quantize_bias_static_impl (beta 1.0)."""
    bias_scale = input_scale * weight_scale * 1.0
    q = (np.asarray(b, dtype=np.float64) / np.asarray(bias_scale, dtype=np.float64)).round()
    q = np.clip(q, np.float64(np.iinfo(np.int32).min), np.float64(np.iinfo(np.int32).max))
    return q.astype(np.int32)


def run_qparams(c, case):
    qmin, qmax = INT_RANGE[c['act_dtype']]
    ranges = case.get('ranges').astype(np.float32)
    act = []
    for lo, hi in ranges:
        zp, s = compute_scale_zp(np.array(lo, np.float32), np.array(hi, np.float32), qmin, qmax, False)
        act.append([float(s), float(zp)])
    case.put('act', np.array(act, np.float64))
    for k, per_channel in enumerate(c['per_channel']):
        wq, ws = quantize_weight(case.get('fw%d' % k), per_channel)
        case.put('w%d' % k, wq)
        case.put('ws%d' % k, ws)
        if c['has_bias'][k]:
            s_in = np.array(act[k][0], np.float32)  # the input of weighted layer k is activation point k
            case.put('b%d' % k, quantize_bias(case.get('fb%d' % k), s_in, ws if per_channel else ws[0]))


# ------------------------------------------------------------------------------------------------
# model: the ONNX graphs

ONNX_TYPE = {'int8': TensorProto.INT8, 'uint8': TensorProto.UINT8}


class Graph:
    def __init__(self, name):
        self.name, self.nodes, self.inits, self.outputs = name, [], [], []
        self.n = 0

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, inputs, out=None, domain=None, **attrs):
        self.n += 1
        out = out or '%s_%d' % (op.lower(), self.n)
        kw = {'domain': domain} if domain else {}
        self.nodes.append(helper.make_node(op, inputs, [out], name='%s_%d' % (op, self.n), **kw, **attrs))
        return out

    def output(self, name, elem_type, rank):  # dims left unnamed: ORT infers them
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, [None] * rank))

    def model(self, x_shape):
        g = helper.make_graph(self.nodes, self.name,
                              [helper.make_tensor_value_info('x', TensorProto.FLOAT, list(x_shape))],
                              self.outputs, self.inits)
        opsets = [helper.make_opsetid('', OPSET), helper.make_opsetid('com.microsoft', 1)]
        m = helper.make_model(g, opset_imports=opsets, producer_name='driftlab ort oracle')
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m)
        return m


def conv_attrs(l):
    t, left, b, r = l['pads']
    return dict(pads=[t, left, b, r], strides=l['strides'], dilations=l['dilations'])


def layer_numbers(case, l, act_dtype):
    w = case.file(l['w'])
    ws = case.file(l['ws']).astype(np.float32)
    s_in = case.file(l['in_scale']).astype(np.float32).reshape(())
    s_out = case.file(l['out_scale']).astype(np.float32).reshape(())
    zp_out = np.array(l['out_zp'], dtype=np.dtype(act_dtype))
    b = case.file(l['b']).astype(np.int32) if l.get('b') else None
    per_channel = ws.size > 1
    w_scale = ws if per_channel else ws.reshape(())
    w_zp = np.zeros(ws.shape, np.int8) if per_channel else np.array(0, np.int8)
    return w, w_scale, w_zp, b, s_in, s_out, zp_out, per_channel


class Stop(Exception):
    """Raised by the writers when the point to stop at is written (its output already added)."""


def count_points(layers):
    """Activation points in driftlab's PTQ order: conv, dense, global average pool, and a residual's
    inner points before its own output."""
    n = 0
    for l in layers:
        if l['op'] == 'residual':
            n += count_points(l['main']) + 1
        elif l['op'] in ('conv', 'dense', 'gap'):
            n += 1
    return n


def option_a(g, t, l, tag):
    """ResNet option A on a float tensor: x[:, :, ::s, ::s], then zero channels before and after (the
    fp32 graph's Slice and Pad, which quantize_static surrounds with the input's Q/DQ)."""
    big = np.iinfo(np.int64).max
    st = l['stride']
    y = g.node('Slice', [t, g.init('sl_start_%s' % tag, np.array([0, 0], np.int64)),
                         g.init('sl_end_%s' % tag, np.array([big, big], np.int64)),
                         g.init('sl_axes_%s' % tag, np.array([2, 3], np.int64)),
                         g.init('sl_steps_%s' % tag, np.array([st, st], np.int64))])
    pads = np.array([0, l['pad_before'], 0, 0, 0, l['pad_after'], 0, 0], np.int64)
    return y, pads


class QdqWriter:
    """The QDQ graph, whole (output 'logits'), or up to activation point `stop` (output 'y<stop>': its
    QuantizeLinear then DequantizeLinear, float; a global average pool's flattened to (N, C)). Only the
    dequantized value leaves the graph: a graph output taken from an interior QuantizeLinear would keep
    that Q/DQ pair int8 and so block ORT's fusion on x86 (QDQS8ToU8Transformer), which is not the
    deployed graph. Each consumer of a quantized tensor gets its own DequantizeLinear (as
    quantize_static writes a residual block's two uses)."""

    def __init__(self, c, case, keep_relu, stop):
        self.c, self.case, self.keep_relu, self.stop = c, case, keep_relu, stop
        self.dt = c['act_dtype']
        self.g = Graph(c['name'] + ('.qdq_relu' if keep_relu else '.qdq'))
        self.k = 0  # the next activation point
        self.w = 0  # the next weighted layer's file index

    def point(self, q, scale, zp, kind):
        """kind: 'nchw' (a conv's or residual's output, rank 4), 'flat' (a dense output), 'gap' (a global
        average pool's (N, C, 1, 1), flattened to (N, C) after the DequantizeLinear)."""
        if self.k == self.stop:
            name = 'y%d' % self.k
            out = self.g.node('DequantizeLinear', [q, scale, zp], None if kind == 'gap' else name)
            if kind == 'gap':
                out = self.g.node('Reshape', [out, self.g.init('stop_shape', np.array([0, -1], np.int64))], name)
            self.g.output(out, TensorProto.FLOAT, 4 if kind == 'nchw' else 2)
            raise Stop()
        self.k += 1

    def layers(self, layers, q, scale, zp, prefix=''):
        g, case, dt = self.g, self.case, self.dt
        for i, l in enumerate(layers):
            tag = '%s%d' % (prefix, i)
            if l['op'] == 'residual':
                mq, ms, mz = self.layers(l['main'], q, scale, zp, tag + '_')
                sd = g.node('DequantizeLinear', [q, scale, zp])
                if l['option_a']:
                    y, pads = option_a(g, sd, l, tag)
                    sq = g.node('QuantizeLinear', [y, scale, zp])
                    y = g.node('Pad', [g.node('DequantizeLinear', [sq, scale, zp]), g.init('pads_%s' % tag, pads),
                                       g.init('pad_value_%s' % tag, np.array(0, np.float32))], mode='constant')
                    sd = g.node('DequantizeLinear', [g.node('QuantizeLinear', [y, scale, zp]), scale, zp])
                y = g.node('Add', [g.node('DequantizeLinear', [mq, ms, mz]), sd])  # A = main, B = shortcut
                if self.keep_relu and l['relu']:
                    y = g.node('Relu', [y])
                scale = g.init('r%s_scale' % tag, case.file(l['out_scale']).astype(np.float32).reshape(()))
                zp = g.init('r%s_zero_point' % tag, np.array(l['out_zp'], dtype=np.dtype(dt)))
                q = g.node('QuantizeLinear', [y, scale, zp])
                self.point(q, scale, zp, 'nchw')
                continue
            d = g.node('DequantizeLinear', [q, scale, zp])
            if l['op'] in ('conv', 'dense'):
                k = self.w
                self.w += 1
                w, w_scale, w_zp, b, s_in, s_out, zp_out, per_channel = layer_numbers(case, l, dt)
                ax = {'axis': 0} if per_channel else {}
                wq = g.init('w%d_quantized' % k, w)
                wd = g.node('DequantizeLinear', [wq, g.init('w%d_scale' % k, w_scale), g.init('w%d_zero_point' % k, w_zp)],
                            **ax)
                ins = [d, wd]
                if b is not None:
                    # bias_scale = input_scale * weight_scale (float32), zero point 0 (int32)
                    bs = (s_in * w_scale).astype(np.float32)
                    bzp = np.zeros(bs.shape, np.int32) if per_channel else np.array(0, np.int32)
                    ins.append(g.node('DequantizeLinear', [g.init('b%d_quantized' % k, b), g.init('b%d_scale' % k, bs),
                                                           g.init('b%d_zero_point' % k, bzp)], **ax))
                y = g.node('Conv', ins, **conv_attrs(l)) if l['op'] == 'conv' else g.node('Gemm', ins, transB=1)
                if self.keep_relu and l['relu']:
                    y = g.node('Relu', [y])
                scale, zp = g.init('y%d_scale' % k, s_out), g.init('y%d_zero_point' % k, zp_out)
                q = g.node('QuantizeLinear', [y, scale, zp])
                self.point(q, scale, zp, 'flat' if l['op'] == 'dense' else 'nchw')
            elif l['op'] == 'gap':
                y = g.node('GlobalAveragePool', [d])
                scale = g.init('gap%s_scale' % tag, case.file(l['out_scale']).astype(np.float32).reshape(()))
                zp = g.init('gap%s_zero_point' % tag, np.array(l['out_zp'], dtype=np.dtype(dt)))
                q = g.node('QuantizeLinear', [y, scale, zp])
                self.point(q, scale, zp, 'gap')
                # (N, C, 1, 1) -> (N, C): Reshape between the point's Q/DQ pair (dropped by ORT)
                y = g.node('Reshape', [g.node('DequantizeLinear', [q, scale, zp]),
                                       g.init('gap_shape_%s' % tag, np.array([0, -1], np.int64))])
                q = g.node('QuantizeLinear', [y, scale, zp])
            elif l['op'] == 'maxpool':
                y = g.node('MaxPool', [d], kernel_shape=l['kernel'], strides=l['strides'], pads=l['pads'])
                q = g.node('QuantizeLinear', [y, scale, zp])
            elif l['op'] == 'flatten':
                y = g.node('Reshape', [d, g.init('shape_%s' % tag, np.array([0, -1], np.int64))])
                q = g.node('QuantizeLinear', [y, scale, zp])
            else:
                raise KeyError('unknown layer op %r' % l['op'])
        return q, scale, zp


def write_qdq(c, case, keep_relu, stop=None):
    wr = QdqWriter(c, case, keep_relu, stop)
    g = wr.g
    s0 = g.init('x_scale', case.file(c['input']['scale']).astype(np.float32).reshape(()))
    z0 = g.init('x_zero_point', np.array(c['input']['zp'], dtype=np.dtype(c['act_dtype'])))
    q = g.node('QuantizeLinear', ['x', s0, z0], 'x_quantized')
    try:
        q, scale, zp = wr.layers(c['layers'], q, s0, z0)
    except Stop:
        return g.model(c['shape'])
    g.output(g.node('DequantizeLinear', [q, scale, zp], 'logits'), TensorProto.FLOAT, 2)
    return g.model(c['shape'])


class QopWriter:
    """QOperator format: QLinearConv, QGemm, QLinearAdd and QLinearGlobalAveragePool (com.microsoft),
    MaxPool/Reshape/Slice/Pad on the integers; every point's integer output is a graph output."""

    def __init__(self, c, case):
        self.c, self.case, self.dt = c, case, c['act_dtype']
        self.g = Graph(c['name'] + '.qop')
        self.k, self.w = 0, 0

    def point(self, q, rank):
        self.g.output(q, ONNX_TYPE[self.dt], rank)
        self.k += 1

    def layers(self, layers, q, scale, zp, prefix=''):
        g, case, dt = self.g, self.case, self.dt
        for i, l in enumerate(layers):
            tag = '%s%d' % (prefix, i)
            if l['op'] == 'residual':
                mq, ms, mz = self.layers(l['main'], q, scale, zp, tag + '_')
                sq = q
                if l['option_a']:
                    y, pads = option_a(g, q, l, tag)
                    sq = g.node('Pad', [y, g.init('pads_%s' % tag, pads), zp], mode='constant')
                ys = g.init('r%s_scale' % tag, case.file(l['out_scale']).astype(np.float32).reshape(()))
                yz = g.init('r%s_zero_point' % tag, np.array(l['out_zp'], dtype=np.dtype(dt)))
                q = g.node('QLinearAdd', [mq, ms, mz, sq, scale, zp, ys, yz], 'y%d' % self.k, domain='com.microsoft')
                scale, zp = ys, yz
                self.point(q, 4)
            elif l['op'] in ('conv', 'dense'):
                k = self.w
                self.w += 1
                w, w_scale, w_zp, b, s_in, s_out, zp_out, per_channel = layer_numbers(case, l, dt)
                wq = g.init('w%d_quantized' % k, w)
                ws, wz = g.init('w%d_scale' % k, w_scale), g.init('w%d_zero_point' % k, w_zp)
                ys, yz = g.init('y%d_scale' % k, s_out), g.init('y%d_zero_point' % k, zp_out)
                bq = g.init('b%d_quantized' % k, b) if b is not None else ''
                if l['op'] == 'conv':
                    ins = [q, scale, zp, wq, ws, wz, ys, yz] + ([bq] if bq else [])
                    q = g.node('QLinearConv', ins, 'y%d' % self.k, **conv_attrs(l))
                else:
                    q = g.node('QGemm', [q, scale, zp, wq, ws, wz, bq, ys, yz], 'y%d' % self.k, domain='com.microsoft',
                               transB=1)
                scale, zp = ys, yz
                self.point(q, 4 if l['op'] == 'conv' else 2)
            elif l['op'] == 'gap':
                ys = g.init('gap%s_scale' % tag, case.file(l['out_scale']).astype(np.float32).reshape(()))
                yz = g.init('gap%s_zero_point' % tag, np.array(l['out_zp'], dtype=np.dtype(dt)))
                y = g.node('QLinearGlobalAveragePool', [q, scale, zp, ys, yz], domain='com.microsoft', channels_last=0)
                q = g.node('Reshape', [y, g.init('gap_shape_%s' % tag, np.array([0, -1], np.int64))], 'y%d' % self.k)
                scale, zp = ys, yz
                self.point(q, 2)
            elif l['op'] == 'maxpool':
                q = g.node('MaxPool', [q], kernel_shape=l['kernel'], strides=l['strides'], pads=l['pads'])
            elif l['op'] == 'flatten':
                q = g.node('Reshape', [q, g.init('shape_%s' % tag, np.array([0, -1], np.int64))])
            else:
                raise KeyError('unknown layer op %r' % l['op'])
        return q, scale, zp


def write_qop(c, case):
    wr = QopWriter(c, case)
    g = wr.g
    scale = g.init('x_scale', case.file(c['input']['scale']).astype(np.float32).reshape(()))
    zp = g.init('x_zero_point', np.array(c['input']['zp'], dtype=np.dtype(c['act_dtype'])))
    q = g.node('QuantizeLinear', ['x', scale, zp], 'x_quantized')
    q, scale, zp = wr.layers(c['layers'], q, scale, zp)
    g.output(g.node('DequantizeLinear', [q, scale, zp], 'logits'), TensorProto.FLOAT, 2)
    return g.model(c['shape'])


def run_model(c, case):
    models = {}

    def save(variant, tag, m):
        f = '%s.%s.%s.onnx' % (c['name'], variant, tag)
        onnx.save(m, os.path.join(case.dir, f))
        models.setdefault(variant, []).append(f)

    points = count_points(c['layers'])
    for variant, keep_relu in (('qdq', False), ('qdq_relu', True)):
        if keep_relu and not c.get('keep_relu_variant', True):
            continue
        for k in range(points):
            save(variant, 'y%d' % k, write_qdq(c, case, keep_relu, stop=k))
        save(variant, 'logits', write_qdq(c, case, keep_relu))
    save('qop', 'all', write_qop(c, case))
    with open(os.path.join(case.dir, '%s.models.json' % c['name']), 'w') as fh:
        json.dump({'x': c['x'], 'models': models}, fh)


KINDS = {'qparams': run_qparams, 'model': run_model}


def summary(d, c):
    """Prints the node types of each model as ORT optimized it (ort_oracle.js saved the graphs)."""
    with open(os.path.join(d, '%s.models.json' % c['name'])) as fh:
        models = json.load(fh)['models']
    for variant, files in models.items():
        for f in files:
            for level in ('all', 'all_s8'):
                p = os.path.join(d, f[:-len('.onnx')] + '.%s.opt.onnx' % level)
                if not os.path.exists(p):
                    continue
                g = onnx.load(p).graph
                ops = [(n.domain + '.' if n.domain else '') + n.op_type for n in g.node]
                counts = ', '.join('%s x%d' % (op, ops.count(op)) for op in dict.fromkeys(ops))
                # the activations' type as run: the zero point of the first QuantizeLinear
                inits = {t.name: t for t in g.initializer}
                q = next(n for n in g.node if n.op_type == 'QuantizeLinear')
                act = TensorProto.DataType.Name(inits[q.input[2]].data_type).lower() if q.input[2] in inits else '?'
                print('ORT graph %s (level %s, activations %s): %s' % (f, level, act, counts))


def main():
    d = sys.argv[1]
    args = [a for a in sys.argv[2:] if a != '--summary']
    k, n = (int(v) for v in args[0].split('/')) if args else (0, 1)
    with open(os.path.join(d, 'cases.json')) as fh:
        cases = json.load(fh)['cases']
    for c in cases:
        if c.get('shard', 0) % n != k:
            continue
        if '--summary' in sys.argv:
            if c['kind'] == 'model':
                summary(d, c)
            continue
        try:
            KINDS[c['kind']](c, Case(d, c))
        except Exception as e:
            raise RuntimeError('case %s (%s): %s' % (c['name'], c['kind'], e)) from e


if __name__ == '__main__':
    main()
