#include "models/weights_npy.h"

#include <filesystem>
#include <map>
#include <utility>

#include "core/error.h"
#include "engine/io/npy.h"
#include "engine/layers/init.h"
#include "engine/layers/rnn_layer.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

// The recurrent layers of a model, keyed by their parameters: their packed gate layout is
// converted by the layer itself, under the layer's own knobs.
std::map<const Param*, const RnnLayer*> rnn_layers_by_param(Sequential& net) {
  std::map<const Param*, const RnnLayer*> m;
  for (std::size_t i = 0; i < net.size(); ++i)
    if (auto* r = layer_as<RnnLayer>(net.layer(i)))
      for (Param* p : r->params()) m[p] = r;
  return m;
}

std::string npy_path(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / (name + ".npy")).string();
}

// p's value as the file holds it in `layout`.
Tensor to_file(const Param& p, const RnnLayer* rnn, WeightLayout weight_layout, NpyLayout layout) {
  if (layout == NpyLayout::driftlab) return p.value;
  if (rnn) return rnn->export_param(p);
  if (p.is_bias) return p.value;
  return to_framework_layout(p.value, weight_layout);
}

}  // namespace

std::vector<NpyFile> export_weights_npy(const Model& m, const std::string& dir, NpyLayout layout) {
  fs::create_directories(dir);
  const auto rnn_owner = rnn_layers_by_param(*m.net);
  std::vector<NpyFile> files;
  for (auto& [name, p] : m.net->named_params()) {
    const auto r = rnn_owner.find(p);
    const Tensor t = to_file(*p, r != rnn_owner.end() ? r->second : nullptr, m.policy.weight_layout, layout);
    files.push_back({npy_path(dir, name), t.shape()});
    write_npy(files.back().path, t);
  }
  return files;
}

void import_weights_npy(Model& m, const std::string& dir, NpyLayout layout) {
  const auto rnn_owner = rnn_layers_by_param(*m.net);
  // Every file is read and converted before any parameter changes, so a bad file leaves m as it was.
  std::vector<std::pair<Param*, Tensor>> values;
  for (auto& [name, p] : m.net->named_params()) {
    const std::string path = npy_path(dir, name);
    const auto r = rnn_owner.find(p);
    const RnnLayer* rnn = r != rnn_owner.end() ? r->second : nullptr;
    Tensor t = read_npy(path).to(m.dtype());
    // Checked in the file's layout, before any conversion, so that every shape mistake (a rank
    // the conversion cannot take included) is reported with the file and the parameter.
    const Shape want = to_file(*p, rnn, m.policy.weight_layout, layout).shape();
    check(t.shape() == want, "weights import: ", path, " has shape ", shape_str(t.shape()), ", parameter ", name,
          " needs ", shape_str(want));
    if (layout == NpyLayout::framework) {
      if (rnn)
        t = rnn->import_param(*p, t);
      else if (!p->is_bias)
        t = from_framework_layout(t, m.policy.weight_layout);
    }
    values.emplace_back(p, std::move(t));
  }
  for (auto& [p, t] : values) p->value = std::move(t);
}

}  // namespace driftlab
