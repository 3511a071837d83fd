import numpy as np, sys
from harness import *
from conv_emu import qlinearconv_emu
rng = np.random.default_rng(1)

def make_qlinearconv(Wt, xs, xz, ws, wz, ys, yz, Bias, pads, strides, group, C, H, Wd):
    inits = [numpy_helper.from_array(np.array(xs, np.float32), 'xs'), numpy_helper.from_array(np.array(xz, np.uint8), 'xz'),
             numpy_helper.from_array(Wt, 'w'), numpy_helper.from_array(np.asarray(ws, np.float32), 'ws'),
             numpy_helper.from_array(np.asarray(wz, np.int8), 'wz'),
             numpy_helper.from_array(np.array(ys, np.float32), 'ys'), numpy_helper.from_array(np.array(yz, np.uint8), 'yz')]
    ins = ['x', 'xs', 'xz', 'w', 'ws', 'wz', 'ys', 'yz']
    if Bias is not None:
        inits.append(numpy_helper.from_array(Bias, 'b')); ins.append('b')
    node = helper.make_node('QLinearConv', ins, ['y'], pads=list(pads), strides=list(strides), group=group)
    g = helper.make_graph([node], 'g', [helper.make_tensor_value_info('x', TensorProto.UINT8, [1, C, H, Wd])],
                          [helper.make_tensor_value_info('y', TensorProto.UINT8, None)], inits)
    return save_model(g, 13)

def case(name, C, M, k, group=1, wz=0, pads=(1,1,1,1), strides=(1,1), H=7, Wd=6, wrange=128, xz=7, perchan=False, levels=('all','disabled')):
    X = rng.integers(0, 256, (1, C, H, Wd)).astype(np.uint8)
    Wt = rng.integers(-wrange, wrange, (M, C // group, k, k)).astype(np.int8)
    xs, ys, yz = 0.02, 0.9, 128
    ws = (rng.uniform(0.003, 0.01, M).astype(np.float32) if perchan else np.float32(0.005))
    Bias = rng.integers(-5000, 5000, M).astype(np.int32)
    p = make_qlinearconv(Wt, xs, xz, ws, wz, ys, yz, Bias, pads, strides, group, C, H, Wd)
    for lvl in levels:
        y = run(p, {'x': X}, ['y'], {'graphOptimizationLevel': lvl})[0]
        outs = {}
        for mode, order in [('sat', 'hwc'), ('sat', 'chw'), ('exact', 'hwc')]:
            e = qlinearconv_emu(X, xs, xz, Wt, ws, wz, ys, yz, Bias, (pads[0], pads[1], pads[2], pads[3]), strides, (1,1), group, mode, order)
            y2 = y.reshape(e.shape)
            outs[mode + '-' + order] = (int((y2 != e).sum()), int(np.abs(y2.astype(int) - e.astype(int)).max()))
        print(f'{name:38s} lvl={lvl:8s} mismatches(count,maxabs): ' + '  '.join(f'{k}={v}' for k, v in outs.items()), flush=True)

# ONNX pads order: [x1_begin, x2_begin, x1_end, x2_end] -> emulator wants (top, left, bottom, right)
case('sym C8 M16 3x3 (ConvSym expected)', 8, 16, 3)
case('sym C8 M16 3x3 perchannel', 8, 16, 3, perchan=True)
case('asym wz=3 C8 M16 3x3 (GEMM)', 8, 16, 3, wz=3)
case('sym C3 M16 3x3 (C%4!=0 -> GEMM)', 3, 16, 3)
case('sym C6 M16 3x3 (C%4!=0 -> GEMM)', 6, 16, 3)
case('sym C8 M12 3x3 (M<16 -> GEMM)', 8, 12, 3)
case('sym C5 M24 1x1 pointwise', 5, 24, 1, pads=(0,0,0,0))
case('sym C8 M16 group2 3x3', 8, 16, 3, group=2)
case('sym depthwise C16 g16 3x3', 16, 16, 3, group=16)
case('asym depthwise C8 g8 3x3 wz=2', 8, 8, 3, group=8, wz=2)
case('sym C8 M16 stride2 5x5', 8, 16, 5, pads=(2,2,2,2), strides=(2,2), H=11, Wd=9)
case('sym C3 M16 3x3 xz=0', 3, 16, 3, xz=0)
