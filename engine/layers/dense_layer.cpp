#include "engine/layers/dense_layer.h"

#include <sstream>
#include <vector>

#include "engine/layers/init.h"

namespace driftlab {

DenseLayer::DenseLayer(int64_t units, const Shape& in, const Policy& policy, Rng& rng, bool bias)
    : in_(in.size() == 1 ? in[0] : -1),
      out_(units),
      backend_(policy.gemm_backend),
      order_(policy.acc_order),
      has_bias_(bias),
      math_(matmul_math(policy)) {
  check(in.size() == 1, "dense: input must be (features,), got ", shape_str(in), " (add a flatten layer)");
  check(units >= 1, "dense: units=", units, " must be >= 1");
  DType dt = policy.dtype == FloatType::float64 ? DType::f64 : DType::f32;
  weight_ = {"weight", Tensor({out_, in_}, dt), Tensor({out_, in_}, dt), false};
  init_weight(weight_.value, in_, out_, policy, rng);
  if (has_bias_) {
    bias_ = {"bias", Tensor({out_}, dt), Tensor({out_}, dt), true};
    init_bias(bias_.value, in_, policy, rng);
  }
}

std::string DenseLayer::describe() const {
  std::ostringstream os;
  os << "dense " << in_ << "->" << out_ << " [" << backend_name(backend_) << "]";
  if (math_.active()) os << " math " << math_.str();
  return os.str();
}

Tensor DenseLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("dense", x, {in_});
  const int64_t n = x.dim(0);
  Tensor y = Tensor::empty({n, out_}, x.dtype());
  GemmParams p;
  p.m = n;
  p.n = out_;
  p.k = in_;
  p.trans_b = true;
  p.sum_order = order_;
  apply_term_sums(p, math_);
  const GemmKernel& g = ctx.exec.pick(ctx.exec.kernels.gemm, backend_, p, x.dtype());
  // A reduced math mode (engine/layers/math_mode.h): rounded operands, the bias in the storage
  // format only, the result (bias added) rounded; under bias rounding `twice` the product is
  // rounded before the bias is added.
  const Tensor xo = math_operand(x, math_), wo = math_operand(weight_.value, math_);
  const Tensor bo = has_bias_ ? math_bias(bias_.value, math_) : Tensor();
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    run_gemm<T>(g, p, xo.data<T>(), wo.data<T>(), y.data<T>());
    if (has_bias_ && math_.bias_after_result()) math_result(y, math_);
    if (has_bias_) {
      T* yd = y.data<T>();
      const T* b = bo.data<T>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < out_; ++j) yd[i * out_ + j] += b[j];
    }
  });
  math_result(y, math_);
  x_ = ctx.record ? xo : Tensor();
  return y;
}

Tensor DenseLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(x_.defined(), "dense: backward without a recorded forward");
  const int64_t n = x_.dim(0);
  check_shape("dense backward", "dy", dy, {n, out_});
  Tensor dx = Tensor::empty({n, in_}, dy.dtype());
  GemmParams pd;  // dx = dy W
  pd.m = n;
  pd.n = in_;
  pd.k = out_;
  pd.sum_order = order_;
  GemmParams pw;  // dW += dy^T x
  pw.m = out_;
  pw.n = in_;
  pw.k = n;
  pw.trans_a = true;
  pw.beta = 1.0;
  pw.sum_order = order_;
  apply_term_sums(pd, math_);
  apply_term_sums(pw, math_);
  const GemmKernel& gd = ctx.exec.pick(ctx.exec.kernels.gemm, backend_, pd, dy.dtype());
  const GemmKernel& gw = ctx.exec.pick(ctx.exec.kernels.gemm, backend_, pw, dy.dtype());
  // A reduced math mode: dy and W rounded as operands (x_ is the forward's rounded operand); this
  // call's weight gradients computed apart, rounded as results, then added.
  const Tensor dyo = math_operand(dy, math_), wo = math_operand(weight_.value, math_);
  Tensor dw_call, db_call;
  if (math_.active() && ctx.param_grads) {
    dw_call = Tensor(weight_.grad.shape(), weight_.grad.dtype());
    if (has_bias_) db_call = Tensor(bias_.grad.shape(), bias_.grad.dtype());
  }
  Tensor& dw = dw_call.defined() ? dw_call : weight_.grad;
  Tensor& dbt = db_call.defined() ? db_call : bias_.grad;
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    run_gemm<T>(gd, pd, dyo.data<T>(), wo.data<T>(), dx.data<T>());
    if (!ctx.param_grads) return;
    run_gemm<T>(gw, pw, dyo.data<T>(), x_.data<T>(), dw.data<T>());
    if (has_bias_) {
      const T* d = dyo.data<T>();
      T* db = dbt.data<T>();
      std::vector<T> col(static_cast<std::size_t>(n));
      for (int64_t j = 0; j < out_; ++j) {
        for (int64_t i = 0; i < n; ++i) col[i] = d[i * out_ + j];
        db[j] += ordered_sum(col.data(), n, order_);
      }
    }
  });
  math_result(dx, math_);
  math_add_result(weight_.grad, dw_call, math_);
  math_add_result(bias_.grad, db_call, math_);
  x_ = Tensor();  // the backward takes the recording (engine/layers/layer.h)
  return dx;
}

std::vector<Param*> DenseLayer::params() {
  if (has_bias_) return {&weight_, &bias_};
  return {&weight_};
}

}  // namespace driftlab
