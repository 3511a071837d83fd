// The Python module (import driftlab): the library face (driftlab/*.h) bound with pybind11, NumPy in
// and out. docs/PYTHON.md shows it by example; python/driftlab/__init__.pyi types it.
//
// Arrays: an input array is read in place when it is C-contiguous, of a float dtype the call takes,
// 64-byte aligned and a multiple of 64 bytes long (the kernels load 64 bytes at a time:
// core/tensor.h Tensor::wrap); otherwise it is copied once. Outputs (logits, gradients, weights)
// are NumPy arrays over driftlab's own memory, kept alive by the array (no copy). Every call that
// computes releases the GIL; Ctrl-C stops train and the study calls at a checkpoint, and every
// other long call before it writes anything (python/module_common.h), raising KeyboardInterrupt.
// The study calls are in python/study_module.cpp.
//
// Errors: driftlab's own (a file and offset, a knob, an op) become driftlab.Error with the same
// message; a bad argument (not an array, a wrong dtype, shape or type) raises TypeError or
// ValueError naming the argument.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "driftlab/attack.h"
#include "driftlab/casebook.h"
#include "driftlab/convert.h"
#include "driftlab/drift.h"
#include "driftlab/evaluate.h"
#include "driftlab/model.h"
#include "driftlab/policy.h"
#include "driftlab/quantize.h"
#include "driftlab/robustness.h"
#include "driftlab/train.h"
#include "driftlab/weights.h"
#include "engine/build_info.h"
#include "report/attack.h"
#include "report/convert.h"
#include "report/drift.h"
#include "report/robustness.h"
#include "python/module_common.h"

namespace py = pybind11;
using namespace driftlab;
using namespace driftlab::pymodule;

namespace {

// ---- arrays ----

py::dtype np_dtype(DType d) {
  switch (d) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::i8: return py::dtype::of<int8_t>();
    case DType::u8: return py::dtype::of<uint8_t>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::i64: return py::dtype::of<int64_t>();
  }
  throw py::value_error("driftlab: unknown dtype");
}

// A NumPy array over t's memory (no copy), which keeps the memory alive.
py::array to_numpy(const Tensor& t) {
  check(t.channel_block() == 0, "python: a channel-blocked tensor has no NumPy view");
  auto* keep = new Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides(shape.size());
  py::ssize_t s = static_cast<py::ssize_t>(dtype_size(t.dtype()));
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return py::array(np_dtype(t.dtype()), shape, strides, const_cast<void*>(keep->raw()), owner);
}

bool is_float_array(const py::array& a) {
  return a.dtype().is(py::dtype::of<float>()) || a.dtype().is(py::dtype::of<double>());
}

// `obj` as a float tensor: read in place where it can be (see the file's comment), else copied.
Tensor float_input(const py::handle& obj, const char* arg) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(arg) + ": a NumPy array of float32 or float64 is needed, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  py::array a = py::reinterpret_borrow<py::array>(obj);
  if (!is_float_array(a))
    throw py::type_error(std::string(arg) + ": dtype " + std::string(py::str(a.dtype())) +
                         "; float32 or float64 is needed");
  const DType dt = a.dtype().is(py::dtype::of<float>()) ? DType::f32 : DType::f64;
  Shape shape(a.shape(), a.shape() + a.ndim());
  const std::size_t bytes = static_cast<std::size_t>(a.nbytes());
  const bool contiguous = (a.flags() & py::array::c_style) != 0;
  if (contiguous && bytes > 0 && bytes % 64 == 0 && reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0) {
    auto* ref = new py::object(a);  // the array lives as long as the tensor (released under the GIL)
    std::shared_ptr<unsigned char> mem(static_cast<unsigned char*>(const_cast<void*>(a.data())),
                                       [ref](unsigned char*) {
                                         py::gil_scoped_acquire gil;
                                         delete ref;
                                       });
    return Tensor::wrap(shape, dt, std::move(mem), bytes);
  }
  Tensor t = Tensor::empty(shape, dt);
  if (contiguous) {
    std::memcpy(t.raw(), a.data(), bytes);
  } else {  // NumPy lays it out in C order
    py::array c = py::array::ensure(a, py::array::c_style);
    std::memcpy(t.raw(), c.data(), bytes);
  }
  return t;
}

std::vector<int32_t> labels_input(const py::handle& obj, const char* arg, int64_t n, int64_t classes) {
  py::array a;
  try {
    a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(obj);
  } catch (const py::error_already_set&) {
  }
  if (!a || !py::isinstance<py::array>(obj) || a.ndim() != 1)
    throw py::type_error(std::string(arg) + ": a 1-D NumPy array of integer labels is needed");
  py::array orig = py::reinterpret_borrow<py::array>(obj);
  if (orig.dtype().kind() != 'i' && orig.dtype().kind() != 'u')
    throw py::type_error(std::string(arg) + ": dtype " + std::string(py::str(orig.dtype())) + "; integer labels are needed");
  if (a.shape(0) != n)
    throw py::value_error(std::string(arg) + ": " + std::to_string(a.shape(0)) + " labels for " + std::to_string(n) +
                          " inputs");
  std::vector<int32_t> out;
  const int64_t* d = static_cast<const int64_t*>(a.data());
  for (int64_t i = 0; i < n; ++i) {
    if (d[i] < 0 || d[i] >= classes)
      throw py::value_error(std::string(arg) + "[" + std::to_string(i) + "] = " + std::to_string(d[i]) +
                            " is outside 0.." + std::to_string(classes - 1));
    out.push_back(static_cast<int32_t>(d[i]));
  }
  return out;
}

