#include "driftlab/weights.h"

#include <filesystem>

#include "core/error.h"
#include "driftlab/evaluate.h"
#include "driftlab/model.h"
#include "engine/io/npy.h"
#include "engine/train/nonfinite.h"
#include "models/model_file.h"
#include "models/models.h"

namespace driftlab {

namespace fs = std::filesystem;

std::vector<NpyFile> export_weights(const WeightsExportRequest& r) {
  const SavedModel m = open_model(r.weights);
  return export_weights_npy(m.model(), r.out, r.driftlab_layout ? NpyLayout::driftlab : NpyLayout::framework);
}

void import_weights(const WeightsImportRequest& r) {
  Model m = build_model(r.model, Policy::parse(r.policy), 1);
  import_weights_npy(m, r.from, r.driftlab_layout ? NpyLayout::driftlab : NpyLayout::framework);
  // The files passed their shape checks; a NaN or infinity in them would be a model that
  // trains and predicts NaN, so it is refused here naming the file and the index in it.
  for (const auto& np : m.net->named_params()) {
    const std::string path = (fs::path(r.from) / (np.first + ".npy")).string();
    const Tensor t = read_npy(path);
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64) continue;
    if (const int64_t bad = first_nonfinite(t); bad >= 0)
      fail("weights import: ", path, " holds ", nonfinite_str(t, bad), " at index ", bad, " (flat, C order, shape ",
           shape_str(t.shape()), "); nothing written to ", r.out);
    // Finite in the file, but not in the model's dtype: a float64 beyond float32's range.
    if (const int64_t bad = first_nonfinite(np.second->value); bad >= 0)
      fail("weights import: ", path, " holds a value beyond the range of the model's ", dtype_name(m.dtype()), " (",
           np.first, "[", bad, "] would be ", nonfinite_str(np.second->value, bad), "); nothing written to ", r.out);
  }
  save_model(r.out, m, {{"imported_from", r.from}});
}

}  // namespace driftlab
