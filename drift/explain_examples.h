// The worked examples of `driftlab explain` (drift/explain.cpp dispatches to them), one file per knob
// group: drift/explain_layers.cpp, explain_training.cpp, explain_kernels.cpp, explain_rnn.cpp,
// explain_quant.cpp. Each computes its example live with the engine's own kernels and returns the text.
// To add an example: 1) a function here and in its group's file; 2) its knob's row in explain.cpp's table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/layers/rnn_layer.h"

namespace driftlab {
namespace explain {

// count values of t from begin, printed with prec significant digits: "[a, b, ...]".
std::string row(const Tensor& t, int64_t begin, int64_t count, int prec = 4);
// The three presets, in the order the examples print them.
extern const char* const kPresets[3];

std::string ex_conv_same_pad();
std::string ex_conv_kernel_flip();
std::string ex_flatten_order();
std::string ex_weight_layout();
std::string ex_init();
std::string ex_model_conv_padding();
std::string ex_embedding_init();
std::string ex_relu();
std::string ex_relu_nan();
std::string ex_maxpool_ties();
std::string ex_hard_sigmoid();
std::string ex_ce();
std::string ex_loss_reduction();
std::string ex_sgd(const std::string& knob);
std::string ex_adaptive(const std::string& knob);
std::string ex_plateau();
std::string ex_weight_decay();
std::string ex_rng();
std::string ex_shuffle();
std::string ex_backend(const std::string& knob);
std::string ex_conv_algorithm();
std::string ex_own_backend(const std::string& knob);
std::string ex_acc_order();
std::string ex_batchnorm();
std::string ex_dtype();
std::string ex_rnn_math(const std::string& knob, RnnCell cell, std::vector<float> b_ih, std::vector<float> b_hh,
                        const std::string& what);
std::string ex_peepholes();
std::string ex_rnn_layout(const std::string& knob);
std::string ex_rnn_init(const std::string& knob, std::size_t param);
std::string ex_rnn_mask();
std::string ex_cuda(const std::string& knob);
std::string ex_math(const std::string& knob);
std::string ex_autocast();
std::string ex_autocast_input_cast();
std::string ex_math_rnn();
std::string ex_rnn_autocast(const std::string& knob);
std::string ex_loss_scale(const std::string& knob);
std::string ex_bias_rounding(const std::string& knob);
std::string ex_matmul_sum();
std::string ex_quant(const std::string& knob);
std::string ex_quant_dynamic(const std::string& knob, const std::string& arch = "lstm");

}  // namespace explain
}  // namespace driftlab