py::dict eval_dict(const EvalResult& e) {
  py::dict d;
  d["loss"] = e.loss;
  d["accuracy"] = e.accuracy;
  d["n"] = e.n;
  return d;
}

py::dict epoch_dict(const EpochStats& e) {
  py::dict d;
  d["epoch"] = e.epoch;
  d["train_loss"] = e.train_loss;
  d["train_acc"] = e.train_acc;
  d["val_loss"] = e.val_loss;
  d["val_acc"] = e.val_acc;
  d["lr"] = e.lr;
  d["seconds"] = e.seconds;
  d["images_per_s"] = e.images_per_s;
  d["first_step_seconds"] = e.first_step_seconds;
  d["images_per_s_after_first"] = e.images_per_s_after_first;
  d["skipped_steps"] = e.skipped_steps;
  d["overflow_steps"] = e.overflow_steps;
  d["loss_scale"] = e.loss_scale;
  if (!e.step_losses.empty()) d["step_losses"] = e.step_losses;
  return d;
}

DataSpec data_spec(const std::string& dataset, const std::string& data_dir, int64_t limit) {
  DataSpec s;
  if (!dataset.empty()) s.dataset = dataset;
  s.data_dir = data_dir;
  if (limit < 0) throw py::value_error("limit: " + std::to_string(limit) + " must be >= 0");
  s.limit = limit;
  return s;
}

// ---- models ----

// A model in Python: a model file's content (fp32 or int8) with its metadata, or a zoo model built here.
struct PyModel {
  SavedModel m;
};

PyModel load_model_py(const std::string& path) {
  py::gil_scoped_release nogil;
  return {open_model(path)};
}

PyModel zoo_model_py(const std::string& name, const std::string& policy, uint64_t seed) {
  return {zoo_model(name, policy, seed)};
}

void save_py(PyModel& p, const std::string& path) {
  py::gil_scoped_release nogil;
  save_model_file(p.m, path);
}

py::array predict_py(PyModel& p, const py::handle& x) {
  Tensor in = float_input(x, "x");
  return to_numpy(interruptible("predict", [&] { return predict_inputs(p.m, in, "x"); }));
}

py::tuple gradient_py(PyModel& p, const py::handle& x, const py::handle& labels, bool train) {
  Tensor in = float_input(x, "x");
  Model& model = p.m.model();
  Shape want{in.rank() ? in.dim(0) : 0};
  want.insert(want.end(), model.input_shape.begin(), model.input_shape.end());
  if (in.shape() != want)
    throw py::value_error("x: shape " + shape_str(in.shape()) + ", model " + model.name + " takes " + shape_str(want));
  check(!p.m.int8(), "input_gradient: an int8 model has no gradient (take the fp32 model's, or quantize's straight-through mirror)");
  const std::vector<int32_t> y = labels_input(labels, "labels", in.dim(0), model.num_classes);
  const InputGradient g = interruptible("input_gradient", [&] {
    if (in.dtype() != model.dtype()) in = in.to(model.dtype());
    return open_runner(model, Device::cpu)->input_gradient(in, y, train ? Semantics::train : Semantics::inference);
  });
  return py::make_tuple(g.loss, to_numpy(g.logits), to_numpy(g.dx));
}

// name -> array over the parameter's memory (writing into it changes the model).
py::dict weights_py(PyModel& p, bool buffers) {
  py::dict d;
  auto params = p.m.model().net->named_params();
  if (buffers)
    for (auto& nb : p.m.model().net->named_buffers()) params.push_back(nb);
  for (auto& [name, prm] : params) d[py::str(name)] = to_numpy(prm->value);
  return d;
}

void set_weights_py(PyModel& p, const py::dict& w) {
  auto params = p.m.model().net->named_params();
  for (auto& nb : p.m.model().net->named_buffers()) params.push_back(nb);
  for (auto item : w) {
    const std::string key = py::str(item.first);
    Param* target = nullptr;
    for (auto& [name, prm] : params)
      if (name == key) target = prm;
    if (!target) throw py::key_error("weights: '" + key + "' is no parameter or buffer of " + p.m.model().name);
    py::array a = py::array::ensure(item.second);
    if (!a) throw py::type_error("weights['" + key + "']: a NumPy array is needed");
    Tensor& v = target->value;
    Shape shape(a.shape(), a.shape() + a.ndim());
    if (shape != v.shape())
      throw py::value_error("weights['" + key + "']: shape " + shape_str(shape) + ", the model's " + shape_str(v.shape()));
    if (!a.dtype().is(np_dtype(v.dtype())))
      throw py::type_error("weights['" + key + "']: dtype " + std::string(py::str(a.dtype())) + ", the model's " +
                           dtype_name(v.dtype()));
    py::array c = py::array::ensure(a, py::array::c_style);
    std::memcpy(v.raw(), c.data(), v.nbytes());
  }
}

