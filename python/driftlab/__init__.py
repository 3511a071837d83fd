"""driftlab in Python: every framework convention a named knob.

The C++ library face bound with pybind11 (python/driftlab_module.cpp); docs/PYTHON.md shows it by
example. NumPy arrays in and out: inputs read in place where their layout allows, outputs viewing
driftlab's own memory. driftlab's errors raise driftlab.Error with the message the command line
prints (the file and offset, the knob, the op); a bad argument raises TypeError or ValueError
naming it.
"""
from ._driftlab import (  # noqa: F401
    Error,
    Model,
    Policy,
    attribute,
    dataset,
    drift,
    evaluate,
    knob_table,
    quantize,
    resume,
    train,
)
from ._driftlab import _input_address  # noqa: F401  (tests: where driftlab reads an array from)

__all__ = ["Error", "Model", "Policy", "attribute", "dataset", "drift", "evaluate", "knob_table", "quantize", "resume", "train"]
