// The fast dynamic-range dense kernel (kernels/cpu/fast/quant_dynamic_fast.cpp, registry slot `fast`)
// against the reference (kernels/cpu/ref/quant_dynamic_ref.cpp), byte for byte: the float outputs
// must be the same bits, so every comparison is bitwise_equal (no tolerance). Awkward shapes (one
// row, rows that leave a register tile part full, inputs that are not a multiple of 4 or 16,
// outputs that are not a multiple of 16), every input rule at both roundings (and both scale ops
// and the reduced range where the rule has them), both output rules, per-tensor and per-row weight
// scales, with and without bias; inputs with ties at exact half steps, all-zero rows and extreme
// values; 1 to 3 threads; then LSTM and GRU classifiers quantized under every scheme, fast vs
// reference logits.
#include <gtest/gtest.h>
#include <omp.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "quant/dynamic.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

const KernelRegistry& registry() {
  static const KernelRegistry reg = make_cpu_registry();
  return reg;
}

struct ActCase {
  const char* name;
  DynActRule act;
  int32_t qmin, qmax;
  ScaleOp op;
  RoundRule round;
};
// Every rule with the ranges, scale ops and roundings the schemes use, and the other rounding.
const ActCase kActCases[] = {
    {"affine_double_mul_even", DynActRule::affine_double, 0, 255, ScaleOp::mul_reciprocal, RoundRule::half_even},
    {"affine_double_mul_away", DynActRule::affine_double, 0, 255, ScaleOp::mul_reciprocal, RoundRule::half_away},
    {"affine_double_div_even", DynActRule::affine_double, 0, 255, ScaleOp::divide, RoundRule::half_even},
    {"affine_double_reduced", DynActRule::affine_double, 0, 127, ScaleOp::mul_reciprocal, RoundRule::half_even},
    {"affine_float_div_even", DynActRule::affine_float, 0, 255, ScaleOp::divide, RoundRule::half_even},
    {"affine_float_mul_away", DynActRule::affine_float, 0, 255, ScaleOp::mul_reciprocal, RoundRule::half_away},
    {"symmetric_away", DynActRule::symmetric_per_row, -127, 127, ScaleOp::mul_reciprocal, RoundRule::half_away},
    {"symmetric_even", DynActRule::symmetric_per_row, -127, 127, ScaleOp::mul_reciprocal, RoundRule::half_even},
    {"affine_per_row_away", DynActRule::affine_per_row, -128, 127, ScaleOp::mul_reciprocal, RoundRule::half_away},
    {"affine_per_row_even", DynActRule::affine_per_row, -128, 127, ScaleOp::mul_reciprocal, RoundRule::half_even},
};

enum class Input { uniform, ties_affine, ties_symmetric, zero_rows, all_zero, extreme };
const char* input_name(Input k) {
  switch (k) {
    case Input::uniform: return "uniform";
    case Input::ties_affine: return "ties_affine";
    case Input::ties_symmetric: return "ties_symmetric";
    case Input::zero_rows: return "zero_rows";
    case Input::all_zero: return "all_zero";
    case Input::extreme: return "extreme";
  }
  return "?";
}

// x (n, in) of the given kind. The tie kinds make the scale exactly 1 (or the multiplier exactly
// 1) so that every half-integer value lands on a rounding tie:
//   ties_affine: half-integers in [-64, 191] with -64 and 191 in every row: the affine rules get
//     s = 255/255 = 1 (zero point 64, or -64 per row), every x * (1/s) or x / s a tie;
//   ties_symmetric: half-integers in [-127, 127] with 127 in every row: symmetric_per_row's
//     multiplier 127/127 = 1.
Tensor make_input(Input kind, int64_t n, int64_t in, uint64_t seed) {
  Tensor x({n, in}, DType::f32);
  float* d = x.data<float>();
  std::mt19937_64 gen(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(gen() % static_cast<uint64_t>(hi - lo + 1)); };
  const float extremes[] = {1e30f, -1e30f, 3e38f, -3e38f, 1e-30f, -1e-30f, 0.0f, -0.0f, 1.0f, -2.5f, 65504.f};
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < in; ++k) {
      float& v = d[r * in + k];
      switch (kind) {
        case Input::uniform: v = static_cast<float>(-1.5 + 4.0 * static_cast<double>(gen() >> 11) * 0x1.0p-53); break;
        case Input::ties_affine:
          v = k == 0 ? -64.f : k == 1 ? 191.f : static_cast<float>(pick(-64, 190)) + 0.5f;
          break;
        case Input::ties_symmetric: v = k == 0 ? 127.f : static_cast<float>(pick(-127, 126)) + 0.5f; break;
        case Input::zero_rows:
          v = r % 2 == 1 ? 0.0f : static_cast<float>(pick(-1000, 1000)) / 256.f;
          break;
        case Input::all_zero: v = 0.0f; break;
        case Input::extreme: v = extremes[pick(0, 10)]; break;
      }
    }
  return x;
}

