#include "drift/drift.h"

#include "engine/layers/graph_layer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "models/reparam.h"
#include "quant/dynamic.h"
#include "quant/ptq.h"
#include "quant/report.h"
#include "engine/layers/flatten_layer.h"
#include "engine/knob_gates.h"
#include "engine/layers/math_mode.h"

namespace driftlab {

Tensor softmax_rows(const Tensor& logits) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  Tensor p({n, k}, DType::f64);
  double* d = p.data<double>();
  for (int64_t i = 0; i < n; ++i) {
    double m = logits.at(i * k);
    for (int64_t j = 1; j < k; ++j) m = std::max(m, logits.at(i * k + j));
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += d[i * k + j] = std::exp(logits.at(i * k + j) - m);
    for (int64_t j = 0; j < k; ++j) d[i * k + j] /= s;
  }
  return p;
}

OutputDrift compare_outputs(const Tensor& a, const Tensor& o) {
  check(a.shape() == o.shape() && a.rank() == 2, "drift: outputs ", shape_str(a.shape()), " and ",
        shape_str(o.shape()), " cannot be compared");
  OutputDrift d;
  d.n = a.dim(0);
  const int64_t total = a.numel();
  double sum = 0, rel = 0, abs_sum = 0;
  int64_t rel_n = 0, differ = 0;
  for (int64_t i = 0; i < total; ++i) {
    double delta = a.at(i) - o.at(i);
    sum += delta;
    abs_sum += std::abs(delta);
    d.max_abs = std::max(d.max_abs, std::abs(delta));
    if (o.at(i) != 0) {
      rel += delta / o.at(i);
      ++rel_n;
    }
  }
  const std::vector<int32_t> pa = predictions(a), po = predictions(o);
  for (int64_t i = 0; i < d.n; ++i) differ += pa[static_cast<std::size_t>(i)] != po[static_cast<std::size_t>(i)];
  d.abs_err_mean = sum / static_cast<double>(total);
  d.rel_err_mean = rel_n ? rel / static_cast<double>(rel_n) : 0.0;
  d.mean_abs = abs_sum / static_cast<double>(total);
  d.misclassification = static_cast<double>(differ) / static_cast<double>(d.n);
  return d;
}

Tensor predict_probs(Runner& runner, const Dataset& data, int64_t batch) {
  const Model& model = runner.model();
  const int64_t n = data.images.dim(0);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  Tensor out({n, model.num_classes}, DType::f64);
  for (int64_t b = 0; b < n; b += batch) {
    int64_t cnt = std::min(batch, n - b);
    Tensor p = softmax_rows(runner.logits(gather_batch(data, idx, b, cnt, model.dtype())));
    std::copy(p.data<double>(), p.data<double>() + p.numel(), out.data<double>() + b * model.num_classes);
  }
  return out;
}

double accuracy_of(const Tensor& probs, const std::vector<int32_t>& labels) {
  return static_cast<double>(count_correct(probs, labels)) / static_cast<double>(probs.dim(0));
}

std::vector<std::pair<std::string, Tensor>> labelled_outputs(Model& model, ExecContext& exec, const Tensor& x) {
  RunContext ctx = RunContext::inference(exec);
  std::vector<std::pair<std::string, Tensor>> outs;
  Tensor h = x.dtype() == model.dtype() ? x : x.to(model.dtype());
  for (std::size_t i = 0; i < model.net->size(); ++i) {
    Layer& l = model.net->layer(i);
    if (auto* g = layer_as<GraphLayer>(l)) {
      const std::vector<Tensor> nodes = g->node_outputs(ctx, h);
      for (std::size_t k = 0; k < nodes.size(); ++k) {
        GraphNode& node = g->node(k);
        auto* f = node.layer ? layer_as<FlattenLayer>(*node.layer) : nullptr;
        outs.emplace_back(node.name + ": " + (node.layer ? node.layer->describe() : graph_op_name(node.op)),
                          f ? f->to_chw_order(nodes[k]) : nodes[k]);
      }
      for (std::size_t k = 0; k < nodes.size(); ++k)  // the graph's output: its output value's node
        if (g->node(k).output == g->output_value()) h = nodes[k];
      continue;
    }
    h = l.forward(ctx, h);
    round_to_format(h, model.net->output_format(i));  // as Sequential::forward (autocast)
    auto* f = layer_as<FlattenLayer>(l);
    outs.emplace_back(l.describe(), f ? f->to_chw_order(h) : h);
  }
  return outs;
}

