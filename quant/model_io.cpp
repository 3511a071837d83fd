#include "quant/model_io.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
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
    Model fp32 = build_model(name, policy, 0, args);
    if (!meta.contains("quantized")) return fp32;
    const nlohmann::json& q = meta["quantized"];
    if (q.is_object() && q.value("mode", std::string("static")) == "dynamic") return quantize_dynamic(fp32, policy);
    return build_quantized(fp32, policy);
  });
  if (is_quantized(out))
    for (std::size_t i = 0; i < out.model.net->size(); ++i)
      if (QuantLayer* q = as_quant_layer(out.model.net->layer(i))) {
        try {
          q->refresh();
        } catch (const Error& e) {
          fail("model file: ", path, ": layer ", i, " (", q->kind(), "): ", e.what());
        }
      }
  return out;
}

bool is_quantized(const LoadedModel& m) { return m.metadata.is_object() && m.metadata.contains("quantized"); }

}  // namespace quant
}  // namespace driftlab