struct Weights {
  Tensor w, scale, bias;
};
// int8 weights over the full range (-128 included), scales of different sizes per row.
Weights make_weights(int64_t out, int64_t in, bool per_row, uint64_t seed) {
  Weights r{Tensor({out, in}, DType::i8), Tensor({per_row ? out : 1}, DType::f32), Tensor({out}, DType::f32)};
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < r.w.numel(); ++i) r.w.data<int8_t>()[i] = static_cast<int8_t>(gen() & 255);
  if (in > 2) r.w.data<int8_t>()[0] = -128, r.w.data<int8_t>()[1] = 127;
  for (int64_t i = 0; i < r.scale.numel(); ++i)
    r.scale.data<float>()[i] = static_cast<float>(1 + gen() % 1000) * 1.7e-5f;
  for (int64_t i = 0; i < out; ++i) r.bias.data<float>()[i] = static_cast<float>(static_cast<int64_t>(gen() % 2001) - 1000) * 3.1e-3f;
  return r;
}

QDenseDynamicParams params_of(const ActCase& a, int64_t n, int64_t in, int64_t out, DynOutRule rule, bool bias) {
  QDenseDynamicParams p;
  p.n = n, p.in = in, p.out = out;
  p.act = a.act, p.qmin = a.qmin, p.qmax = a.qmax, p.x_op = a.op, p.x_round = a.round;
  p.out_rule = rule;
  p.has_bias = bias;
  return p;
}

// Fast and reference outputs of one call, byte-compared under every output rule, weight-scale
// granularity and bias.
void expect_same(const ActCase& a, const Tensor& x, int64_t out, uint64_t seed) {
  const int64_t n = x.dim(0), in = x.dim(1);
  for (bool per_row : {false, true}) {
    const Weights wt = make_weights(out, in, per_row, seed);
    for (DynOutRule rule : {DynOutRule::scale_then_bias, DynOutRule::prescaled_bias})
      for (bool bias : {false, true}) {
        const QDenseDynamicParams p = params_of(a, n, in, out, rule, bias);
        Tensor yf({n, out}, DType::f32), yr({n, out}, DType::f32);
        const Tensor* b = bias ? &wt.bias : nullptr;
        registry().qdense_dynamic.at(KernelBackend::fast).forward(p, x, wt.w, wt.scale, b, yf);
        registry().qdense_dynamic.reference().forward(p, x, wt.w, wt.scale, b, yr);
        EXPECT_TRUE(bitwise_equal(yf, yr)) << a.name << " " << dyn_out_rule_name(rule)
                                           << (per_row ? " per-row" : " per-tensor") << (bias ? " bias" : " no bias")
                                           << " n=" << n << " in=" << in << " out=" << out;
      }
  }
}

const int64_t kNs[] = {1, 3, 17, 64};
const int64_t kIns[] = {1, 3, 28, 37, 128, 130};
const int64_t kOuts[] = {1, 5, 16, 17, 512, 515};

TEST(QuantDynamicFast, RegisteredInTheFastSlot) {
  EXPECT_STREQ(registry().qdense_dynamic.at(KernelBackend::fast).name, "fast");
}