MaxDiff max_diff(const Tensor& a, const Tensor& b) {
  check(a.numel() == b.numel(), "max_diff: ", a.numel(), " elements against ", b.numel());
  double max_abs = 0, scale = 0;
  for (int64_t j = 0; j < a.numel(); ++j) {
    max_abs = std::max(max_abs, std::abs(a.at(j) - b.at(j)));
    scale = std::max(scale, std::abs(b.at(j)));
  }
  return {max_abs, scale > 0 ? max_abs / scale : max_abs};
}

Localisation localise(Model& a, Model& b, ExecContext& exec, const Tensor& x, double tolerance) {
  const auto oa = labelled_outputs(a, exec, x), ob = labelled_outputs(b, exec, x);
  check(oa.size() == ob.size(), "localise: ", oa.size(), " outputs under the first policy, ", ob.size(),
        " under the second");
  Localisation loc;
  loc.tolerance = tolerance;
  for (std::size_t i = 0; i < oa.size(); ++i) {
    const MaxDiff d = max_diff(oa[i].second, ob[i].second);
    loc.layers.push_back({i, oa[i].first, d.abs, d.rel});
    if (loc.first_divergent < 0 && d.rel > tolerance) loc.first_divergent = static_cast<int>(i);
  }
  return loc;
}

namespace {

// The activations at the quantization points of `q` (its PtqResult) for x: the int8 ones
// dequantized with each point's scale and zero point, or (fp32 = true) the fp32 model's there.
std::vector<Tensor> point_activations(Model& fp32, quant::PtqResult& q, bool as_fp32, const Tensor& x) {
  if (as_fp32) return quant::fp32_activations(fp32, q.model.policy, x);
  std::vector<Tensor> ints = quant::int8_activations(q.model, x), out;
  for (std::size_t i = 0; i < ints.size(); ++i) {
    Tensor d(ints[i].shape(), DType::f32);
    for (int64_t j = 0; j < ints[i].numel(); ++j)
      d.data<float>()[j] = dequantize_one(static_cast<int32_t>(ints[i].at(j)), q.points[i].q.zero_point, q.points[i].q.scale);
    out.push_back(d);
  }
  return out;
}

Localisation localise_points(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                             const std::vector<quant::ObservedPoint>& names, double tolerance) {
  Localisation loc;
  loc.tolerance = tolerance;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const MaxDiff d = max_diff(a[i], b[i]);
    loc.layers.push_back({i, "point " + names[i].name, d.abs, d.rel});
    if (loc.first_divergent < 0 && d.rel > tolerance) loc.first_divergent = static_cast<int>(i);
  }
  return loc;
}

}  // namespace

