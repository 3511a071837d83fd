// Which recurrent cells autocast is emulated for (RnnParams::autocast): PyTorch's own LSTM and GRU,
// whose CPU autocast rounding points the reference kernel reproduces. The kernel refuses any other
// cell in op terms (check_rnn_params), the layer in knob terms.
#pragma once

#include "core/ops/rnn.h"

namespace driftlab {

enum class RnnAutocastGap { none, hard_sigmoid, one_bias, peepholes, reset_before, z_takes_new, math_mode };

// The first feature of p's cell that PyTorch's cell lacks (none when autocast can run it).
RnnAutocastGap rnn_autocast_gap(const RnnParams& p);
// "hard sigmoid gates", "one bias", ...
const char* rnn_autocast_gap_name(RnnAutocastGap g);

}  // namespace driftlab
