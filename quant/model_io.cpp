#include "quant/model_io.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/visit.h"
#include "quant/dynamic.h"
#include "quant/ptq.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

void save_quantized_model(const std::string& path, Model& model, nlohmann::json metadata,
                          const nlohmann::json& quantized) {
  check(quantized.is_object(), "save_quantized_model: the quantized description must be a JSON object");
  if (metadata.is_null()) metadata = nlohmann::json::object();
  metadata["quantized"] = quantized;
  save_model(path, model, metadata);
}

LoadedModel load_any_model(const std::string& path) {
  std::error_code ec;
  check(!std::filesystem::is_directory(path, ec), "model file: ", path, ": is a directory, not a model file");
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "model file: cannot open ", path);
  return load_any_model(f, path);
}

LoadedModel load_any_model(std::istream& f, const std::string& path) {
  LoadedModel out = load_model(f, path, [](const std::string& name, const Policy& policy, const ModelArgs& args,
                                            const nlohmann::json& meta) {
    if (!meta.contains("quantized")) return build_model(name, policy, 0, args);
    // An int8 graph's file holds a byte per weight (and an int32 bias and a scale per folded
    // BatchNorm's four float32 statistics): the fp32 graph it is rebuilt from, at most 8 times its
    // bytes (still bounded by the file, checked before each allocation).
    ModelArgs fp32_args = args;
    if (fp32_args.max_param_bytes) fp32_args.max_param_bytes *= 8;
    Model fp32 = build_model(name, policy, 0, fp32_args);
    const nlohmann::json& q = meta["quantized"];
    if (q.is_object() && q.value("mode", std::string("static")) == "dynamic") return quantize_dynamic(fp32, policy);
    return build_quantized(fp32, policy);
  });
  if (is_quantized(out))
    for (std::size_t i = 0; i < out.model.net->size(); ++i) {
      Layer& l = out.model.net->layer(i);
      auto refresh = [&](Layer& x, const std::string& where) {
        if (QuantLayer* q = as_quant_layer(x)) try {
            q->refresh();
          } catch (const Error& e) {
            fail("model file: ", path, ": layer ", where, " (", q->kind(), "): ", e.what());
          }
      };
      if (auto* g = layer_as<GraphLayer>(l)) {  // an int8 graph: its nodes' layers (quant/graph_ptq.h)
        for (std::size_t j = 0; j < g->num_nodes(); ++j)
          if (g->node(j).layer) refresh(*g->node(j).layer, std::to_string(i) + " node '" + g->node(j).name + "'");
      } else {
        refresh(l, std::to_string(i));
      }
    }
  return out;
}

bool is_quantized(const LoadedModel& m) { return m.metadata.is_object() && m.metadata.contains("quantized"); }

}  // namespace quant
}  // namespace driftlab
