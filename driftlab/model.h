// The library face: what the driftlab command, the study runner and the Python module call. Each
// header here takes a request (plain values: paths, policy strings, numbers) and returns a plain
// result; nothing here prints, and nothing writes JSON but an input another program reads
// (localise_against_ort's cases.json for ONNX Runtime): report/ writes the files, cli/ prints.
//
// This one: a saved model (fp32 or int8) with its file's metadata, and the data it was made for.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/datasets.h"
#include "engine/data/transform.h"
#include "engine/train/runner.h"
#include "models/model_file.h"

namespace driftlab {

// A model file as loaded: the model (fp32 under its Policy, or int8), the file's metadata, its path.
struct SavedModel {
  std::string path;
  LoadedModel loaded;
  Model& model() { return loaded.model; }
  const Model& model() const { return loaded.model; }
  bool int8() const;         // written by driftlab quantize
  InputNorm norm() const;    // the input standardisation the model was trained with
};

// Reads a .dlm, fp32 or int8 (quant/model_io.h); errors name the file and the offset.
SavedModel open_model(const std::string& path);
// A zoo model (models/models.h model_table) under `policy`, initialised from `seed`; no file yet.
SavedModel zoo_model(const std::string& name, const std::string& policy, uint64_t seed);
// A graph model (models/graph.h) from its spec's JSON text under `policy`, initialised from `seed`.
SavedModel graph_model_from_spec(const std::string& spec, const std::string& policy, uint64_t seed);
// Writes m to `path` with its metadata (an int8 model as driftlab quantize writes one); m.path becomes path.
void save_model_file(SavedModel& m, const std::string& path);

// A split of the model's data (the model file's data settings where `spec` leaves them open),
// checked to fit the model's input shape (the error names the file).
Dataset load_data(const SavedModel& m, DatasetLoader& loader, const DataSpec& spec, Split split);
// The data must have the model's input shape: says so naming the model file.
void check_data_fits(const LoadedModel& lm, const std::string& weights, const Dataset& data);
// Every input of a split as one batch in `dtype`, in file order.
Tensor all_inputs(const Dataset& data, DType dtype);
// The first n training samples in file order (calibration); *from describes them ("first N of ...").
Tensor first_training_samples(const LoadedModel& m, DatasetLoader& loader, const DataSpec& spec, int64_t n,
                              std::string* from);

}  // namespace driftlab