CrossPolicyDrift cross_policy_drift(const Model& weights, const std::vector<Policy>& policies, const Dataset& test,
                                    ExecContext& exec, const CrossPolicyOptions& opt,
                                    const std::function<void(const PolicyAccuracy&)>& on_policy) {
  CrossPolicyDrift r;
  std::vector<Model> models;
  std::vector<Tensor> probs;
  std::vector<quant::PtqResult> q;  // quantization: q[i] is models[i + 1]'s
  std::vector<std::string> labels;
  auto evaluate = [&](Model& m, const Policy& p, const std::string& label) {
    probs.push_back(predict_probs(*open_runner(m, opt.device, {}, exec), test, opt.batch));
    r.accuracy.push_back({p, accuracy_of(probs.back(), test.labels), label});
    labels.push_back(label);
    if (on_policy) on_policy(r.accuracy.back());
  };
  if (opt.calib) {
    check(!policies.empty() && opt.device == Device::cpu, "drift --quantize: int8 models run on the CPU only");
    models.push_back(rebuild_under(weights, policies[0], opt.convert));
    evaluate(models.back(), policies[0], "fp32 " + policies[0].to_string());
    for (const Policy& p : policies) {
      quant::PtqOptions po;
      po.calib_batch = opt.calib_batch;
      Model fp = rebuild_under(weights, p, opt.convert);
      if (quant::needs_dynamic(fp)) {  // LSTM/GRU: dynamic (weights-only), no points: compared layer by layer
        q.emplace_back();
        q.back().model = quant::quantize_dynamic(fp, p);
      } else {
        q.push_back(quant::quantize_model(fp, p, *opt.calib, po));
      }
      evaluate(q.back().model, p, "int8 " + p.get("quant_scheme") + " (" + p.to_string() + ")");
    }
  } else {
    for (const Policy& p : policies) {
      models.push_back(rebuild_under(weights, p, opt.convert));
      evaluate(models.back(), p, p.to_string());
    }
  }
  r.localised = std::min(opt.localise_batch, test.images.dim(0));
  std::vector<int64_t> idx(static_cast<std::size_t>(r.localised));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const Tensor x = gather_batch(test, idx, 0, r.localised, DType::f32);
  const std::size_t n = probs.size();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      PolicyPair pp;
      pp.a_label = labels[j], pp.b_label = labels[i];
      pp.a = r.accuracy[j].policy, pp.b = r.accuracy[i].policy;
      pp.outputs = compare_outputs(probs[j], probs[i]);
      if (!opt.calib) {
        pp.localisation = localise(models[j], models[i], exec, x, opt.tolerance);
      } else {
        // by points: int8 j against fp32 (i = 0) or int8 i, under j's points (same plan when
        // quant_relu agrees; otherwise the points differ and only the outputs are compared)
        quant::PtqResult& qj = q[j - 1];
        if (qj.points.empty()) {  // dynamic: the fp32 model's layers one for one
          pp.localisation = localise(qj.model, i == 0 ? models[0] : q[i - 1].model, exec, x, opt.tolerance);
          r.pairs.push_back(std::move(pp));
          continue;
        }
        const std::vector<Tensor> aj = point_activations(models[0], qj, false, x);
        const std::vector<Tensor> bi = i == 0 ? point_activations(models[0], qj, true, x)
                                              : point_activations(models[0], q[i - 1], false, x);
        if (aj.size() == bi.size()) pp.localisation = localise_points(aj, bi, qj.points, opt.tolerance);
        else pp.localisation.tolerance = opt.tolerance;
      }
      r.pairs.push_back(std::move(pp));
    }
  return r;
}

// ---- attribution ----

namespace {

struct Outcome {
  Tensor probs;
  double accuracy = 0, train_loss = 0;
  Model trained;  // weights after training, in the `from` convention (training runs only)
};

double weight_distance(const Model& a, const Model& b) {
  double s = 0;
  auto pa = a.net->named_params(), pb = b.net->named_params();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const Tensor &x = pa[i].second->value, &y = pb[i].second->value;
    for (int64_t j = 0; j < x.numel(); ++j) s += (x.at(j) - y.at(j)) * (x.at(j) - y.at(j));
  }
  return std::sqrt(s);
}

