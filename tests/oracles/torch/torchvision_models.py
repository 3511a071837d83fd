"""torchvision models exported by PyTorch's own exporter, with PyTorch's logits: the outside
models of driftlab's graph import (tests/oracles/test_graph_oracle_torch.cpp).

    torchvision_models.py OUT_DIR BATCH NAME[:SIZE] ...

For each NAME (a torchvision.models builder: mobilenet_v2, resnet18, resnet50, ...), random
weights (torch.manual_seed(0); weights=None, nothing downloaded), BatchNorm statistics made
non-trivial (running_mean ~ N(0, 0.1), running_var ~ U(0.5, 1.5): the defaults 0 and 1 would
leave the normalisation untested), eval() mode, an input of BATCH x 3 x SIZE x SIZE (default 224)
from torch.manual_seed(1); writes OUT_DIR/NAME.onnx (torch.onnx.export, opset 13, BatchNorm folded
into the convolutions as the exporter does in eval mode), NAME.x.npy and NAME.logits.npy
(PyTorch's forward in float32, one thread).
"""
import sys

import numpy as np
import torch
import torchvision


def main():
    out, batch = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    for spec in sys.argv[3:]:
        name, _, size = spec.partition(":")
        size = int(size or 224)
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)(weights=None)
        with torch.no_grad():
            for mod in m.modules():
                if isinstance(mod, torch.nn.BatchNorm2d):
                    mod.running_mean.normal_(0.0, 0.1)
                    mod.running_var.uniform_(0.5, 1.5)
                    mod.weight.uniform_(0.5, 1.5)
                    mod.bias.normal_(0.0, 0.1)
        m.eval()
        torch.manual_seed(1)
        x = torch.rand(batch, 3, size, size)
        with torch.no_grad():
            y = m(x)
        torch.onnx.export(m, x, f"{out}/{name}.onnx", opset_version=13, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})
        np.save(f"{out}/{name}.x.npy", x.numpy())
        np.save(f"{out}/{name}.logits.npy", y.numpy())


if __name__ == "__main__":
    main()
