#include "driftlab/drift.h"

#include "core/error.h"
#include "driftlab/model.h"
#include "driftlab/policy.h"
#include "train/run.h"

namespace driftlab {

namespace {

// The fp32 model of a drift or attribute request: `what` names the command in the errors.
SavedModel open_fp32(const std::string& weights, const std::string& model, const char* what, const char* int8_hint) {
  SavedModel m = open_model(weights);
  check(!m.int8(), what, ": ", weights, " is an int8 model; give the fp32 model and --quantize N", int8_hint);
  check(model.empty() || model == m.model().name, "model: --model ", model, " does not match ", weights,
        ", which holds ", m.model().name);
  return m;
}

}  // namespace

DriftResult drift(const DriftRequest& r, DatasetLoader& loader, const DriftHooks& hooks) {
  SavedModel m = open_fp32(r.weights, r.model, "drift", " to compare its int8 forms");
  const Dataset test = load_data(m, loader, r.data, Split::test);
  ExecContext exec;
  DriftResult res;
  res.model = m.model().name;
  res.weights = r.weights;
  res.weights_policy = m.model().policy.to_string();
  res.dataset = test.name;
  res.n = test.images.dim(0);
  res.converted = r.convert;
  res.device = r.device;
  res.int8 = r.quantize > 0;
  if (hooks.on_start) hooks.on_start(res);
  std::vector<Policy> policies;
  for (const auto& n : split_policies(r.policies)) policies.push_back(Policy::parse(n));
  CrossPolicyOptions opt;
  opt.convert = r.convert;
  opt.tolerance = r.tolerance;
  opt.localise_batch = r.localise_batch;
  opt.device = parse_device(r.device);
  Tensor calib;
  if (r.quantize > 0) {
    std::string from;
    calib = first_training_samples(m.loaded, loader, r.data, r.quantize, &from);
    opt.calib = &calib;
    opt.calib_batch = r.calib_batch;
    if (hooks.on_calibration) hooks.on_calibration(from);
  }
  res.drift = cross_policy_drift(m.model(), policies, test, exec, opt, hooks.on_policy);
  return res;
}

AttributeResult attribute(const AttributeRequest& r, DatasetLoader& loader, const AttributeHooks& hooks) {
  SavedModel m = open_fp32(r.weights, r.model, "attribute", "");
  const Dataset test = load_data(m, loader, r.data, Split::test);
  Dataset train;
  if (r.train > 0) train = load_split_for(m.loaded, loader, r.data, Split::train);
  ExecContext exec;
  AttributeOptions opt;
  opt.convert = r.convert;
  opt.train_epochs = r.train;
  opt.train.batch = r.batch;
  opt.train.optim = {r.lr, r.momentum, false, 0.0};
  opt.train.seed = r.seed;
  opt.device = parse_device(r.device);
  const Policy from = Policy::parse(r.from), to = Policy::parse(r.to);
  Tensor calib;
  if (r.quantize > 0) {
    std::string source;
    calib = first_training_samples(m.loaded, loader, r.data, r.quantize, &source);
    opt.calib = &calib;
    opt.calib_batch = r.calib_batch;
    if (hooks.on_calibration) hooks.on_calibration(source);
  }
  AttributeResult res;
  res.model = m.model().name;
  res.dataset = test.name;
  res.n = test.images.dim(0);
  res.train_n = r.train > 0 ? train.images.dim(0) : 0;
  res.attribution = driftlab::attribute(m.model(), from, to, test, r.train > 0 ? &train : nullptr, exec, opt);
  return res;
}

}  // namespace driftlab
