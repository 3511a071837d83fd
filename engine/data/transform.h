// Input preprocessing applied to a whole dataset. Frameworks' tutorials differ here
// (Keras examples feed x/255; PyTorch's Normalize(mean, std)), so it is explicit and
// recorded in the model file's metadata, so eval and predict apply the same transform.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/data/dataset.h"

namespace driftlab {

struct InputNorm {
  double mean = 0.0, std = 1.0;  // x' = (x - mean) / std; identity by default
  bool identity() const { return mean == 0.0 && std == 1.0; }
};

// Mean and (population) standard deviation of every pixel of the dataset, in double.
InputNorm compute_standardization(const Dataset& d);
void apply_norm(Dataset& d, const InputNorm& n);
void apply_norm(Tensor& x, const InputNorm& n);

// The transform a model was trained with, from its file's metadata ("input_mean",
// "input_std"); identity when they are absent (files written without --normalize).
InputNorm input_norm_from_metadata(const nlohmann::json& metadata);

}  // namespace driftlab
