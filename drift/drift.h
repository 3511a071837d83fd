// Cross-policy comparison of one set of weights: the measurements of Openja et al.'s conversion
// study (docs/GLOSSARY.md: absolute and relative error of the last layer's outputs,
// misclassification rate) between policies, the first layer where two policies diverge
// (localisation), and per-knob attribution, at inference and through training. The results are
// plain structs; report/drift.h writes them as JSON.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/model.h"
#include "engine/train/runner.h"

namespace driftlab {

// y_a against the reference y_o (in Openja et al.: y_c converted vs y_o original), both (N,K).
struct OutputDrift {
  double abs_err_mean = 0;    // Openja et al.'s eq. 1: mean over all elements of (y_a - y_o), signed
  double rel_err_mean = 0;    // Openja et al.'s eq. 2: mean of (y_a - y_o)/y_o over elements with y_o != 0
  double mean_abs = 0;        // mean |y_a - y_o| (signed means can cancel; this cannot)
  double max_abs = 0;         // max |y_a - y_o|
  double misclassification = 0;  // share of inputs whose argmax differs
  int64_t n = 0;
};
OutputDrift compare_outputs(const Tensor& y_a, const Tensor& y_o);

// Softmax probabilities: the "last layer output" of a Keras classifier, and of a PyTorch
// one once its logits are normalised, so both sides of a comparison mean the same thing.
Tensor softmax_rows(const Tensor& logits);

// Probabilities of the runner's model on a whole dataset (batches of `batch`), in float64.
Tensor predict_probs(Runner& runner, const Dataset& data, int64_t batch);
double accuracy_of(const Tensor& probs, const std::vector<int32_t>& labels);

// Every layer's output for a batch with its label (the layer's description), flatten outputs
// reordered to (c,h,w) so that the same feature sits at the same index under every flatten_order.
// A graph model's layer is opened into its nodes ("<node name>: <description>"), so localisation
// names the first node that parts. On the CPU whatever device the outputs were compared on: it
// opens the model layer by layer, below the model face.
std::vector<std::pair<std::string, Tensor>> labelled_outputs(Model& model, ExecContext& exec, const Tensor& x);

// max |a - b| and max |a - b| / max |b| over two tensors of one size (the relative one equals the
// absolute one where b is all zero): how localisation and the casebook measure two outputs apart.
struct MaxDiff {
  double abs = 0, rel = 0;
};
MaxDiff max_diff(const Tensor& a, const Tensor& b);

struct LayerDrift {
  std::size_t index;
  std::string layer;  // kind and resolved description under policy a
  double max_abs, max_rel;  // max |a-b| and max |a-b| / max |b|
};
struct Localisation {
  std::vector<LayerDrift> layers;
  int first_divergent = -1;  // index into layers, -1 when none exceeds the tolerance
  double tolerance = 0;
};
Localisation localise(Model& a, Model& b, ExecContext& exec, const Tensor& x, double tolerance);

// ---- one set of weights under several policies (what `driftlab drift` reports) ----

struct CrossPolicyOptions {
  bool convert = true;           // convert weights between conventions (flip, flatten order)
  double tolerance = 1e-5;       // localisation: a layer diverges when max|d|/max|b| exceeds it
  int64_t localise_batch = 100;  // localise on the first N test images
  int64_t batch = 1000;          // inference batch
  Device device = Device::cpu;   // where the outputs are computed (localisation: always the CPU)
  // When set: the fp32 model (under the first policy) and each policy's int8 model, quantized
  // under its quant_* knobs on these calibration samples, are compared; localisation is then by
  // the quantization's activation points (the int8 activations dequantized).
  const Tensor* calib = nullptr;
  int64_t calib_batch = 32;
};
struct PolicyAccuracy {
  Policy policy;
  double accuracy = 0;
  std::string label;  // the policy string; "fp32 ..." / "int8 <scheme> ..." under quantization
};
struct PolicyPair {
  std::string a_label, b_label;
  Policy a, b;                // b is the reference: its outputs are y_o
  OutputDrift outputs;        // a's softmax outputs against b's, on the whole test set
  Localisation localisation;  // on the first CrossPolicyDrift::localised test images
};
struct CrossPolicyDrift {
  std::vector<PolicyAccuracy> accuracy;  // in the order the policies were given
  // Every policy against each one given before it, as the reference: for i < j, (j vs i),
  // ordered by i then j.
  std::vector<PolicyPair> pairs;
  int64_t localised = 0;  // min(localise_batch, test size)
};
// The weights rebuilt under each policy (rebuild_under), evaluated on test, and compared pairwise.
// `exec`: the CPU kernels and thread count (CPU runners, localisation).
// on_policy, when given, sees each policy's accuracy as soon as it is known (a long run shows
// its progress).
CrossPolicyDrift cross_policy_drift(const Model& weights, const std::vector<Policy>& policies, const Dataset& test,
                                    ExecContext& exec, const CrossPolicyOptions& opt,
                                    const std::function<void(const PolicyAccuracy&)>& on_policy = nullptr);

// ---- attribution ----

struct AttributeOptions {
  bool convert = true;        // convert weights between conventions (flip, flatten order)
  int train_epochs = 0;       // 0: inference only
  TrainConfig train;          // used when train_epochs > 0
  int64_t batch = 1000;       // inference batch
  Device device = Device::cpu;  // where outputs are computed and training runs
  // When set, every policy's model is quantized (quant/ptq.h, its quant_* knobs) on these
  // calibration samples before it is evaluated: the attribution is then over int8 models, and
  // quant_scheme (a group label: its knobs are flipped one by one) is not flipped itself.
  const Tensor* calib = nullptr;
  int64_t calib_batch = 32;
};

struct KnobEffect {
  std::string knob, from_value, to_value;
  OutputDrift vs_from;        // outputs with this knob flipped vs the `from` policy's outputs
  double accuracy = 0;
  // training (when train_epochs > 0)
  double train_loss = 0, test_accuracy = 0, weight_distance = 0;  // distance to the `from` run
  bool changes_nothing = false;
};
struct PathStep {
  std::string knob;
  std::string policy;         // the policy after this step
  double distance_to_to = 0;  // mean |p - p_to| of the outputs (or weight distance when training)
  double share = 0;           // (previous distance - this distance) / initial distance
  double accuracy = 0, train_loss = 0;
};
struct Attribution {
  std::string from, to;
  OutputDrift total;          // `to` vs `from`
  double from_accuracy = 0, to_accuracy = 0;
  std::vector<KnobEffect> single;
  std::vector<PathStep> path;
  bool trained = false;
};

Attribution attribute(const Model& weights, const Policy& from, const Policy& to, const Dataset& test,
                      const Dataset* train, ExecContext& exec, const AttributeOptions& opt);

}  // namespace driftlab
