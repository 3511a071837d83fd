import numpy as np
from harness import *
from conv_emu import qlinearconv_emu
rng = np.random.default_rng(2)

def make_qdq_conv(Wt, ws, act_dtype, xs, xz, ys, yz, Bias, C, H, Wd, pads=(1,1,1,1), final_dq=True):
    adt = NP2ONNX[act_dtype]
    inits = [numpy_helper.from_array(np.array(xs, np.float32), 'xs'), numpy_helper.from_array(np.array(xz, act_dtype), 'xz'),
             numpy_helper.from_array(Wt, 'wq'), numpy_helper.from_array(np.array(ws, np.float32), 'ws'),
             numpy_helper.from_array(np.array(0, np.int8), 'wz'),
             numpy_helper.from_array(Bias, 'bq'), numpy_helper.from_array(np.array(xs * ws, np.float32), 'bs'),
             numpy_helper.from_array(np.array(0, np.int32), 'bz'),
             numpy_helper.from_array(np.array(ys, np.float32), 'ys'), numpy_helper.from_array(np.array(yz, act_dtype), 'yz')]
    nodes = [helper.make_node('QuantizeLinear', ['x', 'xs', 'xz'], ['xq']),
             helper.make_node('DequantizeLinear', ['xq', 'xs', 'xz'], ['xdq']),
             helper.make_node('DequantizeLinear', ['wq', 'ws', 'wz'], ['wdq']),
             helper.make_node('DequantizeLinear', ['bq', 'bs', 'bz'], ['bdq']),
             helper.make_node('Conv', ['xdq', 'wdq', 'bdq'], ['yf'], pads=list(pads)),
             helper.make_node('QuantizeLinear', ['yf', 'ys', 'yz'], ['yq'])]
    outname = 'yq'
    if final_dq:
        nodes.append(helper.make_node('DequantizeLinear', ['yq', 'ys', 'yz'], ['y'])); outname = 'y'
    g = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, C, H, Wd])],
                          [helper.make_tensor_value_info(outname, TensorProto.FLOAT if final_dq else adt, None)], inits)
    return save_model(g, 13), outname

def case(name, act_dtype, opts_list, C=8, M=16, k=3, H=7, Wd=6, wrange=128):
    xs, ys, ws = np.float32(0.0625), np.float32(0.5), np.float32(0.0078125)
    if act_dtype == np.uint8:
        xz, yz = 100, 128; qx = rng.integers(0, 256, (1, C, H, Wd))
    else:
        xz, yz = -20, 0; qx = rng.integers(-128, 128, (1, C, H, Wd))
    X = ((qx - xz) * xs).astype(np.float32)
    Wt = rng.integers(-wrange, wrange, (M, C, k, k)).astype(np.int8)
    Bias = rng.integers(-3000, 3000, M).astype(np.int32)
    p, outname = make_qdq_conv(Wt, ws, act_dtype, xs, xz, ys, yz, Bias, C, H, Wd)
    # emulation: raw activation as seen by MLAS = uint8 (s8 + 128 when converted), zp likewise
    off = 0 if act_dtype == np.uint8 else 128
    Xu = (qx + off).astype(np.uint8)
    for opts in opts_list:
        y = run(p, {'x': X}, [outname], opts)[0].view(np.float32)
        qy = np.rint(y / ys).astype(np.int64) + yz + off  # back to uint8-domain code
        res = {}
        for mode in ['sat', 'exact']:
            e = qlinearconv_emu(Xu, xs, xz + off, Wt, ws, 0, ys, yz + off, Bias, (1,1,1,1), (1,1), (1,1), 1, mode, 'hwc')
            res[mode] = (int((qy.reshape(e.shape) != e).sum()), int(np.abs(qy.reshape(e.shape) - e.astype(int)).max()))
        print(f'{name:28s} opts={opts}  mismatches(count,maxabs): sat={res["sat"]} exact={res["exact"]}', flush=True)

u8opts = [{'graphOptimizationLevel': 'all'}, {'graphOptimizationLevel': 'extended'}, {'graphOptimizationLevel': 'basic'},
          {'graphOptimizationLevel': 'all', 'extra': {'session': {'x64quantprecision': '1'}}}]
case('QDQ u8 act / s8 w', np.uint8, u8opts)
s8opts = u8opts + [{'graphOptimizationLevel': 'all', 'extra': {'session': {'qdqisint8allowed': '1'}}}]
case('QDQ s8 act / s8 w', np.int8, s8opts)
case('QDQ s8 act / s8 w C3', np.int8, s8opts, C=3)
