import numpy as np, onnx
from harness import *
from t_qdq import make_qdq_conv
Wt = np.ones((16, 8, 3, 3), np.int8); Bias = np.zeros(16, np.int32)
p, out = make_qdq_conv(Wt, 0.0078125, np.int8, 0.0625, -20, 0.5, 0, Bias, 8, 7, 6)
for opts in [{'graphOptimizationLevel': 'all'}, {'graphOptimizationLevel': 'all', 'extra': {'session': {'qdqisint8allowed': '1'}}}]:
    o = dict(opts); o['optimizedModelFilePath'] = '/tmp/ortexp/work/opt.onnx'
    run(p, {'x': np.zeros((1, 8, 7, 6), np.float32)}, [out], o)
    m = onnx.load('/tmp/ortexp/work/opt.onnx')
    q = m.graph.node[0]
    zp = [i for i in m.graph.initializer if i.name == q.input[2]][0]
    print(opts, 'input Q zero-point dtype:', onnx.TensorProto.DataType.Name(zp.data_type), numpy_helper.to_array(zp))
