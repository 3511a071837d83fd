import json, os, subprocess, tempfile, uuid
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

NP2ONNX = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.int32: TensorProto.INT32, np.float32: TensorProto.FLOAT}
DT = {np.dtype('uint8'): 'uint8', np.dtype('int8'): 'int8', np.dtype('int32'): 'int32', np.dtype('float32'): 'float32'}
WORK = '/tmp/ortexp/work'; os.makedirs(WORK, exist_ok=True)

def save_model(graph, opset=13, ms=False):
    ops = [helper.make_opsetid('', opset)]
    if ms: ops.append(helper.make_opsetid('com.microsoft', 1))
    m = helper.make_model(graph, opset_imports=ops)
    m.ir_version = 8
    p = os.path.join(WORK, uuid.uuid4().hex + '.onnx')
    onnx.save(m, p)
    return p

def run(model_path, feeds, out_names, opts=None):
    spec = {'model': model_path, 'inputs': [], 'outputs': [], 'opts': opts or {}}
    for k, v in feeds.items():
        f = os.path.join(WORK, uuid.uuid4().hex + '.bin'); v = np.ascontiguousarray(v); v.tofile(f)
        spec['inputs'].append({'name': k, 'dtype': DT[v.dtype], 'shape': list(v.shape), 'file': f})
    for o in out_names:
        spec['outputs'].append({'name': o, 'file': os.path.join(WORK, uuid.uuid4().hex + '.bin')})
    sp = os.path.join(WORK, uuid.uuid4().hex + '.json'); json.dump(spec, open(sp, 'w'))
    r = subprocess.run(['node', '/tmp/ortexp/run.js', sp], capture_output=True, text=True)
    if r.returncode: raise RuntimeError(r.stderr)
    return [np.fromfile(o['file'], dtype=np.uint8) for o in spec['outputs']]

def sat_dot(a, b):
    """a: (M,K) raw uint8 values as int, b: (K,N) raw int8 as int. MLAS AVX2 U8S8: pad K to mult of 4 with 0,
    pairs (2p,2p+1) summed and saturated to int16, then summed exactly in int32."""
    a = a.astype(np.int64); b = b.astype(np.int64)
    M, K = a.shape; N = b.shape[1]
    Kp = (K + 3) // 4 * 4
    ap = np.zeros((M, Kp), np.int64); ap[:, :K] = a
    bp = np.zeros((Kp, N), np.int64); bp[:K] = b
    pair = ap[:, 0::2, None] * bp[None, 0::2, :] + ap[:, 1::2, None] * bp[None, 1::2, :]
    return np.clip(pair, -32768, 32767).sum(axis=1)

def exact_dot(a, b):
    return a.astype(np.int64) @ b.astype(np.int64)
