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
#include "engine/io/container.h"  // write_file_atomic, the container both file kinds share
#include <functional>
#include <istream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "models/models.h"

namespace driftlab {

constexpr uint32_t kModelFileVersion = 2;
constexpr uint32_t kOldestModelFileVersion = 1;

void save_model(const std::string& path, Model& model, const nlohmann::json& metadata);

struct LoadedModel {
  Model model;
  nlohmann::json metadata;
};
// Throws naming the file and offset on a bad magic, version, size, CRC or tensor mismatch.
// Order: magic, version, header length, CRC (streamed over the whole file), the JSON, then
// every claim of the header against the file (tensor byte counts from shape and dtype, tensors
// back to back filling the data exactly, num_ids against those bytes, input_mean/input_std)
// BEFORE the model is built; then each tensor against the built model's parameter.
LoadedModel load_model(const std::string& path);
// The same from a seekable stream; `name` stands for the file in messages (the fuzz target's
// entry, fuzz/fuzz_model_file.cpp).
LoadedModel load_model(std::istream& in, const std::string& name);

// What builds the network a file's tensors are read into: by default build_model(name, policy, 0,
// args), which refuses a quantized model's file (metadata "quantized": written by `driftlab
// quantize`); quant/model_io.h passes one that builds the int8 network.
using ModelBuilder =
    std::function<Model(const std::string& name, const Policy& policy, const ModelArgs& args, const nlohmann::json& metadata)>;
LoadedModel load_model(std::istream& in, const std::string& name, const ModelBuilder& build);

// A JSON header over this is refused as corrupt (a header lists ~150 bytes per tensor).
constexpr uint64_t kMaxModelHeaderBytes = uint64_t{64} << 20;


}  // namespace driftlab
