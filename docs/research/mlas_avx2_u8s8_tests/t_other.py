import numpy as np
from harness import *
rng = np.random.default_rng(5)

def requant(acc, scale, zp):
    return np.clip(np.rint(acc.astype(np.float32) * np.float32(scale)).astype(np.int64) + zp, 0, 255)

def qlinearmatmul(M, K, N, bdt, za=17, zb=0):
    A = rng.integers(0, 256, (M, K)).astype(np.uint8)
    if bdt == np.int8: B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    else: B = rng.integers(0, 256, (K, N)).astype(np.uint8)
    sa, sb, sy, zy = np.float32(0.02), np.float32(0.004), np.float32(3.0), 120
    inits = [numpy_helper.from_array(np.array(sa, np.float32), 'sa'), numpy_helper.from_array(np.array(za, np.uint8), 'za'),
             numpy_helper.from_array(B, 'B'), numpy_helper.from_array(np.array(sb, np.float32), 'sb'), numpy_helper.from_array(np.array(zb, bdt), 'zb'),
             numpy_helper.from_array(np.array(sy, np.float32), 'sy'), numpy_helper.from_array(np.array(zy, np.uint8), 'zy')]
    node = helper.make_node('QLinearMatMul', ['A', 'sa', 'za', 'B', 'sb', 'zb', 'sy', 'zy'], ['Y'])
    g = helper.make_graph([node], 'g', [helper.make_tensor_value_info('A', TensorProto.UINT8, [M, K])],
                          [helper.make_tensor_value_info('Y', TensorProto.UINT8, None)], inits)
    y = run(save_model(g, 13), {'A': A}, ['Y'])[0].reshape(M, N).astype(np.int64)
    a = A.astype(np.int64); b = B.astype(np.int64)
    corr = -zb * a.sum(1, keepdims=True) - za * b.sum(0, keepdims=True) + K * za * zb
    scale = np.float32(sa * sb / sy)  # UNCONFIRMED exact float order; check both
    out = {}
    for mode, d in [('sat', sat_dot(a, b)), ('exact', exact_dot(a, b))]:
        e = requant(d + corr, scale, zy)
        out[mode] = int((e != y).sum())
    print(f'QLinearMatMul M{M} K{K} N{N} B={bdt.__name__}: mismatches sat={out["sat"]} exact={out["exact"]}')

def qgemm(M, K, N, za=9):
    A = rng.integers(0, 256, (M, K)).astype(np.uint8)
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    sa, sb = np.float32(0.02), np.float32(0.004)
    inits = [numpy_helper.from_array(np.array(sa, np.float32), 'sa'), numpy_helper.from_array(np.array(za, np.uint8), 'za'),
             numpy_helper.from_array(B, 'B'), numpy_helper.from_array(np.array(sb, np.float32), 'sb'), numpy_helper.from_array(np.array(0, np.int8), 'zb')]
    node = helper.make_node('QGemm', ['A', 'sa', 'za', 'B', 'sb', 'zb'], ['Y'], domain='com.microsoft')
    g = helper.make_graph([node], 'g', [helper.make_tensor_value_info('A', TensorProto.UINT8, [M, K])],
                          [helper.make_tensor_value_info('Y', TensorProto.FLOAT, None)], inits)
    y = run(save_model(g, 13, ms=True), {'A': A}, ['Y'])[0].view(np.float32).reshape(M, N)
    a = A.astype(np.int64); b = B.astype(np.int64)
    corr = - za * b.sum(0, keepdims=True)
    out = {}
    for mode, d in [('sat', sat_dot(a, b)), ('exact', exact_dot(a, b))]:
        e = (d + corr).astype(np.float32) * np.float32(sa * sb)
        out[mode] = int((np.abs(e - y) > 1e-3 * np.abs(e).max()).sum())
    print(f'QGemm(float out) M{M} K{K} N{N}: mismatches sat={out["sat"]} exact={out["exact"]}')

def mmi_u8(M, K, N):
    A = rng.integers(0, 256, (M, K)).astype(np.uint8); B = rng.integers(0, 256, (K, N)).astype(np.uint8)
    g = helper.make_graph([helper.make_node('MatMulInteger', ['A', 'B'], ['Y'])], 'g',
        [helper.make_tensor_value_info('A', TensorProto.UINT8, [M, K]), helper.make_tensor_value_info('B', TensorProto.UINT8, [K, N])],
        [helper.make_tensor_value_info('Y', TensorProto.INT32, None)])
    y = run(save_model(g, 13), {'A': A, 'B': B}, ['Y'])[0].view(np.int32).reshape(M, N)
    print(f'MatMulInteger u8xu8 M{M} K{K} N{N}: exact match = {np.array_equal(y, exact_dot(A, B))}')

for s in [(1, 64, 20), (6, 129, 33), (40, 300, 17)]:
    qlinearmatmul(*s, np.int8); qlinearmatmul(*s, np.uint8, zb=131); qgemm(*s); mmi_u8(*s)
