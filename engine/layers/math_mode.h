// A layer's math mode (core/ops/reduced_precision.h) resolved from the Policy, and its
// application around whatever kernel runs the op: the operands a kernel receives are rounded
// copies, its result is rounded in place, so that every backend (reference, Eigen, oneDNN)
// computes the mode with its own float32 accumulation. The convolution and dense layers apply it
// to their forward and to both gradients (an autocast op's gradients come out in its format too).
//
// Autocast (the `autocast` knob) makes a format flow through the network, as torch.autocast
// does: a convolution or dense layer (autocast's lower-precision list) gives its result in the
// format; every other layer runs in its input's format, so its result is rounded to it (a float32
// computation on values of the format, rounded once: PyTorch's CPU kernels for bfloat16 compute
// in float32); a tensor held in the format has its gradient rounded to it in the backward. Each
// layer says which format its output is held in, given its input's (Layer::set_input_format);
// Sequential and ResidualLayer round the results and the gradients where the format is reduced.
#pragma once

#include <string>

#include "core/ops/gemm.h"
#include "core/ops/reduced_precision.h"
#include "core/tensor.h"
#include "engine/policy.h"

namespace driftlab {

// Whether a tensor held in format f is rounded (bfloat16, float16).
inline bool reduced_format(MathMode f) { return f == MathMode::bfloat16 || f == MathMode::float16; }

struct MathSpec {
  MathMode mode = MathMode::float32;
  Rounding tf32_rule = Rounding::nearest_even;
  bool autocast = false;  // the result stays in the format for the layers after (the autocast knob)
  // bfloat16 / float16: the bias added after the product's result is rounded, the sum rounded
  // again (conv_bias_rounding / matmul_bias_rounding = twice); else in the float32 sum, once.
  bool bias_twice = false;
  // bfloat16 / float16: the GEMMs sum as ATen's own CPU GEMM does (matmul_sum=per_term;
  // apply_term_sums), else in float32 in the backend's order.
  bool per_term = false;
  bool active() const { return mode != MathMode::float32; }
  bool bias_after_result() const { return bias_twice && reduced_format(mode); }
  std::string str() const;  // "tf32 (nearest_even)", "bfloat16", ...
};

const char* math_mode_name(MathMode m);

// Under per_term sums (a reduced format), the GEMM's rule as ATen's own CPU GEMM has it (its
// column-major kernels seen from driftlab's row-major call; bench/peers/aten_gemm_probe.py checks
// each against PyTorch 1.13): B stored transposed and A not (x W^T, each output a dot product of
// two stored rows) sums in float32 in ascending order (GemmSum::in_order), rounded once by the
// layer; A and B as stored, or A transposed (dy W, dy^T x), in the format's arithmetic
// (GemmSum::rounded). Both transposed is refused (not measured). Nothing changes otherwise.
void apply_term_sums(GemmParams& p, const MathSpec& m);
const char* rounding_name(Rounding r);

// The Policy's mode for convolutions (math_conv) or dense layers (math_matmul); refuses a
// reduced mode under dtype=float64 by knob name (the modes are float32 formats).
MathSpec conv_math(const Policy& policy);
MathSpec matmul_math(const Policy& policy);

// The format autocast holds tensors in (bfloat16 / float16), float32 when autocast is off.
MathMode autocast_format(const Policy& policy);
// Rounds t's elements in place to format f (nothing for float32); rounded_to: a rounded copy.
void round_to_format(Tensor& t, MathMode f);
Tensor rounded_to(const Tensor& t, MathMode f);

// t itself when the mode is float32, else a copy with every element rounded as an operand.
Tensor math_operand(const Tensor& t, const MathSpec& m);
// A bias operand: t itself for float32 and tf32 (the bias is added in float32, after the tensor
// cores), a copy rounded to the format for float16 / bfloat16 (autocast casts it with the others).
Tensor math_bias(const Tensor& t, const MathSpec& m);
// Rounds t's elements in place as the op's result (float16 / bfloat16; float32 and tf32 keep it).
void math_result(Tensor& t, const MathSpec& m);
// y (N,C,H,W, plain or channel-blocked) += bias[c] on every element of channel c (float32).
void add_channel_bias(Tensor& y, const Tensor& bias);
// acc += the result `call` rounded (nothing when `call` is undefined): a gradient computed apart
// and added to what earlier calls accumulated.
void math_add_result(Tensor& acc, Tensor& call, const MathSpec& m);

}  // namespace driftlab