TEST(QuantDynamicFast, EveryShapeAndRuleMatchesTheReferenceBitForBit) {
  uint64_t seed = 1;
  for (const ActCase& a : kActCases)
    for (int64_t n : kNs)
      for (int64_t in : kIns)
        for (int64_t out : kOuts) {
          ++seed;
          expect_same(a, make_input(Input::uniform, n, in, seed), out, seed);
        }
}

TEST(QuantDynamicFast, TiesZeroRowsAndExtremesMatchTheReference) {
  uint64_t seed = 1000;
  for (Input kind : {Input::ties_affine, Input::ties_symmetric, Input::zero_rows, Input::all_zero, Input::extreme})
    for (const ActCase& a : kActCases)
      for (int64_t n : {1, 17})
        for (int64_t in : {3, 37, 130})
          for (int64_t out : {17, 515}) {
            SCOPED_TRACE(input_name(kind));
            ++seed;
            expect_same(a, make_input(kind, n, in, seed), out, seed);
          }
}

TEST(QuantDynamicFast, TheTieInputsDoLandOnTies) {
  // The tie kinds are only adversarial if the rounding rule changes the integers: the outputs of
  // half_even and half_away must differ somewhere (on the reference, so the fast kernel is held to both).
  for (Input kind : {Input::ties_affine, Input::ties_symmetric}) {
    const bool sym = kind == Input::ties_symmetric;
    const ActCase even = sym ? kActCases[7] : kActCases[0], away = sym ? kActCases[6] : kActCases[1];
    const Tensor x = make_input(kind, 3, 37, 5);
    const Weights wt = make_weights(17, 37, false, 5);
    Tensor ye({3, 17}, DType::f32), ya({3, 17}, DType::f32);
    registry().qdense_dynamic.reference().forward(params_of(even, 3, 37, 17, DynOutRule::scale_then_bias, false), x,
                                                  wt.w, wt.scale, nullptr, ye);
    registry().qdense_dynamic.reference().forward(params_of(away, 3, 37, 17, DynOutRule::scale_then_bias, false), x,
                                                  wt.w, wt.scale, nullptr, ya);
    EXPECT_FALSE(bitwise_equal(ye, ya)) << input_name(kind);
  }
}

TEST(QuantDynamicFast, ResultsDoNotDependOnTheThreadCount) {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    SCOPED_TRACE(threads);
    for (const ActCase& a : {kActCases[0], kActCases[6], kActCases[8]})
      expect_same(a, make_input(Input::uniform, 64, 130, 77), 515, 77);
  }
  omp_set_num_threads(saved);
}

// ---------------- whole models ----------------

Tensor logits(Model& m, const Tensor& x, std::vector<KernelChoice>* trace = nullptr) {
  ExecContext exec;
  exec.trace = trace;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

TEST(QuantDynamicFast, LstmAndGruClassifiersGiveTheReferenceLogits) {
  const Tensor x = random_tensor({9, 28, 28}, DType::f32, 81, -0.5, 1.5);
  for (const char* arch : {"lstm", "gru"}) {
    Model fp = build_model(arch, Policy::torch(), 3);
    for (const char* scheme : {"torch_qnnpack", "torch_onednn", "torch_fbgemm", "tflite", "ort"})
      for (const char* extra : {"", ",quant_dyn_output=prescaled_bias", ",quant_dyn_input_proj=per_step"}) {
        const std::string pol = std::string("torch,quant_scheme=") + scheme + extra;
        SCOPED_TRACE(std::string(arch) + " " + pol);
        Model qf = quant::quantize_dynamic(fp, Policy::parse(pol + ",quant_backend=fast"));
        Model qr = quant::quantize_dynamic(fp, Policy::parse(pol + ",quant_backend=reference"));
        std::vector<KernelChoice> trace;
        const Tensor yf = logits(qf, x, &trace), yr = logits(qr, x);
        EXPECT_TRUE(bitwise_equal(yf, yr));
        bool fast_ran = false;
        for (const KernelChoice& c : trace) fast_ran |= std::string(c.op) == "qdense_dynamic" && std::string(c.kernel) == "fast";
        EXPECT_TRUE(fast_ran) << "the fast kernel was not selected";
      }
  }
}

}  // namespace
}  // namespace driftlab