// ---- train ----

py::dict train_result(const TrainRunResult& r) {
  py::dict d;
  d["policy"] = r.policy;
  py::list epochs;
  for (const EpochStats& e : r.epochs) epochs.append(epoch_dict(e));
  d["epochs"] = epochs;
  d["test"] = eval_dict(r.test);
  d["model_path"] = r.model_path;
  d["model_bytes"] = r.model_bytes;
  d["interrupted"] = r.interrupted;
  d["checkpoint_path"] = r.checkpoint_path;
  return d;
}

TrainRunHooks hooks_for(Interrupt& stop, const py::object& on_epoch, const py::object& on_step) {
  TrainRunHooks h;
  h.stop_requested = [&stop] { return stop.check(); };
  if (!on_epoch.is_none())
    h.on_epoch = [&stop, on_epoch](const EpochStats& e) { stop.call([&] { on_epoch(epoch_dict(e)); }); };
  if (!on_step.is_none())
    h.progress = [&stop, on_step](const Progress& p) {
      stop.call([&] {
        py::dict d;
        d["epoch"] = p.epoch;
        d["epochs"] = p.epochs;
        d["batch"] = p.batch;
        d["batches"] = p.batches;
        d["loss"] = p.loss;
        d["images_per_s"] = p.images_per_s;
        on_step(d);
      });
    };
  return h;
}

py::dict finish(const TrainRunResult& r, Interrupt& stop) {
  raise_if_stopped(stop, r.checkpoint_path.empty() ? "driftlab.train: interrupted (no out folder: nothing kept)"
                                                   : "driftlab.train: interrupted; its checkpoint is " +
                                                         r.checkpoint_path + " (driftlab.resume goes on from it)");
  return train_result(r);
}

py::dict train_py(const std::string& model, const std::string& policy, const std::string& dataset,
                  const std::string& data_dir, int64_t limit, int epochs, int64_t batch, const std::string& optimizer,
                  double lr, std::optional<double> momentum, const std::string& schedule, uint64_t seed,
                  bool normalize, bool step_loss, const std::string& out, const std::string& init,
                  int64_t checkpoint_every, const py::object& on_epoch, const py::object& on_step) {
  TrainRequest r;
  r.model = model;
  r.policy = policy;
  r.data = data_spec(dataset, data_dir, limit);
  r.epochs = epochs;
  r.batch = batch;
  r.optimizer = optimizer;
  r.lr = lr;
  r.momentum = momentum;
  r.schedule = schedule;
  r.seed = seed;
  r.normalize = normalize;
  r.step_loss = step_loss;
  r.out = out;
  r.init = init;
  r.checkpoint_every = checkpoint_every;
  Interrupt stop;
  TrainRunHooks h = hooks_for(stop, on_epoch, on_step);
  TrainRunResult res;
  {
    py::gil_scoped_release nogil;
    DatasetLoader loader;
    res = train(r, loader, h);
  }
  return finish(res, stop);
}

py::dict resume_py(const std::string& run_dir, const py::object& on_epoch, const py::object& on_step) {
  Interrupt stop;
  TrainRunHooks h = hooks_for(stop, on_epoch, on_step);
  TrainRunResult res;
  {
    py::gil_scoped_release nogil;
    DatasetLoader loader;
    res = resume(read_run_checkpoint(run_dir), run_dir, loader, h);
  }
  return finish(res, stop);
}

py::dict evaluate_py(const std::string& weights, const std::string& dataset, const std::string& data_dir,
                     int64_t limit, int64_t batch) {
  EvalRequest r;
  r.weights = weights;
  r.data = data_spec(dataset, data_dir, limit);
  r.batch = batch;
  const Evaluation e = interruptible("evaluate", [&] {
    DatasetLoader loader;
    return evaluate(r, loader);
  });
  py::dict d = eval_dict(e.test);
  d["model"] = e.model;
  d["policy"] = e.policy;
  return d;
}

