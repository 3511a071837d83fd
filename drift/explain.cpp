#include "drift/explain.h"

#include <functional>
#include <iomanip>
#include <map>
#include <sstream>

#include "drift/explain_examples.h"
#include "engine/policy.h"

namespace driftlab {

namespace explain {

std::string row(const Tensor& t, int64_t begin, int64_t count, int prec) {
  std::ostringstream os;
  os << std::setprecision(prec) << "[";
  for (int64_t i = 0; i < count; ++i) os << (i ? ", " : "") << t.at(begin + i);
  os << "]";
  return os.str();
}

const char* const kPresets[3] = {"tensorflow", "theano", "torch"};

}  // namespace explain

using namespace explain;

std::string explain_knob(const std::string& knob) {
  const KnobInfo& k = knob_info(knob);
  std::ostringstream os;
  os << k.name << " (" << k.group << "): " << k.what << "\n";
  if (!k.values.empty()) {
    os << "values:";
    for (const auto& v : k.values) os << " " << v;
    os << "\n";
  } else {
    os << "values: a number\n";
  }
  os << "  tensorflow (Keras 2.2.4 on TF 1.x) = " << Policy::tensorflow().get(knob) << ": " << k.tensorflow << "\n"
     << "  theano     (Keras 2.2.4 on Theano) = " << Policy::theano().get(knob) << ": " << k.theano << "\n"
     << "  torch      (PyTorch 1.13)          = " << Policy::torch().get(knob) << ": " << k.torch << "\n"
     << "source: " << k.source << "\n\nexample (computed now by driftlab's kernels):\n";
  static const std::map<std::string, std::function<std::string()>> kExamples = {
      {"conv_same_pad", ex_conv_same_pad},
      {"conv_kernel_flip", ex_conv_kernel_flip},
      {"flatten_order", ex_flatten_order},
      {"weight_layout", ex_weight_layout},
      {"init_weight", ex_init},
      {"init_bias", ex_init},
      {"embedding_init", ex_embedding_init},
      {"model_conv_padding", ex_model_conv_padding},
      {"relu_grad_at_zero", ex_relu},
      {"relu_grad_at_nan", ex_relu_nan},
      {"maxpool_grad_ties", ex_maxpool_ties},
      {"hard_sigmoid_kind", ex_hard_sigmoid},
      {"hard_sigmoid_grad_edges", ex_hard_sigmoid},
      {"ce_formulation", ex_ce},
      {"ce_clip_eps", ex_ce},
      {"loss_reduction", ex_loss_reduction},
      {"sgd_form", [] { return ex_sgd("sgd_form"); }},
      {"weight_decay_mode", ex_weight_decay},
      {"adam_form", [] { return ex_adaptive("adam_form"); }},
      {"optim_moment_update", [] { return ex_adaptive("optim_moment_update"); }},
      {"optim_square_order", [] { return ex_adaptive("optim_square_order"); }},
      {"adam_beta_power", [] { return ex_adaptive("adam_beta_power"); }},
      {"optim_scalar_precision", [] { return ex_adaptive("optim_scalar_precision"); }},
      {"adam_eps", [] { return ex_adaptive("adam_eps"); }},
      {"rmsprop_form", [] { return ex_adaptive("rmsprop_form"); }},
      {"rmsprop_rho", [] { return ex_adaptive("rmsprop_rho"); }},
      {"rmsprop_eps", [] { return ex_adaptive("rmsprop_eps"); }},
      {"rmsprop_ms_init", [] { return ex_adaptive("rmsprop_ms_init"); }},
      {"plateau_rule", ex_plateau},
      {"optim_fma", [] { return ex_adaptive("optim_fma"); }},
      {"adam_lr_t_order", [] { return ex_adaptive("adam_lr_t_order"); }},
      {"weight_decay_on_bias", ex_weight_decay},
      {"rng_engine", ex_rng},
      {"shuffle", ex_shuffle},
      {"conv_backend", [] { return ex_backend("conv_backend"); }},
      {"conv_algorithm", [] { return ex_conv_algorithm(); }},
      {"gemm_backend", [] { return ex_backend("gemm_backend"); }},
      {"conv_block_backend", [] { return ex_own_backend("conv_block_backend"); }},
      {"rnn_backend", [] { return ex_own_backend("rnn_backend"); }},
      {"bn_backend", [] { return ex_own_backend("bn_backend"); }},
      {"pool_backend", [] { return ex_own_backend("pool_backend"); }},
      {"act_backend", [] { return ex_own_backend("act_backend"); }},
      {"loss_backend", [] { return ex_own_backend("loss_backend"); }},
      {"sgd_backend", [] { return ex_own_backend("sgd_backend"); }},
      {"acc_order", ex_acc_order},
      {"dtype", ex_dtype},
      {"bn_eps", ex_batchnorm},
      {"bn_momentum", ex_batchnorm},
      {"bn_running_var", ex_batchnorm},
      {"bn_zero_debias", ex_batchnorm},
      {"rnn_weight_layout", [] { return ex_rnn_layout("rnn_weight_layout"); }},
      {"gru_gate_order", [] { return ex_rnn_layout("gru_gate_order"); }},
      {"rnn_num_bias",
       [] { return ex_rnn_math("rnn_num_bias", RnnCell::gru, {0, 0, 0}, {0, 0, 1}, "only the recurrent n bias b_hn = 1"); }},
      {"rnn_recurrent_activation",
       [] { return ex_rnn_math("rnn_recurrent_activation", RnnCell::lstm, {1, 0, 0.5f, 1}, {0, 0, 0, 0},
                               "b_i = b_o = 1, b_g = 0.5: h = o*tanh(i*tanh(0.5))"); }},
      {"gru_reset_after",
       [] { return ex_rnn_math("gru_reset_after", RnnCell::gru, {0, 0, 0}, {0, 0, 1},
                               "b_hn = 1, r = 1/2: after tanh(r*b_hn), before tanh(b_hn)"); }},
      {"gru_update_convention",
       [] { return ex_rnn_math("gru_update_convention", RnnCell::gru, {0, 1, 1}, {0, 0, 0},
                               "b_z = b_n = 1: h = (1-z)*n or z*n"); }},
      {"rnn_kernel_init", [] { return ex_rnn_init("rnn_kernel_init", 0); }},
      {"rnn_recurrent_init", [] { return ex_rnn_init("rnn_recurrent_init", 1); }},
      {"rnn_bias_init", [] { return ex_rnn_init("rnn_bias_init", 2); }},
      {"lstm_forget_bias_init", [] { return ex_rnn_init("lstm_forget_bias_init", 2); }},
      {"lstm_peepholes", ex_peepholes},
      {"rnn_mask", ex_rnn_mask},
      {"math_conv", [] { return ex_math("math_conv"); }},
      {"math_matmul", [] { return ex_math("math_matmul"); }},
      {"tf32_rounding", [] { return ex_math("tf32_rounding"); }},
      {"math_rnn", ex_math_rnn},
      {"autocast", ex_autocast},
      {"autocast_input_cast", ex_autocast_input_cast},
      {"rnn_autocast_rule", [] { return ex_rnn_autocast("rnn_autocast_rule"); }},
      {"rnn_input_bias_rounding", [] { return ex_rnn_autocast("rnn_input_bias_rounding"); }},
      {"loss_scale", [] { return ex_loss_scale("loss_scale"); }},
      {"loss_scale_init", [] { return ex_loss_scale("loss_scale_init"); }},
      {"loss_scale_growth_interval", [] { return ex_loss_scale("loss_scale_growth_interval"); }},
      {"loss_scale_min", [] { return ex_loss_scale("loss_scale_min"); }},
      {"loss_scale_skipped_step", [] { return ex_loss_scale("loss_scale_skipped_step"); }},
      {"conv_bias_rounding", [] { return ex_bias_rounding("conv_bias_rounding"); }},
      {"matmul_bias_rounding", [] { return ex_bias_rounding("matmul_bias_rounding"); }},
      {"matmul_sum", ex_matmul_sum},
      {"cuda_kernels", [] { return ex_cuda("cuda_kernels"); }},
      {"tf32_matmul", [] { return ex_cuda("tf32_matmul"); }},
      {"tf32_conv", [] { return ex_cuda("tf32_conv"); }},
      {"cuda_deterministic", [] { return ex_cuda("cuda_deterministic"); }},
      {"cudnn_algo_search", [] { return ex_cuda("cudnn_algo_search"); }},
      {"cudnn_rnn_algo", [] { return ex_cuda("cudnn_rnn_algo"); }},
      {"quant_scheme", [] { return ex_quant("quant_scheme"); }},
      {"quant_act_dtype", [] { return ex_quant("quant_act_dtype"); }},
      {"quant_act_range", [] { return ex_quant("quant_act_range"); }},
      {"quant_observer", [] { return ex_quant("quant_observer"); }},
      {"quant_weight_range", [] { return ex_quant("quant_weight_range"); }},
      {"quant_conv_weights", [] { return ex_quant("quant_conv_weights"); }},
      {"quant_dense_weights", [] { return ex_quant("quant_dense_weights"); }},
      {"quant_weight_scale_op", [] { return ex_quant("quant_weight_scale_op"); }},
      {"quant_act_scale_op", [] { return ex_quant("quant_act_scale_op"); }},
      {"quant_round", [] { return ex_quant("quant_round"); }},
      {"quant_zp_round", [] { return ex_quant("quant_zp_round"); }},
      {"quant_zp_form", [] { return ex_quant("quant_zp_form"); }},
      {"quant_scale_precision", [] { return ex_quant("quant_scale_precision"); }},
      {"quant_scale_floor", [] { return ex_quant("quant_scale_floor"); }},
      {"quant_bias", [] { return ex_quant("quant_bias"); }},
      {"quant_bias_product", [] { return ex_quant("quant_bias_product"); }},
      {"quant_requant", [] { return ex_quant("quant_requant"); }},
      {"quant_multiplier", [] { return ex_quant("quant_multiplier"); }},
      {"quant_relu", [] { return ex_quant("quant_relu"); }},
      {"quant_u8s8_dot", [] { return ex_quant("quant_u8s8_dot"); }},
      {"quant_backend", [] { return ex_quant("quant_backend"); }},
      {"quant_add", [] { return ex_quant("quant_add"); }},
      {"quant_avg_pool", [] { return ex_quant("quant_avg_pool"); }},
      {"quant_dyn_act", [] { return ex_quant_dynamic("quant_dyn_act"); }},
      {"quant_dyn_range", [] { return ex_quant_dynamic("quant_dyn_range"); }},
      {"quant_dyn_weights", [] { return ex_quant_dynamic("quant_dyn_weights"); }},
      {"quant_dyn_output", [] { return ex_quant_dynamic("quant_dyn_output"); }},
      {"quant_dyn_input_proj", [] { return ex_quant_dynamic("quant_dyn_input_proj"); }},
      {"quant_dyn_gru", [] { return ex_quant_dynamic("quant_dyn_gru", "gru"); }},
  };
  auto it = kExamples.find(knob);
  check(it != kExamples.end(), "explain: knob '", knob, "' has no worked example yet");
  os << it->second();
  return os.str();
}

}  // namespace driftlab