Outcome run_policy(const Model& weights, const Policy& p, const Policy& from, const Dataset& test,
                   const Dataset* train, ExecContext& exec, const AttributeOptions& opt) {
  Outcome o;
  Model m = rebuild_under(weights, p, opt.convert);
  if (opt.calib) {
    check(opt.train_epochs == 0, "attribute: int8 models are inference-only (no --train with quantization)");
    check(opt.device == Device::cpu, "attribute: int8 models run on the CPU only");
    quant::PtqOptions po;
    po.calib_batch = opt.calib_batch;
    m = quant::needs_dynamic(m) ? quant::quantize_dynamic(m, p) : std::move(quant::quantize_model(m, p, *opt.calib, po).model);
  }
  std::unique_ptr<Runner> runner = open_runner(m, opt.device, opt.train, exec);
  if (opt.train_epochs > 0) {
    EpochStats st;
    for (int e = 0; e < opt.train_epochs; ++e) st = runner->run_epoch(*train, nullptr, nullptr);
    runner->sync_to_model();
    o.train_loss = st.train_loss;
    o.trained = rebuild_under(m, from, opt.convert);
  }
  o.probs = predict_probs(*runner, test, opt.batch);
  o.accuracy = accuracy_of(o.probs, test.labels);
  return o;
}

}  // namespace

Attribution attribute(const Model& weights, const Policy& from, const Policy& to, const Dataset& test,
                      const Dataset* train, ExecContext& exec, const AttributeOptions& opt) {
  check(opt.train_epochs == 0 || train != nullptr, "attribute: --train needs a training set");
  Attribution a;
  a.from = from.to_string();
  a.to = to.to_string();
  a.trained = opt.train_epochs > 0;
  Outcome of = run_policy(weights, from, from, test, train, exec, opt);
  Outcome ot = run_policy(weights, to, from, test, train, exec, opt);
  a.total = compare_outputs(ot.probs, of.probs);
  a.from_accuracy = of.accuracy;
  a.to_accuracy = ot.accuracy;
  auto knobs = diff(from, to);
  // A knob inert under both policies (engine/knob_gates.h) changes nothing by construction.
  knobs.erase(std::remove_if(knobs.begin(), knobs.end(),
                             [&](const KnobDiff& k) { return knob_inert(k.knob, from) && knob_inert(k.knob, to); }),
              knobs.end());
  if (opt.calib)  // quant_scheme only labels the group: its knobs are flipped one by one instead
    knobs.erase(std::remove_if(knobs.begin(), knobs.end(), [](const KnobDiff& k) { return k.knob == "quant_scheme"; }),
                knobs.end());
  for (const auto& k : knobs) {
    Policy p = from;
    p.set(k.knob, k.b);
    Outcome o = run_policy(weights, p, from, test, train, exec, opt);
    KnobEffect e;
    e.knob = k.knob;
    e.from_value = k.a;
    e.to_value = k.b;
    e.vs_from = compare_outputs(o.probs, of.probs);
    e.accuracy = o.accuracy;
    if (a.trained) {
      e.train_loss = o.train_loss;
      e.test_accuracy = o.accuracy;
      e.weight_distance = weight_distance(o.trained, of.trained);
    }
    e.changes_nothing = e.vs_from.max_abs == 0.0 && (!a.trained || e.weight_distance == 0.0);
    a.single.push_back(e);
  }
  // Cumulative path, knobs flipped in the knob table's order. The distance to `to` is the
  // output distance at inference, and the weight distance after training.
  auto distance = [&](const Outcome& o) {
    return a.trained ? weight_distance(o.trained, ot.trained) : compare_outputs(o.probs, ot.probs).mean_abs;
  };
  Policy p = from;
  const double d0 = distance(of);
  double prev = d0;
  for (const auto& k : knobs) {
    p.set(k.knob, k.b);
    Outcome o = run_policy(weights, p, from, test, train, exec, opt);
    PathStep s;
    s.knob = k.knob;
    s.policy = p.to_string();
    s.distance_to_to = distance(o);
    s.share = d0 > 0 ? (prev - s.distance_to_to) / d0 : 0.0;
    s.accuracy = o.accuracy;
    s.train_loss = o.train_loss;
    prev = s.distance_to_to;
    a.path.push_back(s);
  }
  return a;
}

}  // namespace driftlab