py::dict quantize_py(const std::string& weights, const std::string& out, const std::string& scheme,
                     const std::string& knobs, const std::string& observer, const std::string& mode, int64_t calib,
                     int64_t calib_batch, const std::string& dataset, const std::string& data_dir, int64_t limit) {
  QuantizeRequest r;
  r.weights = weights;
  r.out = out;
  r.scheme = scheme;
  r.knobs = knobs;
  r.observer = observer;
  r.mode = mode;
  r.calib = calib;
  r.calib_batch = calib_batch;
  r.data = data_spec(dataset, data_dir, limit);
  const QuantizeResult q = interruptible("quantize", [&] {
    DatasetLoader loader;
    return quantize(r, loader);
  });
  py::dict d;
  d["model"] = q.model;
  d["policy"] = q.policy;
  d["dynamic"] = q.dynamic;
  d["calibration"] = q.calibration;
  d["calibration_samples"] = q.calibration_samples;
  py::list points;
  for (const auto& pt : q.int8.points) {
    py::dict p;
    p["name"] = pt.name;
    p["min"] = pt.range.min;
    p["max"] = pt.range.max;
    p["scale"] = pt.q.scale;
    p["zero_point"] = pt.q.zero_point;
    points.append(p);
  }
  d["points"] = points;
  return d;
}

// Attack settings given as the command's flags without "--" ("eps", "steps", "convention", "uint8",
// ...), each given one marked given (a convention fills the others); `who` starts the errors.
void read_settings(const py::dict& settings, AttackSettings& a, const std::string& who) {
  for (auto item : settings) {
    const std::string key = py::str(item.first);
    const py::handle v = item.second;
    auto real = [&](double& f) { f = v.cast<double>(); };
    auto integer = [&](auto& f) { f = v.cast<std::remove_reference_t<decltype(f)>>(); };
    auto text = [&](std::string& f) { f = v.cast<std::string>(); };
    auto flag = [&](bool& f) { f = v.cast<bool>(); };
    try {
      if (key == "attack") text(a.attack);
      else if (key == "eps") real(a.eps);
      else if (key == "step") real(a.step);
      else if (key == "lo") real(a.lo);
      else if (key == "hi") real(a.hi);
      else if (key == "max_epsilon") real(a.max_epsilon);
      else if (key == "steps") integer(a.steps);
      else if (key == "iterations") integer(a.iterations);
      else if (key == "max_directions") integer(a.max_directions);
      else if (key == "epsilons") integer(a.epsilons);
      else if (key == "max_pixels") integer(a.max_pixels);
      else if (key == "seed") integer(a.seed);
      else if (key == "batch") integer(a.batch);
      else if (key == "eps_units") text(a.eps_units);
      else if (key == "labels_from") text(a.labels_from);
      else if (key == "convention") text(a.convention);
      else if (key == "eps_schedule") text(a.eps_schedule);
      else if (key == "step_units") text(a.step_units);
      else if (key == "success") text(a.success);
      else if (key == "uint8") text(a.eight_bit);
      else if (key == "boundary_rules") text(a.boundary_rules);
      else if (key == "projection") text(a.projection);
      else if (key == "random_start") flag(a.random_start);
      else if (key == "restarts") integer(a.restarts);
      else if (key == "restart_select") text(a.restart_select);
      else if (key == "early_stop") flag(a.early_stop);
      else if (key == "transposed_index") flag(a.transposed_index);
      else throw py::type_error(who + ": unknown setting '" + key + "'");
    } catch (const py::cast_error&) {
      throw py::type_error(who + ": setting '" + key + "' has the wrong type (" +
                           std::string(py::str(py::type::of(v).attr("__name__"))) + ")");
    }
    std::string given = "--" + key;
    std::replace(given.begin(), given.end(), '_', '-');
    a.given.insert(given);
  }
}

// One attack (driftlab attack): settings as the command's flags without "--" ("eps", "steps",
// "convention", "uint8", ...), each given one marked given (a convention fills the others). Writes
// the command's files into `out` (result.json among them) and returns the adversarial examples.
py::array attack_py(const std::string& weights, const py::dict& settings, const std::string& input,
                    const std::string& labels, const std::vector<std::string>& judges, const std::string& dataset,
                    const std::string& data_dir, int64_t limit, const std::string& device, const std::string& out,
                    bool png) {
  AttackRequest r;
  r.weights = weights;
  r.input = input;
  r.labels = labels;
  r.judges = judges;
  r.data = data_spec(dataset, data_dir, limit);
  r.device = device;
  read_settings(settings, r.settings, "attack");
  const AttackOutcome o = interruptible("attack", [&] {
    AttackOutcome a = run_attack(r);
    report::write_attack(out, a, png);
    return a;
  });
  return to_numpy(o.adversarial);
}

// Models under attacks (driftlab robustness): models {name: file} in order (the first the
// baseline), crafts {name: source} (transfer), the attacks and their settings. Writes the command's
// files into `out` (robustness.json, robustness.csv, table.md) and returns robustness.json's text.
std::string robustness_py(const std::vector<std::pair<std::string, std::string>>& models,
                          const std::vector<std::pair<std::string, std::string>>& crafts, const std::string& attacks,
                          int repeats, int64_t samples, const py::dict& settings, const std::string& dataset,
                          const std::string& data_dir, int64_t limit, const std::string& device, const std::string& out) {
  RobustnessRequest r;
  for (const auto& [name, file] : models) r.models.push_back(name + "=" + file);
  for (const auto& [name, source] : crafts) r.crafts.push_back(name + "=" + source);
  r.attacks = attacks;
  r.repeats = repeats;
  r.samples = samples;
  read_settings(settings, r.settings, "robustness");
  r.data = data_spec(dataset, data_dir, limit);
  r.device = device;
  interruptible("robustness", [&] { report::write_robustness(out, run_robustness(r)); });
  return out + "/robustness.json";
}

