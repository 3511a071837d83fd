// The device counterpart of RnnLayer (LSTM, GRU): own kernels or cuDNN, rnn_mask, last or every state.
#include "engine/cuda/device_layer.h"
#include "engine/layers/rnn_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

// LSTM / GRU, as RnnLayer: the op params it resolved, rnn_mask applied to the mask an embedding
// published, last state or every state out.
class DeviceRnn : public DeviceLayer {
 public:
  DeviceRnn(RnnLayer& l, const std::vector<DeviceParam*>& ps)
      : p_(l.op_params()), steps_(l.steps()), seq_(l.return_sequences()), mask_mode_(l.mask_mode()) {
    w_.w_ih = &ps.at(0)->value, w_.w_hh = &ps.at(1)->value, w_.b_ih = &ps.at(2)->value;
    g_.dw_ih = &ps[0]->grad, g_.dw_hh = &ps[1]->grad, g_.db_ih = &ps[2]->grad;
    std::size_t next = 3;
    if (p_.two_biases) w_.b_hh = &ps.at(next)->value, g_.db_hh = &ps[next]->grad, ++next;
    if (p_.peepholes) w_.w_peep = &ps.at(next)->value, g_.dw_peep = &ps[next]->grad;
  }
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    const char* name = rnn_cell_name(p_.cell);
    check_device_input(name, *x, {steps_, p_.input});
    RnnParams p = p_;
    p.batch = x->dim(0), p.steps = steps_;
    const int64_t n = p.batch, h = p.hidden;
    mask_.reset();
    if (run.step_mask.defined()) {
      check(run.step_mask.batch == n && run.step_mask.steps == steps_, name, ": the padding mask is (",
            run.step_mask.batch, ",", run.step_mask.steps, ") but the input ", shape_str(x->shape()));
      if (mask_mode_ != RnnMask::none) {
        Tensor m({n, steps_}, x->dtype());
        dispatch_dtype(m.dtype(), [&](auto tag) {
          using T = decltype(tag);
          T* d = m.data<T>();
          for (int64_t i = 0; i < m.numel(); ++i) d[i] = run.step_mask.keep[static_cast<std::size_t>(i)] ? T(1) : T(0);
        });
        mask_ = std::make_shared<DeviceTensor>(cuda::to_device(run.ctx, m));
      }
      if (!seq_) run.step_mask = StepMask{};  // the last step carries no per-step mask
    }
    state_.reset();
    if (run.record) state_ = std::make_unique<cuda::RnnDeviceState>();
    DeviceValue h_seq = make_value(run.ctx, {n, steps_, h}, x->dtype());
    cuda::rnn_forward_cuda(run.ctx, p, *x, mask_.get(), w_, *h_seq, state_.get());
    if (seq_) {
      if (mask_ && mask_mode_ == RnnMask::zero) cuda::rnn_zero_masked_rows_cuda(run.ctx, *mask_, *h_seq);
      return h_seq;
    }
    DeviceValue y = make_value(run.ctx, {n, h}, x->dtype());
    cuda::rnn_last_step_cuda(run.ctx, *h_seq, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    const char* name = rnn_cell_name(p_.cell);
    check(state_ != nullptr, name, ": backward without a recorded forward");
    RnnParams p = p_;
    p.batch = state_->x_tm.dim(1), p.steps = steps_;
    p.dh_last_step = !seq_;
    DeviceValue dh = dy;
    if (seq_ && mask_ && mask_mode_ == RnnMask::zero) {  // padded outputs are constant 0
      dh = writable(run.ctx, dy);
      cuda::rnn_zero_masked_rows_cuda(run.ctx, *mask_, *dh);
    }
    DeviceValue dx = run.need_dx ? make_value(run.ctx, {p.batch, steps_, p.input}, dy->dtype()) : nullptr;
    cuda::rnn_backward_cuda(run.ctx, p, w_, *state_, *dh, dx.get(), g_);
    state_.reset();
    return dx;
  }

 private:
  RnnParams p_;
  int64_t steps_;
  bool seq_;
  RnnMask mask_mode_;
  cuda::RnnDeviceWeights w_;
  cuda::RnnDeviceGrads g_;
  DeviceValue mask_;
  std::unique_ptr<cuda::RnnDeviceState> state_;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_rnn(RnnLayer& l, const std::vector<DeviceParam*>& params) {
  return std::make_unique<DeviceRnn>(l, params);
}

}  // namespace driftlab
