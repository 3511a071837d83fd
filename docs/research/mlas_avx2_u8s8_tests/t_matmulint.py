import numpy as np, itertools
from harness import *
rng = np.random.default_rng(0)

def model_mmi(K, N, B=None, zpa=None, zpb=None, bdtype=np.int8):
    inputs = [helper.make_tensor_value_info('A', TensorProto.UINT8, ['M', K])]
    inits = []
    node_in = ['A', 'B']
    if B is None:
        inputs.append(helper.make_tensor_value_info('B', NP2ONNX[bdtype], [K, N]))
    else:
        inits.append(numpy_helper.from_array(B, 'B'))
    if zpa is not None or zpb is not None:
        inits.append(numpy_helper.from_array(np.array(zpa or 0, np.uint8), 'zpa')); node_in.append('zpa')
        if zpb is not None:
            inits.append(numpy_helper.from_array(np.array(zpb, bdtype), 'zpb')); node_in.append('zpb')
    node = helper.make_node('MatMulInteger', node_in, ['Y'])
    g = helper.make_graph([node], 'g', inputs, [helper.make_tensor_value_info('Y', TensorProto.INT32, ['M', N])], inits)
    return save_model(g, 13)

def check(M, K, N, zpa, zpb, const_b, wrange=128):
    A = rng.integers(0, 256, (M, K)).astype(np.uint8)
    B = rng.integers(-wrange, wrange, (K, N)).astype(np.int8)
    p = model_mmi(K, N, B if const_b else None, zpa, zpb)
    feeds = {'A': A} if const_b else {'A': A, 'B': B}
    y = run(p, feeds, ['Y'])[0].view(np.int32).reshape(M, N).astype(np.int64)
    a = A.astype(np.int64); b = B.astype(np.int64)
    za = zpa or 0; zb = zpb or 0
    corr = - zb * a.sum(1, keepdims=True) - za * b.sum(0, keepdims=True) + K * za * zb
    s = sat_dot(a, b) + corr
    e = exact_dot(a, b) + corr
    return np.array_equal(y, s), np.array_equal(y, e), int((s != e).sum())

res = []
for M, K, N in [(1, 2, 1), (1, 7, 5), (1, 64, 33), (2, 9, 17), (4, 31, 16), (5, 130, 20), (7, 300, 40), (33, 515, 70), (1, 1000, 24)]:
    for zpa, zpb in [(None, None), (0, 0), (100, 0), (0, 5), (37, -9)]:
        for const_b in [True, False]:
            ms, me, nd = check(M, K, N, zpa, zpb, const_b)
            res.append((M, K, N, zpa, zpb, const_b, ms, me, nd))
            print(M, K, N, zpa, zpb, 'constB' if const_b else 'inputB', 'match_sat=%s match_exact=%s n_sat_diff=%d' % (ms, me, nd))
print('ALL sat-model matches:', all(r[6] for r in res))