// The conversion measurement (driftlab convert --to onnx): driftlab against ONNX Runtime on the test
// split; writes the command's files into `out` and returns convert.json's text.
std::string convert_py(const std::string& weights, const std::string& out, int64_t opset, const std::string& quant_form,
                       int64_t repeats, const std::string& adversarial, const std::string& dataset,
                       const std::string& data_dir, int64_t limit) {
  ConversionRequest r;
  r.weights = weights;
  r.out = out;
  r.onnx.opset = opset;
  r.onnx.quant_form = quant_form;
  r.repeats = repeats;
  r.adversarial = adversarial;
  r.ort_dir = ort_dir();
  r.data = data_spec(dataset, data_dir, limit);
  const ConversionResult c = interruptible("convert", [&] {
    DatasetLoader loader;
    ConversionResult m = measure_conversion(r, loader);
    report::write_conversion_files(out, m);
    return m;
  });
  return report::conversion_json(c);
}

// ---- weights as .npy files in a framework's layout (driftlab weights export / import) ----

std::vector<std::string> weights_export_py(const std::string& weights, const std::string& out, bool driftlab_layout) {
  WeightsExportRequest r;
  r.weights = weights;
  r.out = out;
  r.driftlab_layout = driftlab_layout;
  std::vector<std::string> paths;
  py::gil_scoped_release nogil;
  for (const NpyFile& f : export_weights(r)) paths.push_back(f.path);
  return paths;
}

void weights_import_py(const std::string& model, const std::string& from, const std::string& out,
                       const std::string& policy, bool driftlab_layout) {
  WeightsImportRequest r;
  r.model = model;
  r.from = from;
  r.out = out;
  r.policy = policy;
  r.driftlab_layout = driftlab_layout;
  py::gil_scoped_release nogil;
  import_weights(r);
}

// ---- export, import ----

py::dict export_py(const std::string& weights, const std::string& out, const std::string& format, int64_t opset,
                   const std::string& quant_form) {
  ModelExportRequest r;
  r.weights = weights;
  r.out = out;
  r.format = format;
  r.onnx.opset = opset;
  r.onnx.quant_form = quant_form;
  ModelExportResult e;
  {
    py::gil_scoped_release nogil;
    e = export_model(r);
  }
  py::dict d;
  d["model"] = e.model;
  d["policy"] = e.policy;
  d["int8"] = e.int8;
  d["lines"] = e.lines;
  d["notes"] = e.notes;
  d["bytes"] = e.bytes;
  d["num_nodes"] = e.num_nodes;
  d["num_initializers"] = e.num_initializers;
  return d;
}

py::dict import_py(const std::string& file, const std::string& out, const std::string& format, const std::string& as,
                   const std::string& policy) {
  OnnxImportRequest r;
  r.file = file;
  r.out = out;
  r.format = format;
  r.as = as;
  r.policy = policy;
  OnnxImportResult i;
  {
    py::gil_scoped_release nogil;
    i = import_onnx_model(r);
  }
  py::dict d;
  d["producer"] = i.producer;
  d["opset"] = i.opset;
  d["model"] = i.model;
  d["mapping"] = i.mapping;
  d["zoo_mismatch"] = i.zoo_mismatch;
  d["converted"] = i.converted;
  return d;
}

// A dataset split as NumPy arrays: (images float32 (N, ...), labels int32 (N,)).
py::tuple dataset_py(const std::string& name, const std::string& split, int64_t limit, const std::string& data_dir) {
  if (split != "train" && split != "test") throw py::value_error("split: '" + split + "' (train or test)");
  const DataSpec spec = data_spec(name, data_dir, limit);
  Dataset d;
  {
    py::gil_scoped_release nogil;
    DatasetLoader loader;
    d = loader.load(spec, split == "train" ? Split::train : Split::test);
  }
  Tensor labels = Tensor::empty({static_cast<int64_t>(d.labels.size())}, DType::i32);
  std::copy(d.labels.begin(), d.labels.end(), labels.data<int32_t>());
  return py::make_tuple(to_numpy(d.images), to_numpy(labels));
}

py::object drift_py(const std::string& weights, const std::string& policies, bool convert, double tolerance,
                    int64_t localise_batch, int64_t quantize, int64_t calib_batch, const std::string& dataset,
                    const std::string& data_dir, int64_t limit) {
  DriftRequest r;
  r.weights = weights;
  r.policies = policies;
  r.convert = convert;
  r.tolerance = tolerance;
  r.localise_batch = localise_batch;
  r.quantize = quantize;
  r.calib_batch = calib_batch;
  r.data = data_spec(dataset, data_dir, limit);
  const std::string text = interruptible("drift", [&] {
    DatasetLoader loader;
    return report::drift_json(drift(r, loader));
  });
  return from_json(text);
}

