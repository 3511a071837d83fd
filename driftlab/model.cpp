#include "driftlab/model.h"

#include <algorithm>

#include "models/graph.h"
#include "models/models.h"
#include "quant/model_io.h"
#include "train/run.h"

namespace driftlab {

bool SavedModel::int8() const { return quant::is_quantized(loaded); }
InputNorm SavedModel::norm() const { return input_norm_from_metadata(loaded.metadata); }

SavedModel open_model(const std::string& path) { return {path, quant::load_any_model(path)}; }

SavedModel zoo_model(const std::string& name, const std::string& policy, uint64_t seed) {
  SavedModel m;
  m.loaded.model = build_model(name, Policy::parse(policy), seed);
  m.loaded.metadata = nlohmann::json::object();
  return m;
}

SavedModel graph_model_from_spec(const std::string& spec, const std::string& policy, uint64_t seed) {
  ModelArgs a;
  a.graph = spec;
  SavedModel m;
  m.loaded.model = build_model(kGraphModelName, Policy::parse(policy), seed, a);
  m.loaded.metadata = nlohmann::json::object();
  return m;
}

void save_model_file(SavedModel& m, const std::string& path) {
  nlohmann::json meta = m.loaded.metadata.is_object() ? m.loaded.metadata : nlohmann::json::object();
  if (m.int8()) {
    const nlohmann::json q = meta.at("quantized");
    meta.erase("quantized");
    quant::save_quantized_model(path, m.model(), meta, q);
  } else {
    save_model(path, m.model(), meta);
  }
  m.path = path;
}

void check_data_fits(const LoadedModel& lm, const std::string& weights, const Dataset& data) {
  const Shape& s = data.images.shape();
  const Shape per_sample(s.begin() + (s.empty() ? 0 : 1), s.end());
  check(per_sample == lm.model.input_shape, "data: ", weights, " holds ", lm.model.name, ", which takes ",
        shape_str(lm.model.input_shape), " inputs, but ", data.name, " has ", shape_str(per_sample));
}

Dataset load_data(const SavedModel& m, DatasetLoader& loader, const DataSpec& spec, Split split) {
  Dataset d = load_split_for(m.loaded, loader, spec, split);
  check_data_fits(m.loaded, m.path, d);
  return d;
}

Tensor all_inputs(const Dataset& data, DType dtype) {
  std::vector<int64_t> idx(static_cast<std::size_t>(data.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  return gather_batch(data, idx, 0, data.images.dim(0), dtype);
}

Tensor first_training_samples(const LoadedModel& m, DatasetLoader& loader, const DataSpec& spec, int64_t n,
                              std::string* from) {
  check(n > 0, "calibration: ", n, " samples requested, need at least 1");
  Dataset train = load_split_for(m, loader, spec, Split::train);
  n = std::min<int64_t>(n, train.images.dim(0));
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  *from = "first " + std::to_string(n) + " of " + train.name;
  return gather_batch(train, idx, 0, n, DType::f32);
}

}  // namespace driftlab
