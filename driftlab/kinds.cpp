#include "driftlab/kinds.h"

#include "convert/onnx_export.h"
#include "convert/onnx_import.h"
#include "convert/tfjs_export.h"
#include "engine/cuda/device_net.h"
#include "models/reparam.h"
#include "quant/dynamic.h"
#include "quant/ptq.h"
#include "quant/qlayers.h"
#include "quant/ste.h"
#include "quant/visit.h"

namespace driftlab {

namespace {

// A column: the engine kinds' answers, and the int8 kinds' own where the capability has a visitor
// for them (else each int8 kind takes the engine column's answer for external layers).
struct Source {
  KindTable::Column column;
  SupportColumn engine;
  bool has_quant = false;
  quant::QuantSupportColumn quant{};
};

Source col(const char* name, const char* what, SupportColumn engine) { return {{name, what}, engine}; }
Source col(const char* name, const char* what, SupportColumn engine, quant::QuantSupportColumn q) {
  return {{name, what}, engine, true, q};
}

}  // namespace

KindTable layer_kinds() {
  const std::vector<Source> sources = {
      col("cpu", "runs on the CPU (engine/layers, quant/visit.cpp)", cpu_support(), quant::cpu_quant_support()),
      col("cuda", "has a device layer (engine/cuda/device_net.cpp, quant/device_qlayers.cpp)", device_support(),
          quant::device_quant_support()),
      col("onnx export", "driftlab export --format onnx (convert/onnx_export.cpp, onnx_quant_export.cpp)",
          convert::onnx_export_support(), convert::onnx_quant_export_support()),
      col("tfjs export", "driftlab export --format tfjs (convert/tfjs_export.cpp)", convert::tfjs_export_support()),
      col("onnx import", "driftlab import maps an ONNX file onto it (convert/onnx_import.cpp)",
          convert::onnx_import_support()),
      col("int8 static", "driftlab quantize --mode static (quant/ptq.cpp)", quant::ptq_support()),
      col("int8 dynamic", "driftlab quantize --mode dynamic (quant/dynamic.cpp)", quant::dynamic_support()),
      col("reparam", "weights moved between conventions (models/reparam.cpp)", reparam_support()),
      col("ste", "straight-through float mirror of an int8 model (quant/ste.cpp)", quant::ste_support(),
          quant::ste_quant_support()),
  };
  KindTable t;
  for (const Source& s : sources) t.columns.push_back(s.column);
  for (std::size_t k = 0; k + 1 < kLayerKindCount; ++k) {
    KindTable::Row r{layer_kind_name(LayerKind(k)), "engine", {}};
    for (const Source& s : sources) r.cells.push_back(s.engine[k]);
    t.rows.push_back(r);
  }
  const std::size_t external = static_cast<std::size_t>(LayerKind::external);
  for (std::size_t k = 0; k < quant::kQuantLayerKindCount; ++k) {
    KindTable::Row r{quant::quant_layer_kind_name(quant::QuantLayerKind(k)), "int8", {}};
    for (const Source& s : sources) r.cells.push_back(s.has_quant ? s.quant[k] : s.engine[external]);
    t.rows.push_back(r);
  }
  return t;
}

}  // namespace driftlab
