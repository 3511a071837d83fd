// driftlab drift and driftlab attribute: the same weights under several policies, and which knob
// explains the difference (driftlab/drift.h); here the options, the tables printed, and the JSON
// files (report/drift.h).
#include "cli/commands.h"
#include "cli/common.h"

#include <iomanip>
#include <iostream>
#include <memory>

#include "driftlab/drift.h"
#include "engine/io/container.h"
#include "report/drift.h"

namespace driftlab {
namespace cli {
namespace {

struct DriftOptions {
  DriftRequest req;  // the data, device and --no-convert copied in
  std::string json;
  DataOptions data;
  bool no_convert = false;
  int threads = 0;
  DeviceOptions dev;
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
  DriftRequest r = o.req;
  r.data = o.data;
  r.convert = !o.no_convert;
  r.device = o.dev.device;
  DriftHooks hooks;
  hooks.on_start = [&o](const DriftStart& s) {
    std::cout << "drift: " << s.model << " weights " << s.weights << " (trained under " << s.weights_policy << "), "
              << s.n << " images of " << s.dataset << ", weights "
              << (o.no_convert ? "loaded as raw tensors" : "converted between conventions (flip, flatten order)")
              << ", " << where(o.dev) << "\n\n";
    std::cout << std::left << std::setw(40) << "policy" << std::right << std::setw(10) << "accuracy" << "\n";
  };
  hooks.on_calibration = [](const std::string& from) {
    std::cout << "int8: the fp32 model under the first policy, then each policy's int8 model (its quant_* knobs), "
              << "calibrated on the " << from << "\n";
  };
  hooks.on_policy = [](const PolicyAccuracy& a) {
    std::cout << std::left << std::setw(40) << a.label << std::right << std::setw(10) << pct(a.accuracy) << "\n";
  };
  const DriftResult res = drift(r, *o.data.loader, hooks);
  const CrossPolicyDrift& d = res.drift;
  std::cout << "\nlast-layer outputs (softmax probabilities), a against b as the reference:\n";
  std::cout << std::left << std::setw(30) << "a vs b" << std::right << std::setw(14) << "abs err mean" << std::setw(14)
            << "rel err mean" << std::setw(12) << "mean|d|" << std::setw(12) << "max|d|" << std::setw(12)
            << "misclass." << "\n";
  for (const PolicyPair& p : d.pairs)
    std::cout << std::left << std::setw(30)
              << (res.int8 ? p.a_label.substr(0, p.a_label.find(' ', 5)) + " vs " + p.b_label.substr(0, p.b_label.find(' ', 5))
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
  if (!o.json.empty()) write_file_atomic(o.json, report::drift_json(res));
}

struct AttributeCliOptions {
  AttributeRequest req;  // the data, device and --no-convert copied in
  std::string json;
  DataOptions data;
  bool no_convert = false;
  int threads = 0;
  DeviceOptions dev;
};

void attribute_cmd(const AttributeCliOptions& o) {
  set_threads(o.threads);
  AttributeRequest r = o.req;
  r.data = o.data;
  r.convert = !o.no_convert;
  r.device = o.dev.device;
  AttributeHooks hooks;
  hooks.on_calibration = [&r](const std::string& from) {
    std::cout << "int8: each policy's model quantized under its quant_* knobs, calibrated on the " << from
              << " (batches of " << r.calib_batch << ")\n";
  };
  const AttributeResult res = attribute(r, *o.data.loader, hooks);
  const Attribution& a = res.attribution;
  std::cout << "attribute: " << res.model << " weights " << r.weights << ", from " << a.from << " to " << a.to
            << ", " << res.n << " images of " << res.dataset << ", weights "
            << (o.no_convert ? "raw" : "converted") << ", " << where(o.dev) << "\n";
  if (a.trained)
    std::cout << "training " << r.train << " epoch(s) of " << res.train_n << " images from the same initial weights,"
              << " batch " << r.batch << ", lr " << r.lr << ", momentum " << r.momentum << ", seed " << r.seed << "\n";
  std::cout << "\ntotal: accuracy " << pct(a.from_accuracy) << " (from) vs " << pct(a.to_accuracy) << " (to); outputs mean|d| "
            << sci(a.total.mean_abs) << ", max|d| " << sci(a.total.max_abs) << ", misclassification "
            << pct(a.total.misclassification) << "\n";
  std::cout << "\neach knob flipped alone (from -> to), against the `from` policy:\n";
  std::cout << std::left << std::setw(25) << "knob" << std::setw(42) << "from -> to" << std::right << std::setw(11)
            << "mean|d|" << std::setw(11) << "max|d|" << std::setw(10) << "misclass" << std::setw(10) << "accuracy";
  if (a.trained) std::cout << std::setw(12) << "train loss" << std::setw(12) << "|dW|";
  std::cout << "\n";
  for (const auto& e : a.single) {
    std::cout << std::left << std::setw(25) << e.knob << std::setw(42) << (e.from_value + " -> " + e.to_value)
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
  if (!o.json.empty()) write_file_atomic(o.json, report::attribute_json(res));
}

}  // namespace

void register_drift(CLI::App& app) {
  // drift
  auto dopt = std::make_shared<DriftOptions>();
  DriftRequest& d = dopt->req;
  auto* dr = app.add_subcommand("drift", "the same weights under several policies: output errors, misclassification, localisation");
  dr->add_option("--weights", d.weights, "model file (.dlm)")->required();
  dr->add_option("--model", d.model, "checked against the model the file holds");
  dr->add_option("--policies", d.policies)->capture_default_str();
  dr->add_flag("--no-convert", dopt->no_convert, "load the tensors raw under each policy instead of converting them");
  dr->add_option("--tol", d.tolerance, "localisation tolerance on max|d|/max|b| per layer")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  dr->add_option("--localise-batch", d.localise_batch)->capture_default_str()->check(CLI::PositiveNumber);
  dr->add_option("--quantize", d.quantize,
                 "compare the fp32 model and each policy's int8 model (quantized under its quant_* knobs, calibrated on "
                 "the first N training samples); localisation by activation point")
      ->check(CLI::NonNegativeNumber);
  dr->add_option("--calib-batch", d.calib_batch, "calibration samples per forward (--quantize)")->capture_default_str();
  dr->add_option("--json", dopt->json, "also write the report as JSON");
  add_threads_option(dr, dopt->threads);
  add_data_options(dr, dopt->data);
  add_device_options(dr, dopt->dev);
  dr->callback([dopt] { drift_cmd(*dopt); });

  // attribute
  auto aopt = std::make_shared<AttributeCliOptions>();
  AttributeRequest& a = aopt->req;
  auto* at = app.add_subcommand("attribute", "flip the knobs between two policies one at a time: what explains the difference");
  at->add_option("--weights", a.weights, "model file (.dlm)")->required();
  at->add_option("--model", a.model, "checked against the model the file holds");
  at->add_option("--from", a.from)->capture_default_str();
  at->add_option("--to", a.to)->capture_default_str();
  at->add_option("--train", a.train, "also train N epochs from the same initial weights under each policy")
      ->check(CLI::NonNegativeNumber);
  at->add_option("--batch", a.batch)->capture_default_str();
  at->add_option("--lr", a.lr)->capture_default_str();
  at->add_option("--momentum", a.momentum)->capture_default_str();
  at->add_option("--seed", a.seed)->capture_default_str()->check(CLI::NonNegativeNumber);
  at->add_flag("--no-convert", aopt->no_convert);
  at->add_option("--quantize", a.quantize,
                 "compare int8 models: quantize under each policy's quant_* knobs, calibrated on the first N training "
                 "samples")
      ->check(CLI::NonNegativeNumber);
  at->add_option("--calib-batch", a.calib_batch, "calibration samples per forward (--quantize)")->capture_default_str();
  at->add_option("--json", aopt->json);
  add_threads_option(at, aopt->threads);
  add_data_options(at, aopt->data);
  add_device_options(at, aopt->dev);
  at->callback([aopt] { attribute_cmd(*aopt); });
}

}  // namespace cli
}  // namespace driftlab
