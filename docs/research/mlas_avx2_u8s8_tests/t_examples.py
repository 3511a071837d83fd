import numpy as np
from harness import *
def mmi(A, B):
    M, K = A.shape; N = B.shape[1]
    g = helper.make_graph([helper.make_node('MatMulInteger', ['A', 'B'], ['Y'])], 'g',
        [helper.make_tensor_value_info('A', TensorProto.UINT8, [M, K]), helper.make_tensor_value_info('B', TensorProto.INT8, [K, N])],
        [helper.make_tensor_value_info('Y', TensorProto.INT32, None)])
    return run(save_model(g, 13), {'A': A, 'B': B}, ['Y'])[0].view(np.int32).reshape(M, N)
ex = [([255, 255], [127, 127]), ([255, 255], [-128, -128]), ([255, 0, 255, 0], [127, 127, 127, 127]),
      ([255, 255, 255], [127, 127, 127]), ([0, 255, 255, 0], [127, 127, 127, 127]), ([255, 255, 0, 0, 255, 255], [64, 64, 0, 0, 65, 64])]
for a, b in ex:
    for M in (1, 2):
        A = np.array([a] * M, np.uint8); B = np.array(b, np.int8).reshape(-1, 1)
        print(f'M={M} a={a} b={b}: ORT={mmi(A, B)[0,0]}  exact={int(np.dot(np.array(a), np.array(b)))}  pairmodel={int(sat_dot(A[:1], B)[0,0])}')
