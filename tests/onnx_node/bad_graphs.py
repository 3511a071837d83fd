"""Bad ONNX graphs for the importer's refusals (tests/cli/test_bad_input_commands.cpp):

    bad_graphs.py OUT_DIR

writes cycle.onnx (two nodes reading each other's output), dangling.onnx (a node reading a name
nothing writes), shape_mismatch.onnx (an Add of a (4,6,6) and a (4,3,3) value), ceil_mode.onnx
(MaxPool ceil_mode=1) and unknown_op.onnx (Softsign), each over a float input x (N,4,6,6).
"""
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inits=(), out_shape=None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 6, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 6, 6])
    g = helper.make_graph(nodes, "bad", [x], [y], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="bad_graphs.py")


def main():
    out = sys.argv[1]
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    graphs = {
        "cycle": model([helper.make_node("Relu", ["b"], ["a"], name="first"),
                        helper.make_node("Add", ["a", "x"], ["b"], name="second"),
                        helper.make_node("Relu", ["b"], ["y"], name="last")]),
        "dangling": model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="reads_nowhere")]),
        "shape_mismatch": model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3],
                                                  strides=[2, 2]),
                                 helper.make_node("Add", ["x", "c"], ["y"], name="mismatched_add")], [w]),
        "ceil_mode": model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                                             ceil_mode=1)]),
        "unknown_op": model([helper.make_node("Softsign", ["x"], ["y"], name="soft")]),
    }
    for name, m in graphs.items():
        with open(f"{out}/{name}.onnx", "wb") as f:
            f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
