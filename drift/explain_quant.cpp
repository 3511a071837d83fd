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
#include "core/ops/softmax_xent.h"
#include "engine/random.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"
#include "engine/train/runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "quant/dynamic.h"
#include "quant/ptq.h"

namespace driftlab {
namespace explain {

// int8 knobs: LeNet-1 (torch preset, seed 1, random weights) calibrated on 32 random images in
// [0, 1) and quantized under each value of the knob on the torch preset's toolchain (torch_qnnpack;
// quant_scheme: each toolchain); for 16 test images: the input and first-conv scale/zero point, the
// integer logits' count that differ from the first value's, and image 0's first dequantized logits.
std::string ex_quant(const std::string& knob) {
  std::ostringstream os;
  Model m = build_model("lenet1", Policy::torch(), 1);
  Rng rng(RngEngine::mt19937_u24, 17);
  Tensor calib({32, 1, 28, 28}, DType::f32), x({16, 1, 28, 28}, DType::f32);
  for (Tensor* t : {&calib, &x})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = rng.uniform_f32();
  os << "  LeNet-1 (random weights), calibrated on 32 random images, 16 test images; torch preset (torch_qnnpack)"
     << (knob == "quant_scheme" ? "" : " with " + knob + " set") << ":\n";
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
