// Where a batch first goes non-finite, for the trainer's NaN/Inf check (--on-nonfinite). When a
// step's loss or a parameter gradient is NaN or infinite, the batch is run again layer by layer
// under inference semantics (nothing kept, no BatchNorm statistics moved, no dropout draw) on the
// host, and the first tensor holding a NaN or an infinity is named: the input batch, or a
// layer's output (with that layer's own non-finite weights, if any). Only called on failure, so
// a healthy step pays nothing but the existing finite checks.
#pragma once
#include <string>

#include "engine/model.h"

namespace driftlab {

// What the trainer does when a step goes non-finite: stop with an error naming the step, layer
// and tensor (PyTorch and Keras train on; this is the engine's own guard), or skip the batch
// (no SGD step, counted in the epoch's stats and the run's report).
enum class OnNonFinite { stop, skip_batch };
OnNonFinite parse_on_nonfinite(const std::string& s);  // "train: --on-nonfinite 'X' (allowed: stop, skip-batch)"
const char* on_nonfinite_name(OnNonFinite m);

// Index of the first element of t that is NaN or infinite, or -1.
int64_t first_nonfinite(const Tensor& t);

// "input batch[i] (sample s) is nan" or "layer 3 (relu ...) output[i] (sample s) is nan; its
// weights are finite" or "" when every layer's output is finite under inference semantics (the
// NaN came from train-only behaviour: BatchNorm batch statistics, dropout, or the backward).
std::string locate_nonfinite_forward(const Model& model, ExecContext& exec, const Tensor& x);

}  // namespace driftlab
