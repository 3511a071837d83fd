"""driftlab in Python: every framework convention a named knob.

The C++ library face bound with pybind11 (python/driftlab_module.cpp); docs/PYTHON.md shows it by
example. NumPy arrays in and out: inputs read in place where their layout allows, outputs viewing
driftlab's own memory. driftlab's errors raise driftlab.Error with the message the command line
prints (the file and offset, the knob, the op); a bad argument raises TypeError or ValueError
naming it.
"""
from . import _driftlab
from ._driftlab import (  # noqa: F401
    Error,
    Model,
    Policy,
    attribute,
    case_list,
    case_run,
    convert,
    dataset,
    drift,
    evaluate,
    export,
    import_model,
    knob_table,
    quantize,
    resume,
    study_plan,
    study_report,
    study_run,
    study_status,
    study_tables,
    train,
    weights_import,
)
from ._driftlab import _input_address  # noqa: F401  (tests: where driftlab reads an array from)

import json as _json
import os as _os
import shutil as _shutil
import tempfile as _tempfile


def attack(weights, attack="fgsm", x=None, labels=None, judges=(), out=None, png=False, dataset="", data_dir="",
           limit=0, device="cpu", **settings):
    """One adversarial attack on a model file, as `driftlab attack` runs it.

    attack: fgsm | bim | pgd | boundary | single-pixel. x, labels: NumPy arrays to attack (the model's
    input shape; integer labels), else the test split of `dataset` (the model file's by default).
    judges: model files that judge the examples too (transfer: crafted on fp32, judged on int8).
    settings: the command's flags without "--", e.g. eps=0.05, steps=10, convention="foolbox2",
    uint8="round" (the 8-bit round trip), seed=1; a convention fills the settings not given.
    out: the folder for the command's files (result.json, samples.csv, adversarial.npy, png/ with
    png=True); none given: a temporary folder, removed.

    Returns (result, adversarial): result.json's content as a dict, and the examples (N, ...).
    """
    tmp = _tempfile.mkdtemp(prefix="driftlab_attack_")
    try:
        inp = lab = ""
        if x is not None:
            import numpy as _np
            inp = _os.path.join(tmp, "x.npy")
            _np.save(inp, _np.ascontiguousarray(x))
            if labels is not None:
                lab = _os.path.join(tmp, "labels.npy")
                _np.save(lab, _np.asarray(labels))
        elif labels is not None:
            raise ValueError("labels: given without x")
        folder = out if out is not None else _os.path.join(tmp, "out")
        adv = _driftlab._attack(weights, dict(settings, attack=attack), inp, lab, list(judges), dataset, data_dir,
                                limit, device, folder, png)
        with open(_os.path.join(folder, "result.json")) as f:
            return _json.load(f), adv
    finally:
        _shutil.rmtree(tmp, ignore_errors=True)

__all__ = ["Error", "Model", "Policy", "attack", "attribute", "case_list", "case_run", "convert", "dataset", "drift", "evaluate", "export", "import_model", "knob_table", "quantize", "resume", "robustness", "study_plan", "study_report", "study_run",
           "study_status", "study_tables", "train", "framework_weights",
           "weights_import"]



def robustness(models, attacks="fgsm,boundary", crafts=None, repeats=1, samples=0, out=None, dataset="",
               data_dir="", limit=0, device="cpu", **settings):
    """Models under attacks, as `driftlab robustness` runs it, over the inputs every model gets right.

    models: {name: model file} in order (a dict, or (name, file) pairs); the first is the baseline
    of the Wilcoxon/A12 comparisons. crafts: {name: source name}: that model's white-box examples
    are crafted on the source (transfer; without it an int8 model is attacked through its
    straight-through mirror). attacks: "fgsm,bim,pgd,boundary,single-pixel" (comma-separated).
    repeats: runs per attack (seeds seed, seed + 1, ...). settings: the command's flags without
    "--" (eps=..., convention=...). out: the folder for robustness.json, robustness.csv and
    table.md (none: a temporary folder, removed). Returns robustness.json's content as a dict.
    """
    pairs = list(models.items()) if isinstance(models, dict) else [tuple(m) for m in models]
    craft_pairs = list((crafts or {}).items())
    tmp = _tempfile.mkdtemp(prefix="driftlab_robustness_")
    try:
        folder = out if out is not None else tmp
        path = _driftlab._robustness(pairs, craft_pairs, attacks, repeats, samples, dict(settings), dataset,
                                     data_dir, limit, device, folder)
        with open(path) as f:
            return _json.load(f)
    finally:
        _shutil.rmtree(tmp, ignore_errors=True)



def framework_weights(weights, driftlab_layout=False):
    """A model file's parameters as {name: array} in its policy's framework layout (TensorFlow's HWIO
    kernels and (in, out) dense matrices under the tensorflow preset, PyTorch's OIHW and (out, in)
    under torch), as `driftlab weights export` writes them; driftlab_layout=True: driftlab's own.
    The arrays are copies (Model.weights() gives views of driftlab's own layout)."""
    import numpy as _np
    tmp = _tempfile.mkdtemp(prefix="driftlab_weights_")
    try:
        out = {}
        for path in _driftlab._weights_export(weights, tmp, driftlab_layout):
            out[_os.path.basename(path)[:-len(".npy")]] = _np.load(path)
        return out
    finally:
        _shutil.rmtree(tmp, ignore_errors=True)
