"""torchvision models exported by PyTorch's own exporter, with PyTorch's logits: the outside
models of driftlab's graph import (tests/oracles/test_graph_oracle_torch.cpp).

    torchvision_models.py OUT_DIR BATCH NAME[:SIZE] ...
    torchvision_models.py --train OUT_DIR BATCH NAME[:SIZE] ...

For each NAME (a torchvision.models builder: mobilenet_v2, resnet18, resnet50, ...), random
weights (torch.manual_seed(0); weights=None, nothing downloaded), BatchNorm statistics made
non-trivial (running_mean ~ N(0, 0.1), running_var ~ U(0.5, 1.5): the defaults 0 and 1 would
leave the normalisation untested), eval() mode, an input of BATCH x 3 x SIZE x SIZE (default 224)
from torch.manual_seed(1); writes OUT_DIR/NAME.onnx (torch.onnx.export, opset 13, BatchNorm folded
into the convolutions as the exporter does in eval mode), NAME.x.npy and NAME.logits.npy
(PyTorch's forward in float32, one thread).

--train: the same models with Dropout replaced by the identity (its mask is random), exported
without folding (training=PRESERVE, do_constant_folding=False: BatchNormalization nodes kept,
initializers named as the parameters) as NAME.train.onnx, labels NAME.y.npy (uniform over the
classes, torch.manual_seed(2)), and:
  NAME.dx.npy       dL/dx in eval() mode (mean cross-entropy): what FGSM takes the sign of
  NAME.loss.npy     the loss of one torch.optim.SGD(lr=0.01) step in train() mode
  NAME.after.npy    eval() logits after that step (updated weights and running statistics)
  NAME.p.<param>.npy  every parameter and BatchNorm running statistic after the step
and the same again in float64 (the model and input converted exactly: NAME.f64.dx.npy, ...).

--autocast: the --train export (BatchNormalization kept, Dropout the identity) and, in eval() mode
under torch.autocast(device_type='cpu', dtype=torch.bfloat16), PyTorch 1.13's CPU mixed precision:
  NAME.autocast.logits.npy   the logits (as float32; their dtype in NAME.autocast.dtype.txt)
  NAME.autocast.dx.npy       dL/dx of the mean cross-entropy (labels NAME.y.npy), the backward
                             after the autocast region, as torch.autocast's documentation asks;
                             where PyTorch has no bfloat16 backward for an op (1.13: ReLU6's
                             hardtanh), NAME.autocast.dx_error.txt holds its message instead
  NAME.logits.npy            the float32 logits of the same model
"""
import copy
import sys

import numpy as np
import torch
import torchvision


def randomise_batchnorm(m):
    """Non-trivial BatchNorm state (the defaults 0 and 1 would leave the normalisation untested)."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0.0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0.0, 0.1)
    return m


def build(name):
    torch.manual_seed(0)
    return randomise_batchnorm(getattr(torchvision.models, name)(weights=None))


def unfolded(name, size, batch):
    """The model without Dropout, in eval() mode, and its input (torch.manual_seed(1))."""
    m = build(name)
    for parent in list(m.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Dropout):
                setattr(parent, child_name, torch.nn.Identity())
    m.eval()
    torch.manual_seed(1)
    x = torch.rand(batch, 3, size, size)
    return m, x


def export_unfolded(m, x, path):
    """--train's ONNX form: BatchNormalization kept, initializers named as the parameters."""
    torch.onnx.export(m, x, path, opset_version=13, input_names=["x"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})


def train(out, batch, specs):
    torch.set_num_threads(1)
    for spec in specs:
        name, _, size = spec.partition(":")
        m, x = unfolded(name, int(size or 224), batch)
        export_unfolded(m, x, f"{out}/{name}.train.onnx")
        with torch.no_grad():
            classes = m(x).shape[1]
        torch.manual_seed(2)
        y = torch.randint(0, classes, (batch,))
        np.save(f"{out}/{name}.x.npy", x.numpy())
        np.save(f"{out}/{name}.y.npy", y.numpy().astype(np.int64))
        m64 = copy.deepcopy(m).double()
        for model, xs, pre in ((m, x, name), (m64, x.double(), name + ".f64")):
            xg = xs.clone().requires_grad_(True)
            torch.nn.functional.cross_entropy(model(xg), y).backward()
            model.zero_grad()
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            loss = torch.nn.functional.cross_entropy(model(xs), y)
            loss.backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                after = model(xs)
            np.save(f"{out}/{pre}.dx.npy", xg.grad.numpy())
            np.save(f"{out}/{pre}.loss.npy", np.array([loss.item()]))
            np.save(f"{out}/{pre}.after.npy", after.numpy())
            for k, v in model.state_dict().items():
                if v.dtype.is_floating_point:
                    np.save(f"{out}/{pre}.p.{k}.npy", v.numpy())


def autocast(out, batch, specs):
    torch.set_num_threads(1)
    for spec in specs:
        name, _, size = spec.partition(":")
        m, x = unfolded(name, int(size or 224), batch)
        export_unfolded(m, x, f"{out}/{name}.train.onnx")
        with torch.no_grad():
            y32 = m(x)
        torch.manual_seed(2)
        y = torch.randint(0, y32.shape[1], (batch,))
        xg = x.clone().requires_grad_(True)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = m(xg)
            loss = torch.nn.functional.cross_entropy(logits, y)
        try:
            loss.backward()
            np.save(f"{out}/{name}.autocast.dx.npy", xg.grad.float().numpy())
        except RuntimeError as e:  # PyTorch 1.13: "hardshrink_backward_cpu" not implemented for 'BFloat16' (ReLU6)
            with open(f"{out}/{name}.autocast.dx_error.txt", "w") as f:
                f.write(str(e) + "\n")
        np.save(f"{out}/{name}.x.npy", x.numpy())
        np.save(f"{out}/{name}.y.npy", y.numpy().astype(np.int64))
        np.save(f"{out}/{name}.logits.npy", y32.numpy())
        np.save(f"{out}/{name}.autocast.logits.npy", logits.detach().float().numpy())
        with open(f"{out}/{name}.autocast.dtype.txt", "w") as f:
            f.write(str(logits.dtype).replace("torch.", "") + "\n")


def main():
    if sys.argv[1] == "--train":
        return train(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    if sys.argv[1] == "--autocast":
        return autocast(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    out, batch = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    for spec in sys.argv[3:]:
        name, _, size = spec.partition(":")
        size = int(size or 224)
        m = build(name)
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
