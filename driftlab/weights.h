// The library face (driftlab/model.h says what the face is): a model's parameters as .npy files,
// one per tensor, in its framework's layout or driftlab's own (models/weights_npy.h), both ways.
#pragma once
#include <string>
#include <vector>

#include "models/weights_npy.h"

namespace driftlab {

struct WeightsExportRequest {
  std::string weights;          // model file (.dlm), fp32 or int8
  std::string out;              // the folder: OUT/<name>.npy per parameter
  bool driftlab_layout = false;  // OIHW / (out,in) instead of the policy's framework layout
};
// The files written, in the model's parameter order.
std::vector<NpyFile> export_weights(const WeightsExportRequest& r);

struct WeightsImportRequest {
  std::string model;            // a zoo model's name
  std::string policy = "torch";  // the policy the files were exported under
  std::string from;             // the folder of <name>.npy files
  std::string out;              // the model file to write
  bool driftlab_layout = false;  // the files are OIHW / (out,in)
};
// Builds r.model under r.policy from the files and writes r.out. Refuses (naming the file and the
// index, writing nothing) a file that holds a NaN or an infinity, or a value beyond the model's dtype.
void import_weights(const WeightsImportRequest& r);

}  // namespace driftlab
