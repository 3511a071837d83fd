import numpy as np, onnx
from harness import *
from t_qdq import make_qdq_conv
rng = np.random.default_rng(3)
Wt = rng.integers(-128, 128, (16, 8, 3, 3)).astype(np.int8)
Bias = np.zeros(16, np.int32)
for dt, xz, yz in [(np.uint8, 100, 128), (np.int8, -20, 0)]:
    p, out = make_qdq_conv(Wt, 0.0078125, dt, 0.0625, xz, 0.5, yz, Bias, 8, 7, 6)
    for opts in [{'graphOptimizationLevel': 'all'}, {'graphOptimizationLevel': 'extended'},
                 {'graphOptimizationLevel': 'all', 'extra': {'session': {'qdqisint8allowed': '1'}}},
                 {'graphOptimizationLevel': 'all', 'extra': {'session': {'x64quantprecision': '1'}}}]:
        o = dict(opts); o['optimizedModelFilePath'] = '/tmp/ortexp/work/opt.onnx'
        run(p, {'x': np.zeros((1, 8, 7, 6), np.float32)}, [out], o)
        m = onnx.load('/tmp/ortexp/work/opt.onnx')
        desc = []
        for n in m.graph.node:
            s = f'{n.domain + ":" if n.domain else ""}{n.op_type}'
            if n.op_type == 'QLinearConv':
                wt = [i for i in m.graph.initializer if i.name == n.input[3]]
                s += f'[W {onnx.TensorProto.DataType.Name(wt[0].data_type) if wt else "?"}' + (', channels_last' if any(a.name=='channels_last' and a.i for a in n.attribute) else '') + ']'
            desc.append(s)
        print(dt.__name__, opts, '->', ' , '.join(desc))
