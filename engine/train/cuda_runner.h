// The model face on a CUDA device: the same loop as the CPU runner (shuffle, batches, the
// Policy's loss formulation and SGD formula, dropout draws, the NaN checks), with the weights,
// gradients and optimiser state on the device; each batch is copied up, and only the loss, the
// logits (N x classes, for accuracy) and one non-finite flag per parameter come back per step.
// sync_to_model() copies the weights back into the CPU Model.
#pragma once
#include <memory>
#include <vector>

#include "engine/cuda/device_net.h"
#include "kernels/cuda/ops.h"
#include "engine/train/runner.h"

namespace driftlab {

class CudaRunner : public Runner {
 public:
  // Opens device 0 with the Policy's cuda knobs ("no CUDA device: ..." without one) after
  // checking that every layer has a device counterpart, and uploads the model.
  explicit CudaRunner(Model& model, const TrainConfig& config = {});
  // On a context the caller opened (tests choose its exec params); ctx must outlive the runner.
  CudaRunner(Model& model, cuda::CudaContext& ctx, const TrainConfig& config = {});
  Device device() const override { return Device::cuda; }
  std::string describe() const override;
  Tensor logits(const Tensor& x, int64_t max_batch = 0) override;
  InputGradient input_gradient(const Tensor& x, const std::vector<int32_t>& labels, Semantics s) override;
  bool linf_steps(const void* x0, const void* start, void* x_adv, const Shape& shape, DType dtype,
                  const std::vector<int32_t>& target, const LinfSteps& spec, LinfStepsResult* out) override;
  double train_step(const Tensor& x, const std::vector<int32_t>& labels, int64_t* correct = nullptr) override;
  PredictTime time_prediction(const Tensor& x, int64_t max_batch = 0) override;
  void sync_to_model() override { net_->download(); }
  OptimState optimizer_state() override;
  void set_optimizer_state(const OptimState& s) override;

  DeviceNet& net() { return *net_; }
  cuda::CudaContext& context() { return ctx_; }

 protected:
  void synchronize() override;

 private:
  // The loss and dz of logits on the device (the Policy's formulation through the cuda dispatch);
  // with_loss false: dz alone (an attack's steps need no loss value: no reduction, no wait for it),
  // and NaN returned.
  double device_loss(const cuda::DeviceTensor& logits, const std::vector<int32_t>& labels, cuda::DeviceTensor& dz,
                     bool with_loss = true);

  std::unique_ptr<cuda::CudaContext> owned_;  // set when this runner opened the device
  cuda::CudaContext& ctx_;
  std::unique_ptr<DeviceNet> net_;
  void init_state();
  OptimSchedule sched_;                    // the optimiser's counters and per-step parameters
  std::vector<cuda::DeviceTensor> state_, state1_;  // per parameter: OptimState's slot0 / slot1
  cuda::DeviceTensor flags_;               // one non-finite flag per parameter gradient
  cuda::TensorTable grad_table_;           // the gradients, for flagging them in one launch
  // train_step's pinned memory: the batch and labels going up, the losses, flags and logits
  // coming back (two buffers, so that taking the second never waits for the first's copies).
  std::unique_ptr<cuda::PinnedBuffer> staging_, readback_;
};

}  // namespace driftlab
