// What the Python module's files share (python/driftlab_module.cpp, python/study_module.cpp): Ctrl-C
// and callback exceptions during calls that run without the GIL, JSON text as Python objects, and
// where ONNX Runtime is.
#pragma once
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "core/stop.h"
#include "driftlab/convert.h"

namespace driftlab {
namespace pymodule {

namespace py = pybind11;

// Ctrl-C during a long call, and an exception in a callback: the stop hook asks Python (under the
// GIL) whether a signal came; a callback's exception (a KeyboardInterrupt raised inside it too) is
// kept and stops the run at the next step, to be raised after it.
struct Interrupt {
  bool hit = false;                          // read and written under the GIL
  std::optional<py::error_already_set> error;  // a callback's
  bool check() {
    py::gil_scoped_acquire gil;
    if (!hit && PyErr_CheckSignals() != 0) {
      PyErr_Clear();  // raised again as KeyboardInterrupt after the call, with the run's state kept
      hit = true;
    }
    return hit || error.has_value();
  }
  // Runs a callback under the GIL, keeping what it raises.
  template <typename F>
  void call(F&& f) {
    py::gil_scoped_acquire gil;
    if (error) return;
    try {
      f();
    } catch (py::error_already_set& e) {
      if (e.matches(PyExc_KeyboardInterrupt))
        hit = true;
      else
        error = std::move(e);
    }
  }
};

// A long call without the GIL that Ctrl-C ends: the library polls the thread's StopScope
// (core/stop.h) before every kernel, and the scope asks Python whether a signal came; the call leaves by
// StopRequested before it writes its files (a convert's files written so far are removed as on any
// error), and KeyboardInterrupt("driftlab.NAME: interrupted ...") is raised. Training and studies
// stop at a checkpoint instead (hooks_for, study_run_py).
template <typename F>
auto interruptible(const char* name, F&& f) -> decltype(f()) {
  Interrupt stop;
  try {
    const StopScope scope([&stop] { return stop.check(); });
    py::gil_scoped_release nogil;
    return f();
  } catch (const StopRequested& s) {
    const std::string why = std::string("driftlab.") + name + ": interrupted (at " + s.where + "); nothing written";
    PyErr_SetString(PyExc_KeyboardInterrupt, why.c_str());
    throw py::error_already_set();
  }
}

// After a long call: a callback's exception raised as it was, else Ctrl-C as KeyboardInterrupt(why).
inline void raise_if_stopped(Interrupt& stop, const std::string& why) {
  if (stop.error) {
    stop.error->restore();
    throw py::error_already_set();
  }
  if (stop.hit) {
    PyErr_SetString(PyExc_KeyboardInterrupt, why.c_str());
    throw py::error_already_set();
  }
}

// JSON text as Python objects (the files the CLI writes: --json, cell.json).
inline py::object from_json(const std::string& text) { return py::module_::import("json").attr("loads")(text); }


// Where ONNX Runtime is, as the command finds it: DRIFTLAB_ORT_DIR, else the source tree's.
inline std::string ort_dir() { return ort_dir_or(std::string(DRIFTLAB_SOURCE_DIR) + "/tests/oracles/ort"); }

// Binds study_plan, study_run, study_status, study_tables and study_report (python/study_module.cpp).
void bind_study(py::module_& m);

}  // namespace pymodule
}  // namespace driftlab