py::object attribute_py(const std::string& weights, const std::string& from, const std::string& to, bool convert,
                        int train_epochs, int64_t batch, double lr, double momentum, uint64_t seed, int64_t quantize,
                        int64_t calib_batch, const std::string& dataset, const std::string& data_dir, int64_t limit) {
  AttributeRequest r;
  r.weights = weights;
  r.from = from;
  r.to = to;
  r.convert = convert;
  r.train = train_epochs;
  r.batch = batch;
  r.lr = lr;
  r.momentum = momentum;
  r.seed = seed;
  r.quantize = quantize;
  r.calib_batch = calib_batch;
  r.data = data_spec(dataset, data_dir, limit);
  const std::string text = interruptible("attribute", [&] {
    DatasetLoader loader;
    return report::attribute_json(attribute(r, loader));
  });
  return from_json(text);
}

py::dict knobs_of(const Policy& p) {
  py::dict d;
  for (const KnobInfo& k : knob_table()) d[py::str(k.name)] = p.get(k.name);
  return d;
}

}  // namespace

PYBIND11_MODULE(_driftlab, m) {
  m.doc() = "driftlab: every framework convention a named knob (the C++ library face, bound with pybind11)";
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  error.doc() = "A driftlab error: the message names the file and offset, the knob, the op or the option.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  py::class_<Policy>(m, "Policy", "A set of framework conventions: a preset (tensorflow, theano, torch) and knob overrides.")
      .def(py::init([](const std::string& s) { return Policy::parse(s); }), py::arg("spec") = "torch",
           "Parses 'preset,knob=value,...' (an unknown knob or value raises driftlab.Error naming it).")
      .def_static("parse", &Policy::parse, py::arg("spec"), "The Policy of 'preset,knob=value,...' (as Policy(spec)).")
      .def_static("tensorflow", &Policy::tensorflow, "The tensorflow preset: TensorFlow/Keras conventions.")
      .def_static("theano", &Policy::theano, "The theano preset: Theano/Lasagne conventions.")
      .def_static("torch", &Policy::torch, "The torch preset: PyTorch conventions.")
      .def("__str__", &Policy::to_string, "The canonical string: the preset, then every knob that differs from it.")
      .def("__repr__", [](const Policy& p) { return "driftlab.Policy('" + p.to_string() + "')"; })
      .def("__eq__", [](const Policy& a, const Policy& b) { return a.to_full_string() == b.to_full_string(); })
      .def("get", &Policy::get, py::arg("knob"), "A knob's value as its string.")
      .def("knobs", &knobs_of, "Every knob and its value, as a dict of strings.")
      .def(
          "diff",
          [](const Policy& a, const Policy& b) {
            py::list out;
            for (const KnobDiff& d : diff(a, b)) out.append(py::make_tuple(d.knob, d.a, d.b));
            return out;
          },
          py::arg("other"), "The knobs where the two differ: [(knob, this value, other's value)].");

  m.def(
      "knob_table",
      [] {
        py::list out;
        for (const KnobInfo& k : knob_table()) {
          py::dict d;
          d["name"] = k.name;
          d["group"] = k.group;
          d["values"] = k.values;
          d["what"] = k.what;
          d["tensorflow"] = k.tensorflow;
          d["theano"] = k.theano;
          d["torch"] = k.torch;
          d["source"] = k.source;
          out.append(d);
        }
        return out;
      },
      "Every knob: its group, values, what it changes, the behaviour each preset copies and where the framework defines it.");

  py::class_<PyModel>(m, "Model", "A model: a model file's content (fp32 or int8) or a zoo model built here.")
      .def_static("load", &load_model_py, py::arg("path"), "Reads a .dlm (fp32 or int8; errors name the file and offset).")
      .def_static("zoo", &zoo_model_py, py::arg("name"), py::arg("policy") = "torch", py::arg("seed") = 1,
                  "A zoo model (lenet1, lenet5, resnet20, ...) initialised under the policy's initialisers.")
      .def_static(
          "graph",
          [](const py::object& spec, const std::string& policy, uint64_t seed) {
            const std::string text = py::isinstance<py::str>(spec) ? spec.cast<std::string>()
                                                                   : py::module_::import("json").attr("dumps")(spec).cast<std::string>();
            return PyModel{graph_model_from_spec(text, policy, seed)};
          },
          py::arg("spec"), py::arg("policy") = "torch", py::arg("seed") = 1,
          "A graph model from its spec (a dict, or its JSON text: docs/GRAPH_MODELS.md) under the policy, weights "
          "from the policy's initialisers; errors name the node.")
      .def("save", &save_py, py::arg("path"), "Writes the model file (int8 models as quantize writes them).")
      .def_property_readonly("name", [](PyModel& p) { return p.m.model().name; }, "The model's name (lenet5, graph, ...).")
      .def_property_readonly("policy", [](PyModel& p) { return p.m.model().policy.to_string(); }, "Its Policy string.")
      .def_property_readonly("input_shape", [](PyModel& p) { return p.m.model().input_shape; }, "The per-sample input shape.")
      .def_property_readonly("num_classes", [](PyModel& p) { return p.m.model().num_classes; }, "The number of logits.")
      .def_property_readonly("int8", [](PyModel& p) { return p.m.int8(); }, "True for a quantized model.")
      .def_property_readonly("path", [](PyModel& p) { return p.m.path; }, "The file it was read from or last saved to ('' for a zoo model not saved).")
      .def("predict", &predict_py, py::arg("x"),
           "Logits (N, classes) of x (N, input shape), float32 or float64, inference semantics; x is read in place "
           "when C-contiguous, 64-byte aligned and a multiple of 64 bytes long, else copied; never written.")
      .def("input_gradient", &gradient_py, py::arg("x"), py::arg("labels"), py::arg("train") = false,
           "(loss, logits, dL/dx) under the policy's loss; train=True: training semantics (BatchNorm batch "
           "statistics, dropout). fp32 models only.")
      .def("weights", &weights_py, py::arg("buffers") = false,
           "name -> NumPy array over the parameter's own memory (no copy: writing into it changes the model); "
           "buffers=True adds BatchNorm statistics and int8 buffers.")
      .def("set_weights", &set_weights_py, py::arg("weights"),
           "Copies arrays into the named parameters (shape and dtype must match; errors name the key).");

  m.def("train", &train_py, py::arg("model") = "lenet5", py::arg("policy") = "torch", py::arg("dataset") = "fashion-mnist",
        py::arg("data_dir") = "", py::arg("limit") = 0, py::arg("epochs") = 1, py::arg("batch") = 128,
        py::arg("optimizer") = "sgd", py::arg("lr") = 0.01, py::arg("momentum") = py::none(), py::arg("schedule") = "",
        py::arg("seed") = 1, py::arg("normalize") = false, py::arg("step_loss") = false, py::arg("out") = "",
        py::arg("init") = "", py::arg("checkpoint_every") = 0, py::arg("on_epoch") = py::none(),
        py::arg("on_step") = py::none(),
        "Trains as `driftlab train` does; returns {'policy', 'epochs': [per-epoch dicts], 'test', 'model_path', ...}. "
        "on_epoch(dict) after each epoch, on_step(dict) after each step. Ctrl-C stops between two steps "
        "(KeyboardInterrupt; with out=, the checkpoint is kept for resume).");
  m.def("resume", &resume_py, py::arg("run_dir"), py::arg("on_epoch") = py::none(), py::arg("on_step") = py::none(),
        "Goes on with the run in run_dir from its checkpoint; the files are the uninterrupted run's.");
  m.def("evaluate", &evaluate_py, py::arg("weights"), py::arg("dataset") = "", py::arg("data_dir") = "",
        py::arg("limit") = 0, py::arg("batch") = 1000, "The test split's {'loss', 'accuracy', 'n', 'model', 'policy'}.");
  m.def("quantize", &quantize_py, py::arg("weights"), py::arg("out"), py::arg("scheme") = "torch_qnnpack",
        py::arg("knobs") = "", py::arg("observer") = "", py::arg("mode") = "auto", py::arg("calib") = 1000,
        py::arg("calib_batch") = 32, py::arg("dataset") = "", py::arg("data_dir") = "", py::arg("limit") = 0,
        "int8 post-training quantization of a model file into `out` under a toolchain's scheme; returns the points "
        "(name, observed range, scale, zero point).");
  m.def("dataset", &dataset_py, py::arg("name") = "fashion-mnist", py::arg("split") = "test", py::arg("limit") = 0,
        py::arg("data_dir") = "",
        "A split as the engine reads it: (images float32 (N, ...) in [0, 1], labels int32 (N,)); limit: the first N.");
  m.def("_attack", &attack_py, py::arg("weights"), py::arg("settings"), py::arg("input") = "", py::arg("labels") = "",
        py::arg("judges") = std::vector<std::string>{}, py::arg("dataset") = "", py::arg("data_dir") = "",
        py::arg("limit") = 0, py::arg("device") = "cpu", py::arg("out") = "", py::arg("png") = false,
        "(driftlab.attack calls this) one attack; writes the command's files into out, returns the examples.");
  m.def("convert", [](const std::string& weights, const std::string& out, int64_t opset, const std::string& quant_form,
                       int64_t repeats, const std::string& adversarial, const std::string& dataset,
                       const std::string& data_dir, int64_t limit) {
          return from_json(convert_py(weights, out, opset, quant_form, repeats, adversarial, dataset, data_dir, limit));
        },
        py::arg("weights"), py::arg("out"), py::arg("opset") = 13, py::arg("quant_form") = "qdq", py::arg("repeats") = 3,
        py::arg("adversarial") = "", py::arg("dataset") = "", py::arg("data_dir") = "", py::arg("limit") = 0,
        "The conversion measurement of `driftlab convert --to onnx`: the model exported, run by ONNX Runtime "
        "(onnxruntime-node: DRIFTLAB_ORT_DIR, else the source tree's tests/oracles/ort) and by driftlab on the test "
        "split; accuracy, output errors, times and sizes on both sides (and an attack folder's examples judged by "
        "both). Writes model.onnx, convert.json and convert.csv into `out`; returns convert.json as a dict.");
  m.def("_weights_export", &weights_export_py, py::arg("weights"), py::arg("out"), py::arg("driftlab_layout") = false,
        "(driftlab.framework_weights calls this) writes OUT/<name>.npy per parameter; returns the paths.");
  m.def("weights_import", &weights_import_py, py::arg("model"), py::arg("from_dir"), py::arg("out"),
        py::arg("policy") = "torch", py::arg("driftlab_layout") = false,
        "Builds a zoo model under `policy` from a folder of <name>.npy files in that policy's framework layout (as "
        "framework_weights or `driftlab weights export` writes them) and writes the model file `out`, as `driftlab "
        "weights import` does; a NaN, an infinity or a value beyond the dtype is refused naming the file.");
  m.def("export", &export_py, py::arg("weights"), py::arg("out"), py::arg("format") = "onnx", py::arg("opset") = 13,
        py::arg("quant_form") = "qdq",
        "Writes a model file as ONNX (fp32 or int8: qdq or qop) or as a TF.js layers model (format='tfjs': `out` is "
        "the folder), as `driftlab export` does; returns what each layer became.");
  m.def("import_model", &import_py, py::arg("file"), py::arg("out"), py::arg("format") = "auto", py::arg("as_") = "auto",
        py::arg("policy") = "",
        "Imports an ONNX file or a Keras / TF.js model.json into a model file (the zoo where it maps, else a graph "
        "model), as `driftlab import` does; returns the node-by-node mapping.");
  bind_study(m);
  m.def("_robustness", &robustness_py, py::arg("models"), py::arg("crafts"), py::arg("attacks"), py::arg("repeats"),
        py::arg("samples"), py::arg("settings"), py::arg("dataset"), py::arg("data_dir"), py::arg("limit"),
        py::arg("device"), py::arg("out"), "(driftlab.robustness calls this) writes the command's files into out.");
  m.def("drift", &drift_py, py::arg("weights"), py::arg("policies") = "tensorflow,theano,torch",
        py::arg("convert") = true, py::arg("tolerance") = 1e-5, py::arg("localise_batch") = 100,
        py::arg("quantize") = 0, py::arg("calib_batch") = 32, py::arg("dataset") = "", py::arg("data_dir") = "",
        py::arg("limit") = 0,
        "The same weights under several policies, as `driftlab drift --json` writes it (a dict): each policy's "
        "accuracy, every pair's output errors and the first layer where they part.");
  m.def("attribute", &attribute_py, py::arg("weights"), py::arg("from_policy") = "tensorflow",
        py::arg("to_policy") = "torch", py::arg("convert") = true, py::arg("train") = 0, py::arg("batch") = 128,
        py::arg("lr") = 0.01, py::arg("momentum") = 0.9, py::arg("seed") = 1, py::arg("quantize") = 0,
        py::arg("calib_batch") = 32, py::arg("dataset") = "", py::arg("data_dir") = "", py::arg("limit") = 0,
        "Which knob explains the difference between two policies, as `driftlab attribute --json` writes it (a dict): "
        "each knob flipped alone, and the path from one policy to the other with each step's share.");
  m.def(
      "case_list",
      [] {
        py::list out;
        for (const CaseInfo& c : casebook()) {
          py::dict d;
          d["name"] = c.name, d["area"] = c.area, d["thread"] = c.thread, d["quote"] = c.quote;
          d["setting"] = c.setting, d["knobs"] = c.knobs, d["measure"] = c.measure, d["fix"] = c.fix;
          d["present_above"] = c.present_above, d["gone_at_most"] = c.gone_at_most;
          out.append(d);
        }
        return out;
      },
      "The casebook (docs/casebook/): each publicly reported discrepancy as a dict (name, area, thread, quote, setting, "
      "knobs, measure, present_above, gone_at_most, fix), as `driftlab case list` prints them.");
  m.def(
      "case_run",
      [](const std::string& name) {
        const CaseRun r = run_case(name);
        py::dict d;
        d["name"] = name, d["reporter"] = r.result.reporter, d["flipped"] = r.result.flipped;
        d["present"] = r.present, d["gone"] = r.gone, d["reproduced"] = r.reproduced(), d["report"] = case_report(r);
        return d;
      },
      py::arg("name"),
      "Runs one case: the measure under the reporter's setting and with the knob(s) flipped, whether the symptom is "
      "present and gone, and the printed report (`driftlab case run NAME`). Raises driftlab.Error naming an unknown case.");
  m.def(
      "_input_address",
      [](const py::handle& x) { return reinterpret_cast<std::uintptr_t>(float_input(x, "x").raw()); }, py::arg("x"),
      "(tests) the address driftlab reads x from: x's own memory when read in place.");
}
