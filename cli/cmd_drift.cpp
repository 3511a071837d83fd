// driftlab drift and driftlab attribute: the same weights under several policies, and which knob explains the difference.
#include "cli/commands.h"
#include "cli/common.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "drift/drift.h"
#include "quant/model_io.h"

namespace driftlab {
namespace cli {
namespace {

using nlohmann::json;

struct DriftOptions {
  std::string model, weights, policies = "tensorflow,theano,torch", json;
  DataOptions data;
  bool no_convert = false;
  double tol = 1e-5;
  int64_t localise_batch = 100;
  int threads = 0;
  DeviceOptions dev;
  int64_t quantize = 0, calib_batch = 32;  // > 0: fp32 and each policy's int8 model
};

void print_localisation(const Localisation& loc) {
  std::cout << "  " << std::left << std::setw(4) << "#" << std::setw(58) << "layer (under the first policy)"
            << std::right << std::setw(11) << "max|d|" << std::setw(11) << "max rel" << "\n";
  for (std::size_t i = 0; i < loc.layers.size(); ++i) {
    const auto& l = loc.layers[i];
    std::cout << "  " << std::left << std::setw(4) << l.index << std::setw(58) << l.layer << std::right << std::setw(11)
              << sci(l.max_abs) << std::setw(11) << sci(l.max_rel)
              << (static_cast<int>(i) == loc.first_divergent ? "  <- first beyond tolerance" : "") << "\n";
  }
}

void drift_cmd(const DriftOptions& o) {
  set_threads(o.threads);
  LoadedModel lm = quant::load_any_model(o.weights);
  check(!quant::is_quantized(lm), "drift: ", o.weights, " is an int8 model; give the fp32 model and --quantize N to "
        "compare its int8 forms");
  check_model_name(o.model, lm, o.weights);
  Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
  check_data_fits(lm, o.weights, test);
  ExecContext exec;
  std::cout << "drift: " << lm.model.name << " weights " << o.weights << " (trained under "
            << lm.model.policy.to_string() << "), " << test.images.dim(0) << " images of " << test.name << ", weights "
            << (o.no_convert ? "loaded as raw tensors" : "converted between conventions (flip, flatten order)")
            << ", " << where(o.dev) << "\n\n";
  std::cout << std::left << std::setw(40) << "policy" << std::right << std::setw(10) << "accuracy" << "\n";
  // Every policy is parsed before the first is run, so a misspelt knob costs no evaluation.
  std::vector<Policy> policies;
  for (const auto& n : split_policies(o.policies)) policies.push_back(Policy::parse(n));
  CrossPolicyOptions opt;
  opt.convert = !o.no_convert;
  opt.tolerance = o.tol;
  opt.localise_batch = o.localise_batch;
  opt.device = o.dev.parsed();
  Tensor calib;
  if (o.quantize > 0) {
    std::string from;
    calib = first_training_samples(lm, o.data, o.quantize, &from);
    opt.calib = &calib;
    opt.calib_batch = o.calib_batch;
    std::cout << "int8: the fp32 model under the first policy, then each policy's int8 model (its quant_* knobs), "
              << "calibrated on the " << from << "\n";
  }
  const CrossPolicyDrift d = cross_policy_drift(lm.model, policies, test, exec, opt, [](const PolicyAccuracy& a) {
    std::cout << std::left << std::setw(40) << a.label << std::right << std::setw(10) << pct(a.accuracy) << "\n";
  });
  std::cout << "\nlast-layer outputs (softmax probabilities), a against b as the reference (S3's y_c vs y_o):\n";
  std::cout << std::left << std::setw(30) << "a vs b" << std::right << std::setw(14) << "abs err mean" << std::setw(14)
            << "rel err mean" << std::setw(12) << "mean|d|" << std::setw(12) << "max|d|" << std::setw(12)
            << "misclass." << "\n";
  for (const PolicyPair& p : d.pairs)
    std::cout << std::left << std::setw(30)
              << (o.quantize > 0 ? p.a_label.substr(0, p.a_label.find(' ', 5)) + " vs " + p.b_label.substr(0, p.b_label.find(' ', 5))
                                 : p.a.preset + " vs " + p.b.preset)
              << std::right << std::setw(14)
              << sci(p.outputs.abs_err_mean) << std::setw(14) << sci(p.outputs.rel_err_mean) << std::setw(12)
              << sci(p.outputs.mean_abs) << std::setw(12) << sci(p.outputs.max_abs) << std::setw(12)
              << pct(p.outputs.misclassification) << "\n";
  for (const PolicyPair& p : d.pairs) {
    std::cout << "\nlocalisation, " << p.a_label << " vs " << p.b_label << " (first " << d.localised
              << " images; tolerance max|d|/max|b| > " << p.localisation.tolerance << "):\n";
    print_localisation(p.localisation);
    if (p.localisation.first_divergent < 0) std::cout << "  no layer diverges beyond the tolerance\n";
  }
  if (o.json.empty()) return;
  json out = {{"model", lm.model.name}, {"weights", o.weights}, {"weights_policy", lm.model.policy.to_string()},
              {"dataset", test.name}, {"n", test.images.dim(0)}, {"converted", !o.no_convert}, {"device", o.dev.device}};
  out.update(to_json(d));
  write_file_atomic(o.json, out.dump(2) + "\n");
}

struct AttributeCliOptions {
  std::string model, weights, from = "tensorflow", to = "torch", json;
  DataOptions data;
  bool no_convert = false;
  int train = 0;
  int64_t batch = 128;
  double lr = 0.01, momentum = 0.9;
  uint64_t seed = 1;
  int threads = 0;
  DeviceOptions dev;
  int64_t quantize = 0, calib_batch = 32;  // > 0: int8 models calibrated on the first N training samples
};

void attribute_cmd(const AttributeCliOptions& o) {
  set_threads(o.threads);
  LoadedModel lm = quant::load_any_model(o.weights);
  check(!quant::is_quantized(lm), "attribute: ", o.weights, " is an int8 model; give the fp32 model and --quantize N");
  check_model_name(o.model, lm, o.weights);
  Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
  check_data_fits(lm, o.weights, test);
  Dataset train;
  if (o.train > 0) train = load_split_for(lm, *o.data.loader, o.data, Split::train);
  ExecContext exec;
  AttributeOptions opt;
  opt.convert = !o.no_convert;
  opt.train_epochs = o.train;
  opt.train.batch = o.batch;
  opt.train.optim = {o.lr, o.momentum, false, 0.0};
  opt.train.seed = o.seed;
  opt.device = o.dev.parsed();
  Policy from = Policy::parse(o.from), to = Policy::parse(o.to);
  Tensor calib;
  if (o.quantize > 0) {
    std::string from;
    calib = first_training_samples(lm, o.data, o.quantize, &from);
    opt.calib = &calib;
    opt.calib_batch = o.calib_batch;
    std::cout << "int8: each policy's model quantized under its quant_* knobs, calibrated on the " << from
              << " (batches of " << o.calib_batch << ")\n";
  }
  Attribution a = attribute(lm.model, from, to, test, o.train > 0 ? &train : nullptr, exec, opt);
  std::cout << "attribute: " << lm.model.name << " weights " << o.weights << ", from " << a.from << " to " << a.to
            << ", " << test.images.dim(0) << " images of " << test.name << ", weights "
            << (o.no_convert ? "raw" : "converted") << ", " << where(o.dev) << "\n";
  if (a.trained)
    std::cout << "training " << o.train << " epoch(s) of " << train.images.dim(0) << " images from the same initial weights,"
              << " batch " << o.batch << ", lr " << o.lr << ", momentum " << o.momentum << ", seed " << o.seed << "\n";
  std::cout << "\ntotal: accuracy " << pct(a.from_accuracy) << " (from) vs " << pct(a.to_accuracy) << " (to); outputs mean|d| "
            << sci(a.total.mean_abs) << ", max|d| " << sci(a.total.max_abs) << ", misclassification "
            << pct(a.total.misclassification) << "\n";
  std::cout << "\neach knob flipped alone (from -> to), against the `from` policy:\n";
  std::cout << std::left << std::setw(24) << "knob" << std::setw(42) << "from -> to" << std::right << std::setw(11)
            << "mean|d|" << std::setw(11) << "max|d|" << std::setw(10) << "misclass" << std::setw(10) << "accuracy";
  if (a.trained) std::cout << std::setw(12) << "train loss" << std::setw(12) << "|dW|";
  std::cout << "\n";
  for (const auto& e : a.single) {
    std::cout << std::left << std::setw(24) << e.knob << std::setw(42) << (e.from_value + " -> " + e.to_value)
              << std::right << std::setw(11) << sci(e.vs_from.mean_abs) << std::setw(11) << sci(e.vs_from.max_abs)
              << std::setw(10) << pct(e.vs_from.misclassification) << std::setw(10) << pct(e.accuracy);
    if (a.trained) std::cout << std::setw(12) << fmt(e.train_loss, 4) << std::setw(12) << sci(e.weight_distance);
    std::cout << (e.changes_nothing ? "   changes nothing on this model" : "") << "\n";
  }
  std::cout << "\ncumulative path (knobs flipped one after another), distance to `to` "
            << (a.trained ? "(weight distance after training)" : "(mean|d| of the outputs)") << ":\n";
  std::cout << std::left << std::setw(24) << "after flipping" << std::right << std::setw(12) << "distance" << std::setw(10)
            << "explains" << std::setw(10) << "accuracy" << "\n";
  for (const auto& s : a.path)
    std::cout << std::left << std::setw(24) << s.knob << std::right << std::setw(12) << sci(s.distance_to_to)
              << std::setw(10) << pct(s.share) << std::setw(10) << pct(s.accuracy) << "\n";
  if (!o.json.empty()) write_file_atomic(o.json, to_json(a).dump(2) + "\n");
}

}  // namespace

void register_drift(CLI::App& app) {
  // drift
  auto dopt = std::make_shared<DriftOptions>();
  auto* dr = app.add_subcommand("drift", "the same weights under several policies: output errors, misclassification, localisation");
  dr->add_option("--weights", dopt->weights, "model file (.dlm)")->required();
  dr->add_option("--model", dopt->model, "checked against the model the file holds");
  dr->add_option("--policies", dopt->policies)->capture_default_str();
  dr->add_flag("--no-convert", dopt->no_convert, "load the tensors raw under each policy instead of converting them");
  dr->add_option("--tol", dopt->tol, "localisation tolerance on max|d|/max|b| per layer")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  dr->add_option("--localise-batch", dopt->localise_batch)->capture_default_str()->check(CLI::PositiveNumber);
  dr->add_option("--quantize", dopt->quantize,
                 "compare the fp32 model and each policy's int8 model (quantized under its quant_* knobs, calibrated on "
                 "the first N training samples); localisation by activation point")
      ->check(CLI::NonNegativeNumber);
  dr->add_option("--calib-batch", dopt->calib_batch, "calibration samples per forward (--quantize)")->capture_default_str();
  dr->add_option("--json", dopt->json, "also write the report as JSON");
  add_threads_option(dr, dopt->threads);
  add_data_options(dr, dopt->data);
  add_device_options(dr, dopt->dev);
  dr->callback([dopt] { drift_cmd(*dopt); });

  // attribute
  auto aopt = std::make_shared<AttributeCliOptions>();
  auto* at = app.add_subcommand("attribute", "flip the knobs between two policies one at a time: what explains the difference");
  at->add_option("--weights", aopt->weights, "model file (.dlm)")->required();
  at->add_option("--model", aopt->model, "checked against the model the file holds");
  at->add_option("--from", aopt->from)->capture_default_str();
  at->add_option("--to", aopt->to)->capture_default_str();
  at->add_option("--train", aopt->train, "also train N epochs from the same initial weights under each policy")
      ->check(CLI::NonNegativeNumber);
  at->add_option("--batch", aopt->batch)->capture_default_str();
  at->add_option("--lr", aopt->lr)->capture_default_str();
  at->add_option("--momentum", aopt->momentum)->capture_default_str();
  at->add_option("--seed", aopt->seed)->capture_default_str()->check(CLI::NonNegativeNumber);
  at->add_flag("--no-convert", aopt->no_convert);
  at->add_option("--quantize", aopt->quantize,
                 "compare int8 models: quantize under each policy's quant_* knobs, calibrated on the first N training "
                 "samples")
      ->check(CLI::NonNegativeNumber);
  at->add_option("--calib-batch", aopt->calib_batch, "calibration samples per forward (--quantize)")->capture_default_str();
  at->add_option("--json", aopt->json);
  add_threads_option(at, aopt->threads);
  add_data_options(at, aopt->data);
  add_device_options(at, aopt->dev);
  at->callback([aopt] { attribute_cmd(*aopt); });
}

}  // namespace cli
}  // namespace driftlab
