// Quantized models in the driftlab model file (models/model_file.h): the int8 network's buffers
// (int8 weights, int32 or float32 biases, float32 scales, int32 zero points) in their own dtypes,
// the policy with its quant_* knobs, and metadata "quantized" (the scheme and how it was
// calibrated). Loading rebuilds the fp32 architecture under the file's policy, converts it to the
// int8 layer sequence (quant/ptq.h build_quantized), reads every tensor into it (names, dtypes and
// shapes checked by the model-file reader) and re-resolves each layer's op params from them.
#pragma once
#include <istream>
#include <string>

#include <nlohmann/json.hpp>

#include "models/model_file.h"

namespace driftlab {
namespace quant {

// `quantized` describes how the model was made (scheme, observer, calibration samples ...); it
// becomes metadata["quantized"] (an object: required).
void save_quantized_model(const std::string& path, Model& model, nlohmann::json metadata,
                          const nlohmann::json& quantized);

// Any driftlab model file, fp32 or int8 (the stream form: `name` is what errors call it).
LoadedModel load_any_model(const std::string& path);
LoadedModel load_any_model(std::istream& in, const std::string& name);
bool is_quantized(const LoadedModel& m);

}  // namespace quant
}  // namespace driftlab
