#include "engine/layers/math_mode.h"

#include "core/error.h"
#include "engine/layers/layout.h"
#include "kernels/cpu/fast/round_fast.h"

namespace driftlab {

const char* math_mode_name(MathMode m) {
  switch (m) {
    case MathMode::float32: return "float32";
    case MathMode::tf32: return "tf32";
    case MathMode::bfloat16: return "bfloat16";
    case MathMode::float16: return "float16";
  }
  return "?";
}

const char* rounding_name(Rounding r) {
  switch (r) {
    case Rounding::nearest_even: return "nearest_even";
    case Rounding::nearest_away: return "nearest_away";
    case Rounding::truncate: return "truncate";
  }
  return "?";
}

std::string MathSpec::str() const {
  std::string s = math_mode_name(mode);
  if (mode == MathMode::tf32) s += std::string(" (") + rounding_name(tf32_rule) + ")";
  if (autocast) s += " (autocast)";
  if (bias_after_result()) s += " (bias after rounding)";
  if (per_term && reduced_format(mode)) s += " (per-term sums)";
  return s;
}

namespace {
MathSpec resolve(const Policy& policy, MathMode mode, const char* knob) {
  check(mode == MathMode::float32 || policy.dtype == FloatType::float32, knob, "=", math_mode_name(mode),
        " rounds float32 operands: it needs dtype=float32 (the policy has dtype=float64)");
  return {mode, policy.tf32_rounding};
}

MathSpec autocast_op(const Policy& policy, MathMode mode, const char* knob) {
  const MathMode f = autocast_format(policy);
  if (f == MathMode::float32) return resolve(policy, mode, knob);
  check(mode == MathMode::float32, knob, "=", math_mode_name(mode), " and autocast=", math_mode_name(f),
        " both choose the layer's format: autocast runs convolutions and dense layers in ", math_mode_name(f),
        "; leave ", knob, " at float32");
  MathSpec m = resolve(policy, f, "autocast");
  m.autocast = true;
  return m;
}
}  // namespace

MathMode autocast_format(const Policy& policy) {
  switch (policy.autocast) {
    case Autocast::off: return MathMode::float32;
    case Autocast::bfloat16: return MathMode::bfloat16;
    case Autocast::float16: return MathMode::float16;
  }
  return MathMode::float32;
}

MathSpec conv_math(const Policy& policy) {
  MathSpec m = autocast_op(policy, policy.math_conv, "math_conv");
  m.bias_twice = policy.conv_bias_rounding == BiasRounding::twice;
  return m;
}
MathSpec matmul_math(const Policy& policy) {
  MathSpec m = autocast_op(policy, policy.math_matmul, "math_matmul");
  m.bias_twice = policy.matmul_bias_rounding == BiasRounding::twice;
  m.per_term = policy.matmul_sum == MatmulSum::per_term;
  return m;
}

void apply_term_sums(GemmParams& p, const MathSpec& m) {
  if (!m.per_term || !reduced_format(m.mode)) return;
  check(!(p.trans_a && p.trans_b), "matmul_sum=per_term: a product with both operands transposed is not emulated "
        "(ATen's kernel for it was not measured)");
  if (p.trans_b) {
    p.sum = GemmSum::in_order;
    p.sum_order = SumOrder::ascending;
  } else {
    p.sum = GemmSum::rounded;
    p.term_format = m.mode;
  }
}

void round_to_format(Tensor& t, MathMode f) {
  if (reduced_format(f)) math_result(t, MathSpec{f});
}

Tensor rounded_to(const Tensor& t, MathMode f) {
  if (!reduced_format(f)) return t;
  Tensor r = t.clone();
  round_to_format(r, f);
  return r;
}

namespace {
float* elements(Tensor& t) { return t.channel_block() ? t.blocked_data<float>() : t.data<float>(); }

// The vector rounding (kernels/cpu/fast/round_fast.h: bit for bit the scalar functions).
void round_elements(Tensor& t, MathMode m, Rounding tf32_rule) {
  const RoundFormat f = m == MathMode::tf32 ? RoundFormat::tf32 : m == MathMode::bfloat16 ? RoundFormat::bf16
                                                                                          : RoundFormat::fp16;
  round_floats(elements(t), t.numel(), f, m == MathMode::tf32 ? tf32_rule : Rounding::nearest_even);
}
}  // namespace

Tensor math_operand(const Tensor& t, const MathSpec& m) {
  if (!m.active()) return t;
  check(t.dtype() == DType::f32, "math mode ", m.str(), ": a float32 tensor is needed, got ", dtype_name(t.dtype()));
  Tensor r = t.clone();
  round_elements(r, m.mode, m.tf32_rule);
  return r;
}

Tensor math_bias(const Tensor& t, const MathSpec& m) { return rounded_to(t, m.mode); }

void math_result(Tensor& t, const MathSpec& m) {
  if (!reduced_format(m.mode)) return;
  check(t.dtype() == DType::f32, "math mode ", m.str(), ": a float32 tensor is needed, got ", dtype_name(t.dtype()));
  round_elements(t, m.mode, m.tf32_rule);
}

void add_channel_bias(Tensor& y, const Tensor& bias) {
  check(y.dtype() == DType::f32 && y.rank() == 4 && bias.numel() == y.dim(1), "add_channel_bias: a float32 (N,C,H,W) "
        "tensor and C biases are needed, got ", shape_str(y.shape()), " and ", bias.numel());
  const int64_t n = y.dim(0), c = y.dim(1), hw = y.dim(2) * y.dim(3);
  const float* bd = bias.data<float>();
  float* d = elements(y);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t s = 0; s < hw; ++s) d[blocked_offset(i, ch, s, c, hw, y.channel_block())] += bd[ch];
}

void math_add_result(Tensor& acc, Tensor& call, const MathSpec& m) {
  if (!call.defined()) return;
  math_result(call, m);
  check_shape("math mode", "gradient", call, acc.shape());
  float* a = acc.data<float>();
  const float* c = call.data<float>();
  for (int64_t i = 0; i < acc.numel(); ++i) a[i] += c[i];
}

}  // namespace driftlab
