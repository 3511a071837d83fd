// Quantized (int8) models on the device (quant/device_qlayers.cpp): a whole int8 LeNet-1 / LeNet-5
// under every scheme and an int8 ResNet-20 under every quantized-add rule, on the device against
// the same model on the CPU, and the refusals of what has no device kernel. Every integer sum is exact and the roundings (quantize, requantize,
// dequantize) are the shared functions of core/ops/quant.h, so the device must give the CPU's
// logits BIT FOR BIT: any difference is a bug, not rounding. The refusals need no device (CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "engine/cuda/device_net.h"
#include "engine/train/runner.h"
#include "models/models.h"
#include "quant/ptq.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

constexpr const char* kSchemes[] = {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"};

Tensor unit_images(int64_t n, uint64_t seed) { return random_tensor({n, 1, 28, 28}, DType::f32, seed, 0.0, 1.0); }

quant::PtqResult quantized(const std::string& name, const std::string& scheme, const std::string& extra = "") {
  Model m = build_model(name, Policy::parse("torch"), 5);
  return quant::quantize_model(m, Policy::parse("torch,quant_scheme=" + scheme + extra), unit_images(48, 21));
}

// Every scheme: ResNet-20's add and average under each (tflite: TFLite's ADD and MEAN).
constexpr const char* kResnetSchemes[] = {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"};

quant::PtqResult quantized_resnet20(const std::string& scheme, const std::string& extra = "") {
  Model m = build_model("resnet20", Policy::parse("torch"), 5);
  return quant::quantize_model(m, Policy::parse("torch,quant_scheme=" + scheme + extra),
                               random_tensor({4, 3, 32, 32}, DType::f32, 24, 0.0, 1.0));
}

Tensor cpu_logits(Model& m, const Tensor& x) {
  ExecContext exec;
  RunContext rc = RunContext::inference(exec);
  return m.forward(rc, x);
}

int64_t count_differing(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.dtype(), b.dtype());
  int64_t d = 0;
  for (int64_t i = 0; i < a.numel() && a.shape() == b.shape(); ++i) d += a.data<float>()[i] != b.data<float>()[i];
  return d;
}

// Every scheme, LeNet-1 and LeNet-5: the device's logits equal the CPU's bit for bit, in one batch
// and in chunks (--max-batch: integer kernels do not depend on the batch either).
TEST(CudaQuantModel, LenetUnderEverySchemeEqualsTheCpuBitForBit) {
  REQUIRE_CUDA_DEVICE();
  const Tensor x = unit_images(13, 22);
  for (const char* model : {"lenet1", "lenet5"})
    for (const char* scheme : kSchemes) {
      quant::PtqResult q = quantized(model, scheme);
      const Tensor cpu = cpu_logits(q.model, x);
      cuda::CudaContext ctx(one_backend(false));
      DeviceNet net(ctx, q.model);
      const Tensor whole = net.predict(x, 0), chunks = net.predict(x, 5);  // 5 + 5 + 3
      const int64_t d_whole = count_differing(whole, cpu), d_chunks = count_differing(chunks, cpu);
      std::cout << "[ tally    ] " << model << " int8 " << scheme << ": " << cpu.numel()
                << " logits compared with the CPU, " << d_whole << " differ (one batch), " << d_chunks
                << " differ (chunks of 5)\n";
      EXPECT_EQ(d_whole, 0) << model << " " << scheme;
      EXPECT_EQ(d_chunks, 0) << model << " " << scheme;
      // Not a constant output: the comparison means something (an untrained net still spreads).
      double lo = cpu.at(0), hi = cpu.at(0);
      for (int64_t i = 0; i < cpu.numel(); ++i) lo = std::min(lo, cpu.at(i)), hi = std::max(hi, cpu.at(i));
      EXPECT_LT(lo, hi) << model << " " << scheme;
    }
}

// ResNet-20 int8 (residual blocks with the option-A shortcut and the fused add_relu, the global
// average, every quantized-add rule: fixed_point_shift (qnnpack), float_fma_tail64 with its tail of
// 64 in channels-last order (onednn, fbgemm), float_ratio_fma (ort), tflite_fixed_point with
// TFLite's integer MEAN (tflite)): the device's logits equal the CPU's bit for bit.
TEST(CudaQuantModel, Resnet20UnderEveryAddRuleEqualsTheCpuBitForBit) {
  REQUIRE_CUDA_DEVICE();
  const Tensor x = random_tensor({3, 3, 32, 32}, DType::f32, 25, 0.0, 1.0);
  for (const char* scheme : kResnetSchemes) {
    quant::PtqResult q = quantized_resnet20(scheme);
    const Tensor cpu = cpu_logits(q.model, x);
    cuda::CudaContext ctx(one_backend(false));
    DeviceNet net(ctx, q.model);
    const Tensor whole = net.predict(x, 0), chunks = net.predict(x, 2);
    const int64_t d_whole = count_differing(whole, cpu), d_chunks = count_differing(chunks, cpu);
    std::cout << "[ tally    ] resnet20 int8 " << scheme << ": " << cpu.numel() << " logits compared with the CPU, "
              << d_whole << " differ (one batch), " << d_chunks << " differ (chunks of 2)\n";
    EXPECT_EQ(d_whole, 0) << scheme;
    EXPECT_EQ(d_chunks, 0) << scheme;
    double lo = cpu.at(0), hi = cpu.at(0);
    for (int64_t i = 0; i < cpu.numel(); ++i) lo = std::min(lo, cpu.at(i)), hi = std::max(hi, cpu.at(i));
    EXPECT_LT(lo, hi) << scheme;
  }
}

// The runner face (`eval --device cuda`): the device runner's predictions of an int8 model are
// the CPU runner's, so accuracy agrees exactly.
TEST(CudaQuantModel, RunnerPredictsLikeTheCpuRunner) {
  REQUIRE_CUDA_DEVICE();
  quant::PtqResult q = quantized("lenet5", "tflite");
  const Tensor x = unit_images(9, 23);
  auto cpu = open_runner(q.model, Device::cpu);
  auto gpu = open_runner(q.model, Device::cuda);
  EXPECT_EQ(count_differing(gpu->logits(x), cpu->logits(x)), 0);
  EXPECT_EQ(count_differing(gpu->logits(x, 4), cpu->logits(x)), 0);
}

// Needs no device: what the device path cannot run is refused by layer path, kind and reason
// before anything is uploaded.
TEST(CudaQuantModelSupport, WhatHasNoDeviceKernelIsRefusedByName) {
  {  // int8 LeNet-5 is covered under every scheme
    for (const char* scheme : kSchemes) {
      quant::PtqResult q = quantized("lenet5", scheme);
      EXPECT_NO_THROW(check_device_supported(q.model)) << scheme;
    }
  }
  {  // x86's int16 product pairs: no dp4a twin
    quant::PtqResult q = quantized("lenet5", "torch_onednn", ",quant_u8s8_dot=int16_pairs_channels");
    try {
      check_device_supported(q.model);
      ADD_FAILURE() << "int16 pairs accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("layer 1 (qconv2d)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("int16_pairs_channels"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
    }
  }
  {  // int8 ResNet-20 (qresidual, qglobal_avg_pool) is covered under the exact-dot schemes
    for (const char* scheme : kResnetSchemes) {
      quant::PtqResult q = quantized_resnet20(scheme);
      EXPECT_NO_THROW(check_device_supported(q.model)) << scheme;
    }
  }
  {  // ... and refused by its path inside the model where a conv uses the int16 pairs
    quant::PtqResult q = quantized_resnet20("torch_onednn", ",quant_u8s8_dot=int16_pairs_channels");
    try {
      check_device_supported(q.model);
      ADD_FAILURE() << "int16 pairs accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("(qconv2d)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("int16_pairs_channels"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace driftlab
