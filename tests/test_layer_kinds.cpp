// The capability table (driftlab/kinds.h): every layer kind has its row, each row answers every
// column, the docs' copy in docs/ARCHITECTURE.md is the table the code declares, and the
// declarations agree with what the visitors do on the zoo's models.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "convert/onnx_export.h"
#include "driftlab/kinds.h"
#include "engine/cuda/device_net.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/visit.h"
#include "models/models.h"
#include "models/reparam.h"
#include "quant/dynamic.h"
#include "quant/ptq.h"
#include "quant/visit.h"
#include "report/kinds.h"

namespace driftlab {
namespace {

TEST(LayerKinds, EveryKindHasOneRowAndEveryCell) {
  const KindTable t = layer_kinds();
  // the engine's kinds without `external` (its int8 kinds are rows of their own), then quant/'s
  EXPECT_EQ(t.rows.size(), kLayerKindCount - 1 + quant::kQuantLayerKindCount);
  std::set<std::string> names;
  for (const auto& r : t.rows) {
    EXPECT_TRUE(names.insert(r.kind).second) << r.kind << " has two rows";
    ASSERT_EQ(r.cells.size(), t.columns.size()) << r.kind;
    for (std::size_t c = 0; c < r.cells.size(); ++c)
      if (r.cells[c].level != Support::Level::all)
        EXPECT_FALSE(std::string(r.cells[c].note).empty())
            << r.kind << " x " << t.columns[c].name << ": a partial or missing capability must say why";
  }
  for (std::size_t k = 0; k + 1 < kLayerKindCount; ++k) EXPECT_TRUE(names.count(layer_kind_name(LayerKind(k))));
  for (std::size_t k = 0; k < quant::kQuantLayerKindCount; ++k)
    EXPECT_TRUE(names.count(quant::quant_layer_kind_name(quant::QuantLayerKind(k))));
}

// docs/ARCHITECTURE.md holds the block `driftlab model kinds --markdown` prints, byte for byte.
TEST(LayerKinds, DocsTableIsCurrent) {
  std::ifstream f(std::string(DRIFTLAB_SOURCE_DIR) + "/docs/ARCHITECTURE.md");
  ASSERT_TRUE(f.good()) << "docs/ARCHITECTURE.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::size_t a = doc.find(report::kKindsBegin), b = doc.find(report::kKindsEnd);
  ASSERT_NE(a, std::string::npos) << "docs/ARCHITECTURE.md has no capability table (" << report::kKindsBegin << ")";
  ASSERT_NE(b, std::string::npos) << "docs/ARCHITECTURE.md: the capability table has no end marker";
  const std::string in_docs = doc.substr(a, b - a + std::string(report::kKindsEnd).size() + 1);
  const std::string current = report::kinds_markdown(layer_kinds());
  EXPECT_EQ(in_docs, current) << "docs/ARCHITECTURE.md's capability table is stale: replace its block with the "
                                 "output of `driftlab model kinds --markdown`";
}

// What each layer kind of a model is declared to get from a capability, the weakest over its layers
// (containers looked into).
Support::Level weakest(Sequential& net, const SupportColumn& col) {
  Support::Level level = Support::Level::all;
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    level = std::min(level, col[static_cast<std::size_t>(l.layer_kind())].level);
    if (auto* r = layer_as<ResidualLayer>(l)) level = std::min(level, weakest(r->main(), col));
  }
  return level;
}

// The declarations against the visitors: on every model of the zoo, static quantization's planner,
// dynamic quantization and the device check accept the model exactly when no layer of it is
// declared unsupported, and refuse it where one is.
TEST(LayerKinds, DeclarationsMatchTheVisitorsOnTheZoo) {
  const Policy torch = Policy::parse("torch,quant_scheme=torch_qnnpack");
  for (const auto& entry : model_table()) {
    Model m = build_model(entry.name, torch, 1);
    SCOPED_TRACE(entry.name);
    const Support::Level ptq = weakest(*m.net, quant::ptq_support());
    const Support::Level dyn = weakest(*m.net, quant::dynamic_support());
    const Support::Level dev = weakest(*m.net, device_support());
    bool ptq_ok = true, dyn_ok = true, dev_ok = true;
    try {
      quant::build_quantized(m, torch);
    } catch (const Error&) {
      ptq_ok = false;
    }
    try {
      quant::quantize_dynamic(m, torch);
    } catch (const Error&) {
      dyn_ok = false;
    }
    try {
      check_device_supported(m);
    } catch (const Error&) {
      dev_ok = false;
    }
    if (ptq == Support::Level::none) EXPECT_FALSE(ptq_ok) << "int8 static accepted a kind declared unsupported";
    if (ptq == Support::Level::all) EXPECT_TRUE(ptq_ok) << "int8 static refused kinds all declared supported";
    if (dyn == Support::Level::none) EXPECT_FALSE(dyn_ok) << "int8 dynamic accepted a kind declared unsupported";
    if (dyn == Support::Level::all) EXPECT_TRUE(dyn_ok) << "int8 dynamic refused kinds all declared supported";
    EXPECT_EQ(dev_ok, dev != Support::Level::none) << "cuda: the device check and the declarations disagree";
  }
}

}  // namespace
}  // namespace driftlab
