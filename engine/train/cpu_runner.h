// The model face on the CPU: the layers' own forward/backward (engine/layers), the kernels their
// knobs name through the registry, the optimiser's op per parameter tensor.
#pragma once
#include "engine/train/runner.h"

namespace driftlab {

class CpuRunner : public Runner {
 public:
  // `exec`: the kernels and thread count to run with (default: the full registry at OpenMP's count).
  explicit CpuRunner(Model& model, const TrainConfig& config = {}, ExecContext exec = {});
  Device device() const override { return Device::cpu; }
  std::string describe() const override;
  Tensor logits(const Tensor& x, int64_t max_batch = 0) override;
  InputGradient input_gradient(const Tensor& x, const std::vector<int32_t>& labels, Semantics s) override;
  double train_step(const Tensor& x, const std::vector<int32_t>& labels, int64_t* correct = nullptr) override;
  PredictTime time_prediction(const Tensor& x, int64_t max_batch = 0) override;
  OptimState optimizer_state() override { return opt_.state(); }
  void set_optimizer_state(const OptimState& s) override { opt_.set_state(s, model_.net->named_params()); }

  ExecContext& exec() { return exec_; }
  Optimizer& optimizer() { return opt_; }

 private:
  static void scale_elements(Tensor& t, double f);
  double overflow_step(double loss);
  Optimizer opt_;
};

}  // namespace driftlab
