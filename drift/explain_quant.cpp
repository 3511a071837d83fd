// `driftlab explain`'s worked examples for the int8 knobs: static and dynamic quantization (drift/explain_examples.h).
#include "drift/explain_examples.h"

#include "engine/cuda/device_net.h"
#include "kernels/cuda/device.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <limits>
#include <sstream>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/lstm_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/init.h"
#include "core/ops/activation.h"
#include "core/ops/pool2d.h"
#include "core/ops/qadd.h"
#include "core/ops/qadd_pairs.h"
#include "core/ops/quantize.h"
#include "core/ops/softmax_xent.h"
#include "engine/random.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"
#include "engine/train/runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "quant/dynamic.h"
#include "quant/ptq.h"
#include "quant/scheme.h"

namespace driftlab {
namespace explain {

// The knobs that form a conv layer's stored numbers (the int8 weights, the int32 bias, the
// requantization multiplier) from float32 quotients and products: two forms of one quotient
// differ in its last bit or two, so a stored integer moves only where the quotient lies that close
// to a rounding tie (about 1 in 10^5 of the weights), and a small network's logits rarely show it.
// Shown on one VGG-16-sized layer instead: a 3x3 conv with 512 input and 512 output channels
// (2,359,296 weights uniform in +-1/sqrt(4608), biases uniform in +-0.1) at 128 input scales s_in
// geometric in [0.01, 0.1) and output scale 0.02 (zero point 128), under each value: how many
// stored weights, int32 biases and multipliers differ from the first value's, and how many of
// channel 0's outputs differ over every accumulator in [-2^16, 2^16) (its int32 bias added) at
// each s_in (16.8 million).
std::string stored_numbers_sweep(const std::string& knob, const std::vector<std::string>& values,
                                 const std::function<quant::QuantScheme(const std::string&)>& scheme_with) {
  constexpr int64_t kK = 512, kC = 512, kTaps = 9, kScales = 128, kAcc = 65536;
  Rng rng(RngEngine::mt19937_u24, 23);
  Tensor w({kK, kC, 3, 3}, DType::f32), b({kK}, DType::f32);
  const float bound = 1.f / std::sqrt(static_cast<float>(kC * kTaps));
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = bound * (2.f * rng.uniform_f32() - 1.f);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = 0.1f * (2.f * rng.uniform_f32() - 1.f);
  std::vector<float> s_in(kScales);
  for (int64_t j = 0; j < kScales; ++j) s_in[j] = static_cast<float>(0.01 * std::pow(10.0, double(j) / kScales));
  quant::ActQParams out;
  out.scale = 0.02f, out.zero_point = 128;
  struct Stored {
    Tensor q;
    std::vector<float> bias;  // int32 biases (as floats) or float biases, s_in-major
    std::vector<RequantChannel> mult;
    std::vector<int32_t> y;   // channel 0's outputs, s_in-major
  };
  std::ostringstream os;
  os << "  one 3x3 conv, 512 -> 512 channels (2,359,296 weights in +-1/sqrt(4608), 512 biases in +-0.1), at "
     << kScales << " input scales in [0.01, 0.1) and output scale 0.02, under each value (the torch preset's toolchain "
     << "with " << knob << " set):\n";
  Stored first;
  for (const std::string& v : values) {
    const quant::QuantScheme qs = scheme_with(v);
    Stored s;
    const quant::QuantizedWeight qw = quant::quantize_weight(qs, w, qs.conv_per_channel, "sweep");
    s.q = qw.q;
    for (int64_t j = 0; j < kScales; ++j) {
      const Tensor qb = quant::quantize_bias(qs, s_in[j], qw, b, "sweep");
      const bool int_bias = qb.dtype() == DType::i32;
      for (int64_t c = 0; c < kK; ++c)
        s.bias.push_back(int_bias ? static_cast<float>(qb.data<int32_t>()[c]) : qb.data<float>()[c]);
      const Requant rq = quant::make_requant(qs, s_in[j], qw, kK, int_bias ? Tensor() : qb, out, false, "sweep");
      for (int64_t c = 0; c < kK; ++c) s.mult.push_back(rq.channel(c));
      const int32_t b0 = int_bias ? qb.data<int32_t>()[0] : 0;
      for (int32_t acc = -kAcc; acc < kAcc; ++acc)
        s.y.push_back(requantize_one(acc + b0, rq.channel(0), rq.rule, rq.round, rq.zero_point, rq.lo, rq.hi));
    }
    if (!first.q.defined()) first = s;
    int64_t dw = 0, db = 0, dm = 0, dy = 0;
    for (int64_t i = 0; i < s.q.numel(); ++i) dw += s.q.data<int8_t>()[i] != first.q.data<int8_t>()[i];
    for (std::size_t i = 0; i < s.bias.size(); ++i) db += s.bias[i] != first.bias[i];
    for (std::size_t i = 0; i < s.mult.size(); ++i)
      dm += s.mult[i].scale != first.mult[i].scale || s.mult[i].bias != first.mult[i].bias ||
            s.mult[i].fixed.m0 != first.mult[i].fixed.m0 || s.mult[i].fixed.shift != first.mult[i].fixed.shift;
    for (std::size_t i = 0; i < s.y.size(); ++i) dy += s.y[i] != first.y[i];
    os << "    " << knob << "=" << std::left << std::setw(28) << v << std::right << " differing from the first value's: "
       << "weights " << dw << "/" << s.q.numel() << ", biases " << db << "/" << s.bias.size() << ", multipliers " << dm
       << "/" << s.mult.size() << ", channel 0's outputs " << dy << "/" << s.y.size() << "\n";
  }
  if (knob == "quant_bias_product")
    os << "  the two values give the same s_b = s_in * s_w for every pair of float32 scales: the double product of two "
          "float32 values is exact (24 + 24 significant bits, double holds 53), so rounding it once to float32 gives "
          "the correctly rounded product, which is what float32 multiplication returns. The knob names the form a "
          "toolchain writes (PyTorch: q_scale() * act scale in double, ORT/TFLite: float32 arrays); it moves nothing "
          "while the scales are float32.\n";
  return os.str();
}

// int8 knobs: LeNet-1 (torch preset, seed 1, random weights; ResNet-20 for the residual add's and
// the average pool's knobs) calibrated on 32 (8) random images in [0, 1) and quantized under each
// value of the knob on the torch preset's toolchain (torch_qnnpack;
// quant_scheme: each toolchain); for 16 (4) test images: the input and first-conv scale/zero point, the
// integer logits' count that differ from the first value's, and image 0's first dequantized logits.
std::string ex_quant(const std::string& knob) {
  std::ostringstream os;
  // The residual add's and the average pool's rules act only where a model has them: LeNet-1 has
  // neither (its example showed every value giving the same logits), ResNet-20 both.
  const bool resnet = knob == "quant_add" || knob == "quant_avg_pool";
  Model m = build_model(resnet ? "resnet20" : "lenet1", Policy::torch(), 1);
  Rng rng(RngEngine::mt19937_u24, 17);
  const Shape image = resnet ? Shape{3, 32, 32} : Shape{1, 28, 28};
  const int64_t n_calib = resnet ? 8 : 32, n_test = resnet ? 4 : 16;
  Tensor calib({n_calib, image[0], image[1], image[2]}, DType::f32), x({n_test, image[0], image[1], image[2]}, DType::f32);
  for (Tensor* t : {&calib, &x})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = rng.uniform_f32();
  os << "  " << (resnet ? "ResNet-20" : "LeNet-1") << " (random weights), calibrated on " << n_calib << " random images, "
     << n_test << " test images; torch preset (torch_qnnpack)" << (knob == "quant_scheme" ? "" : " with " + knob + " set")
     << ":\n";
  Tensor first;
  for (const std::string& v : knob_info(knob).values) {
    Policy pol = Policy::torch();
    os << "    " << knob << "=" << std::left << std::setw(28) << v << std::right;
    try {
      pol.set(knob, v);
      quant::PtqResult r = quant::quantize_model(m, pol, calib);
      ExecContext exec;
      RunContext ctx = RunContext::inference(exec);
      const Tensor y = r.model.forward(ctx, x);
      int64_t differ = 0;
      if (!first.defined()) first = y;
      for (int64_t i = 0; i < y.numel(); ++i) differ += y.at(i) != first.at(i);
      os << " input s=" << std::setprecision(6) << r.points[0].q.scale << " zp=" << r.points[0].q.zero_point
         << ", conv1 out s=" << r.points[1].q.scale << " zp=" << r.points[1].q.zero_point << "; logits differing from the "
         << "first value: " << differ << "/" << y.numel() << "; image 0:";
      for (int j = 0; j < 3; ++j) os << " " << std::setprecision(5) << y.at(j);
      os << "\n";
    } catch (const Error& e) {
      os << " refused: " << e.what() << "\n";
    }
  }
  // The torch preset's toolchain with the knob at v, resolved into the scheme's numbers.
  auto scheme_with = [&](const std::string& v) {
    Policy pol = Policy::torch();
    pol.set(knob, v);
    return quant::QuantScheme::from_policy(pol);
  };
  static const char* kSweepKnobs[] = {"quant_round", "quant_zp_round", "quant_zp_form", "quant_act_scale_op",
                                      "quant_scale_precision", "quant_scale_floor", "quant_act_dtype"};
  if (std::find(std::begin(kSweepKnobs), std::end(kSweepKnobs), knob) != std::end(kSweepKnobs)) {
    // These act on one activation quantization and show in a network's logits only where a value
    // sits on a rounding tie. One range [-1, max] quantized under each value: the first max in
    // [3, 3.2) (steps of 1e-4) where the values' zero points differ, if any (min / scale on a tie);
    // then inputs x with x / scale exactly k + 1/2 under the first value's scale (ties of the
    // rounding itself), quantized and dequantized under each value.
    auto params = [&](const std::string& v, float max) {
      const quant::QuantScheme qs = scheme_with(v);
      return quant::act_quantize_params(qs, quant::activation_qparams(qs, {-1.f, max}, "sweep"));
    };
    const std::vector<std::string>& values = knob_info(knob).values;
    float max = 3.f;
    bool zp_differs = false;
    const bool scan = knob != "quant_act_dtype";  // int8 and uint8 zero points always differ (by 128)
    for (int i = 0; scan && i < 2000 && !zp_differs; ++i) {
      max = 3.f + 1e-4f * static_cast<float>(i);
      const int32_t zp0 = params(values[0], max).zero_point[0];
      for (const std::string& v : values) zp_differs = zp_differs || params(v, max).zero_point[0] != zp0;
    }
    if (!zp_differs) max = 3.f;
    const QuantizeParams first = params(values[0], max);
    std::vector<float> xs;  // x / scale == k + 0.5 exactly (a float just beside (k + 0.5) * scale)
    for (int k = -60; k < 190 && xs.size() < 200; ++k) {
      float x = static_cast<float>((k + 0.5) * double(first.scale[0]));
      for (int t = 0; t < 4 && x / first.scale[0] != static_cast<float>(k + 0.5); ++t)
        x = std::nextafter(x, x / first.scale[0] < static_cast<float>(k + 0.5) ? INFINITY : -INFINITY);
      if (x / first.scale[0] == static_cast<float>(k + 0.5)) xs.push_back(x);
    }
    os << "  one activation range [-1, " << std::setprecision(6) << max << "]"
       << (zp_differs ? " (the first max from 3 where the zero points differ: min / scale on a tie)"
           : scan     ? " (no max in [3, 3.2) puts min / scale on a tie that the values round apart)"
                      : "")
       << ", " << xs.size() << " inputs on rounding ties of the first value's grid, quantized and dequantized:\n";
    std::vector<float> base;
    for (const std::string& v : values) {
      const QuantizeParams qp = params(v, max);
      int64_t differ = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const int32_t q = quantize_one(xs[i], qp.scale[0], 1.f / qp.scale[0], qp.zero_point[0], qp.op, qp.round,
                                       qp.qmin, qp.qmax);
        const float y = dequantize_one(q, qp.zero_point[0], qp.scale[0]);
        if (base.size() < xs.size()) base.push_back(y);
        differ += y != base[i];
      }
      os << "    " << knob << "=" << std::left << std::setw(28) << v << std::right << " scale " << std::setprecision(9)
         << qp.scale[0] << ", zero point " << qp.zero_point[0] << "; dequantized values differing from the first "
         << "value's: " << differ << "/" << xs.size() << "\n";
    }
  }
  static const char* kStoredKnobs[] = {"quant_weight_scale_op", "quant_bias", "quant_bias_product", "quant_multiplier"};
  if (std::find(std::begin(kStoredKnobs), std::end(kStoredKnobs), knob) != std::end(kStoredKnobs))
    os << stored_numbers_sweep(knob, knob_info(knob).values, scheme_with);
  if (knob == "quant_add") {
    // The rules part only near a rounding tie of the real sum, too rarely for a few images: one add
    // with pytorch/pytorch#37343's scales (the casebook's qnnpack-qadd-rounding) over every pair.
    QAddParams p;
    p.a_scale = 0.040562574f, p.b_scale = 0.088816032f, p.y_scale = 0.090296358f;
    p.a_zero_point = 112, p.b_zero_point = 126, p.y_zero_point = 124;
    os << "  one add (uint8; scales 0.0406, 0.0888 -> 0.0903, zero points 112, 126 -> 124) over all 65,536 pairs of "
          "stored values:\n";
    QAddParams first;
    bool have_first = false;
    for (const std::string& v : knob_info(knob).values) {
      p.rule = scheme_with(v).add_rule;
      p.resolve();
      if (!have_first) first = p, have_first = true;
      os << "    " << knob << "=" << std::left << std::setw(28) << v << std::right << " outputs differing from the first "
         << "value's: " << qadd_pairs_differing(first, p) << "\n";
    }
  }
  return os.str();
}

// A dynamic-quantization knob: the torch preset's LSTM classifier (random weights) quantized
// dynamically under torch_qnnpack with the knob at each value: logits vs fp32 and vs the first value.
std::string ex_quant_dynamic(const std::string& knob, const std::string& arch) {
  std::ostringstream os;
  Model m = build_model(arch, Policy::torch(), 1);
  Rng rng(RngEngine::mt19937_u24, 17);
  Tensor x({8, 28, 28}, DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 2.0f * rng.uniform_f32() - 0.5f;
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor yf = m.forward(ctx, x);
  os << "  " << (arch == "gru" ? "GRU" : "LSTM") << " classifier (28 steps x 28 features, 128 units; random "
        "weights), 8 random sequences in [-0.5, 1.5), "
        "dynamic int8 under torch_qnnpack with "
     << knob << " set:\n";
  Tensor first;
  for (const std::string& v : knob_info(knob).values) {
    Policy pol = Policy::torch();
    os << "    " << knob << "=" << std::left << std::setw(20) << v << std::right;
    try {
      pol.set(knob, v);
      Model q = quant::quantize_dynamic(m, pol);
      const Tensor y = q.forward(ctx, x);
      double sig = 0, err = 0;
      int64_t differ = 0;
      if (!first.defined()) first = y;
      for (int64_t i = 0; i < y.numel(); ++i) {
        sig += yf.at(i) * yf.at(i);
        err += (y.at(i) - yf.at(i)) * (y.at(i) - yf.at(i));
        differ += y.at(i) != first.at(i);
      }
      os << " logits vs fp32 SQNR " << std::fixed << std::setprecision(2) << 10 * std::log10(sig / err)
         << std::defaultfloat << " dB; differing from the first value: " << differ << "/" << y.numel()
         << "; sample 0:";
      for (int j = 0; j < 3; ++j) os << " " << std::setprecision(6) << y.at(j);
      os << "\n";
    } catch (const Error& e) {
      os << " refused: " << e.what() << "\n";
    }
  }
  return os.str();
}

}  // namespace explain
}  // namespace driftlab
