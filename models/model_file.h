// The driftlab model file (.dlm), version 2. All integers little-endian.
//   offset 0   8 bytes   magic "DRIFTLAB"
//   offset 8   uint32    format version (2)
//   offset 12  uint64    H, length of the JSON header
//   offset 20  H bytes   JSON: model, policy (canonical), policy_full, dtype (the model's float
//                        type), input_shape, num_classes, num_ids (token models only: embedding
//                        rows), metadata {...}, tensors [{name, dtype, shape, offset, nbytes}]
//                        (trainable parameters first, then buffers such as BatchNorm's
//                        running statistics)
//   then       tensor data, each at data_start + offset, in its own dtype (float32, float64,
//              int8, uint8, int32, int64: a quantized model keeps int8 weights beside float
//              scales), row-major
//   last 4     uint32    CRC-32 (zlib) of every byte before it
// Version 1 (until 2026-11-24) is the same without the per-tensor dtype: every tensor is in the
// model's dtype. Both load; files are written as version 2.
// Written atomically: a temporary file in the same directory, fsync, then rename; on any
// failure the temporary is removed and the destination is untouched. The file holds nothing
// that varies between identical runs (no timestamps, no timings), so the same seed, Policy
// and thread count give byte-identical files.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model.h"

namespace driftlab {

constexpr uint32_t kModelFileVersion = 2;
constexpr uint32_t kOldestModelFileVersion = 1;

void save_model(const std::string& path, Model& model, const nlohmann::json& metadata);

struct LoadedModel {
  Model model;
  nlohmann::json metadata;
};
// Throws naming the file and offset on a bad magic, version, size, CRC or tensor mismatch.
LoadedModel load_model(const std::string& path);

// Writes bytes to path atomically (temporary + fsync + rename). Shared by every writer.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace driftlab
