#include "quant/ptq.h"

#include <algorithm>
#include <memory>

#include "engine/core/error.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/pool_layer.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

namespace {

enum class UnitKind { conv, dense, maxpool, flatten, relu };

// A piece of the fp32 network that becomes one int8 layer (a conv/dense takes the ReLU after it
// along when the scheme fuses it).
struct Unit {
  UnitKind kind;
  std::size_t first, last;  // fp32 layer indices it covers
  bool relu = false;        // conv/dense followed by a fused ReLU
  int observer = -1;        // index of the observer of its output (conv/dense only)
};

bool is_relu(Layer& l) {
  auto* a = dynamic_cast<ActivationLayer*>(&l);
  return a && a->op_params().kind == ActKind::relu;
}

std::vector<Unit> plan_units(Sequential& net, bool relu_fused) {
  std::vector<Unit> units;
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    const std::string where = "quantize: layer " + std::to_string(i) + " (" + l.kind() + ")";
    if (dynamic_cast<Conv2dLayer*>(&l) || dynamic_cast<DenseLayer*>(&l)) {
      Unit u{dynamic_cast<Conv2dLayer*>(&l) ? UnitKind::conv : UnitKind::dense, i, i};
      if (relu_fused && i + 1 < net.size() && is_relu(net.layer(i + 1))) {
        u.relu = true;
        u.last = ++i;
      }
      units.push_back(u);
    } else if (auto* p = dynamic_cast<Pool2dLayer*>(&l)) {
      check(p->pool_kind() == PoolKind::max, where, ": average pooling has no int8 form yet");
      units.push_back({UnitKind::maxpool, i, i});
    } else if (dynamic_cast<FlattenLayer*>(&l)) {
      units.push_back({UnitKind::flatten, i, i});
    } else if (is_relu(l)) {
      units.push_back({UnitKind::relu, i, i});
    } else {
      fail(where, " has no int8 form yet (supported: conv2d, dense, relu, max pooling, flatten)");
    }
  }
  return units;
}

Param* param_named(Layer& l, const std::string& name) {
  for (Param* p : l.params())
    if (p->name == name) return p;
  return nullptr;
}

// A Theano-flipped kernel (K,C,R,S) rotated 180 degrees: the int8 conv is always a correlation.
Tensor unflip(const Tensor& w) {
  Tensor out(w.shape(), DType::f32);
  const int64_t k = w.dim(0), c = w.dim(1), r = w.dim(2), s = w.dim(3);
  const float* a = w.data<float>();
  float* b = out.data<float>();
  for (int64_t i = 0; i < k * c; ++i)
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < s; ++x) b[(i * r + y) * s + x] = a[(i * r + (r - 1 - y)) * s + (s - 1 - x)];
  return out;
}

Tensor rows(const Tensor& x, int64_t start, int64_t count) {
  Shape s = x.shape();
  s[0] = count;
  Tensor out(s, x.dtype());
  const std::size_t row = x.nbytes() / static_cast<std::size_t>(x.dim(0));
  std::copy_n(static_cast<const unsigned char*>(x.raw()) + row * start, row * count,
              static_cast<unsigned char*>(out.raw()));
  return out;
}

}  // namespace

// The int8 network for fp32's layers with the activations' scale/zero point q (the input, then
// each conv/dense unit's output, in order).
Model convert_model(Model& fp32, const Policy& policy, const std::vector<ActQParams>& q) {
  const QuantScheme s = QuantScheme::from_policy(policy);
  Sequential& net = *fp32.net;
  std::vector<Unit> units = plan_units(net, s.relu_fused);
  int next = 1;
  for (Unit& u : units)
    if (u.kind == UnitKind::conv || u.kind == UnitKind::dense) u.observer = next++;
  check(static_cast<int>(q.size()) == next, "quantize: ", q.size(), " activation qparams for ", next, " points");
  Model m;
  m.name = fp32.name;
  m.policy = policy;
  m.input_shape = fp32.input_shape;
  m.num_classes = fp32.num_classes;
  m.num_ids = fp32.num_ids;
  m.net = std::make_unique<Sequential>(fp32.input_shape);
  m.net->add(std::make_unique<QuantizeLayer>(fp32.input_shape, act_quantize_params(s, q[0]), policy.quant_backend));
  ActQParams cur = q[0];
  for (const Unit& u : units) {
    Layer& l = net.layer(u.first);
    const std::string where = "quantize: layer " + std::to_string(u.first) + " (" + l.kind() + ")";
    const Shape in = m.net->current_shape();
    switch (u.kind) {
      case UnitKind::conv:
      case UnitKind::dense: {
        QLinearSpec spec;
        spec.in = cur;
        spec.out = q[u.observer];
        spec.relu = u.relu;
        Tensor w = param_named(l, "weight")->value;
        Param* b = param_named(l, "bias");
        if (u.kind == UnitKind::conv) {
          Conv2dParams g = static_cast<Conv2dLayer&>(l).op_params();
          if (g.flip) {
            w = unflip(w);
            g.flip = false;
          }
          spec.weight = quantize_weight(s, w, s.conv_per_channel, where);
          spec.bias = quantize_bias(s, cur.scale, spec.weight, b ? b->value : Tensor(), where);
          m.net->add(std::make_unique<QConv2dLayer>(g, s, spec, policy.quant_backend));
        } else {
          spec.weight = quantize_weight(s, w, s.dense_per_channel, where);
          spec.bias = quantize_bias(s, cur.scale, spec.weight, b ? b->value : Tensor(), where);
          m.net->add(std::make_unique<QDenseLayer>(w.dim(1), w.dim(0), s, spec, policy.quant_backend));
        }
        cur = spec.out;
        break;
      }
      case UnitKind::maxpool:
        m.net->add(std::make_unique<QMaxPool2dLayer>(static_cast<Pool2dLayer&>(l).op_params(), s.act_dtype, policy.quant_backend));
        break;
      case UnitKind::flatten:
        m.net->add(std::make_unique<FlattenLayer>(in, policy));
        break;
      case UnitKind::relu:  // quant_relu=separate: max(q, zp), the input's scale and zero point kept
        m.net->add(std::make_unique<QReluLayer>(in, s.act_dtype, cur.zero_point));
        break;
    }
  }
  m.net->add(std::make_unique<DequantizeLayer>(m.net->current_shape(), act_quantize_params(s, cur), policy.quant_backend));
  return m;
}

PtqResult quantize_model(Model& fp32, const Policy& policy, const Tensor& calib, const PtqOptions& o) {
  check(fp32.dtype() == DType::f32, "quantize: the fp32 model must be float32 (policy dtype=",
        fp32.policy.dtype == FloatType::float64 ? "float64" : "float32", ")");
  check(calib.dtype() == DType::f32 && calib.rank() >= 1 && calib.dim(0) > 0, "quantize: calibration data must be "
        "float32 with at least one sample, got ", dtype_name(calib.dtype()), " ", shape_str(calib.shape()));
  Shape per_sample(calib.shape().begin() + 1, calib.shape().end());
  check(per_sample == fp32.input_shape, "quantize: calibration samples are ", shape_str(per_sample),
        ", the model takes ", shape_str(fp32.input_shape));
  check(o.calib_batch > 0, "quantize: calibration batch must be positive");
  const QuantScheme s = QuantScheme::from_policy(policy);
  Sequential& net = *fp32.net;
  std::vector<Unit> units = plan_units(net, s.relu_fused);

  // Observers: the input, then each conv/dense unit's output.
  std::vector<std::unique_ptr<Observer>> obs;
  std::vector<std::string> names{"input"};
  obs.push_back(make_observer(s.observer));
  std::vector<int> observer_after(net.size(), -1);  // fp32 layer index -> observer of its output
  for (Unit& u : units)
    if (u.kind == UnitKind::conv || u.kind == UnitKind::dense) {
      u.observer = static_cast<int>(obs.size());
      observer_after[u.last] = u.observer;
      names.push_back(std::to_string(u.last) + "." + net.layer(u.last).kind());
      obs.push_back(make_observer(s.observer));
    }

  // Calibrate.
  ExecContext exec;
  for (int64_t start = 0; start < calib.dim(0); start += o.calib_batch) {
    const int64_t count = std::min(o.calib_batch, calib.dim(0) - start);
    Tensor x = rows(calib, start, count);
    obs[0]->observe(x);
    RunContext ctx = RunContext::inference(exec);
    for (std::size_t i = 0; i < net.size(); ++i) {
      x = net.layer(i).forward(ctx, x);
      if (observer_after[i] >= 0) obs[observer_after[i]]->observe(x);
    }
  }

  PtqResult result;
  std::vector<ActQParams> q(obs.size());
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const Range r = obs[i]->range();
    q[i] = activation_qparams(s, r, "quantize: activation " + names[i]);
    result.points.push_back({names[i], r, q[i]});
  }

  result.model = convert_model(fp32, policy, q);
  return result;
}

Model build_quantized(Model& fp32, const Policy& policy) {
  const QuantScheme s = QuantScheme::from_policy(policy);
  int points = 1;
  for (const Unit& u : plan_units(*fp32.net, s.relu_fused))
    points += u.kind == UnitKind::conv || u.kind == UnitKind::dense;
  return convert_model(fp32, policy, std::vector<ActQParams>(static_cast<std::size_t>(points)));
}

}  // namespace quant
}  // namespace driftlab
