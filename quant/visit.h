// Every layer kind of quant/, known in one place (as engine/layers/visit.h for the engine's).
//
// An int8 model is an ordinary Sequential holding quant/'s layers (QuantizeLayer ... DequantizeLayer,
// quant/qlayers.h; the dynamic ones of quant/dynamic.h) beside engine layers (FlattenLayer), and the
// straight-through mirror of quant/ste.h holds FakeQuantLayers beside engine layers. To the engine's
// visitors every layer here is one kind, ExternalLayer; QuantLayerVisitor has one pure virtual per
// quant kind. A visitor of both families derives from LayerVisitor and QuantLayerVisitor and
// forwards its visit(ExternalLayer&) to visit_quant (below), which refuses a layer of no quant
// kind by name.
//
// To add an int8 layer kind: 1) its class (quant/qlayers.h or a file of its own) deriving from
// QuantLayer, with DL_ACCEPT_QUANT_VISITOR in its body; 2) one X(...) line in
// DRIFTLAB_QUANT_LAYER_KINDS and kQuantLayerKindCount + 1; 3) build: the compiler names every
// visitor and support declaration that lacks it; 4) regenerate the capability table
// (engine/layers/visit.h, step 4).
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>

#include "engine/layers/layer.h"

namespace driftlab {
namespace quant {

// X(Class, name): the class and the kind's name in the capability table.
#define DRIFTLAB_QUANT_LAYER_KINDS(X)            \
  X(QuantizeLayer, quantize)                     \
  X(DequantizeLayer, dequantize)                 \
  X(QConv2dLayer, qconv2d)                       \
  X(QDenseLayer, qdense)                         \
  X(QMaxPool2dLayer, qmaxpool2d)                 \
  X(QGlobalAvgPoolLayer, qglobal_avg_pool)       \
  X(QResidualLayer, qresidual)                   \
  X(QReluLayer, qrelu)                           \
  X(QAddLayer, qadd)                             \
  X(QDynDenseLayer, qdyn_dense)                  \
  X(QDynRnnLayer, qdyn_rnn)                      \
  X(FakeQuantLayer, fake_quant)

#define DL_DECLARE_CLASS(cls, name) class cls;
DRIFTLAB_QUANT_LAYER_KINDS(DL_DECLARE_CLASS)
#undef DL_DECLARE_CLASS

enum class QuantLayerKind {
#define DL_KIND_ENUM(cls, name) name,
  DRIFTLAB_QUANT_LAYER_KINDS(DL_KIND_ENUM)
#undef DL_KIND_ENUM
};
constexpr std::size_t kQuantLayerKindCount = 12;
static_assert(static_cast<std::size_t>(QuantLayerKind::fake_quant) + 1 == kQuantLayerKindCount,
              "a kind was added to DRIFTLAB_QUANT_LAYER_KINDS: update kQuantLayerKindCount and every switch over it");
const char* quant_layer_kind_name(QuantLayerKind k);

class QuantLayerVisitor {
 public:
  virtual ~QuantLayerVisitor() = default;
#define DL_VISIT(cls, name) virtual void visit(cls& l) = 0;
  DRIFTLAB_QUANT_LAYER_KINDS(DL_VISIT)
#undef DL_VISIT
};

// The base of every layer in DRIFTLAB_QUANT_LAYER_KINDS.
class QuantLayer : public ExternalLayer {
 public:
  virtual void accept(QuantLayerVisitor& v) = 0;
  virtual QuantLayerKind quant_kind() const = 0;
  using ExternalLayer::accept;
  // Re-resolves the op params from the buffers (after a model file wrote new values into them).
  virtual void refresh() {}
};

#define DL_ACCEPT_QUANT_VISITOR(name)                                         \
  void accept(QuantLayerVisitor& v) override { v.visit(*this); }              \
  QuantLayerKind quant_kind() const override { return QuantLayerKind::name; } \
  using QuantLayer::accept;

// A capability's answer for every quant/ kind, from Cap's static support(Kind<...>) overloads
// (engine/layers/visit.h, support_of).
using QuantSupportColumn = std::array<Support, kQuantLayerKindCount>;
template <class Cap>
QuantSupportColumn quant_support_of() {
  QuantSupportColumn a;
#define DL_SUPPORT(cls, name) a[static_cast<std::size_t>(QuantLayerKind::name)] = Cap::support(Kind<cls>{});
  DRIFTLAB_QUANT_LAYER_KINDS(DL_SUPPORT)
#undef DL_SUPPORT
  return a;
}

// What the CPU runs of each int8 kind (quant/visit.cpp; the capability table, driftlab model kinds).
QuantSupportColumn cpu_quant_support();

// l as one of quant/'s layers, or nullptr when it is a layer of another library's.
QuantLayer* external_quant_layer(ExternalLayer& l);

// l as one of quant/'s layers, or nullptr when it is an engine layer or another library's.
QuantLayer* as_quant_layer(Layer& l);

// Runs v on l, a layer of an external kind: l must be one of quant/'s, else the error names
// `who`, l's kind and its path.
void visit_quant(ExternalLayer& l, QuantLayerVisitor& v, const char* who);

// The layer as T (a class above) when it is one, else nullptr (engine/layers/visit.h, layer_as).
template <class T>
T* quant_layer_as(Layer& l) {
  struct As : LayerVisitor, QuantLayerVisitor {
    T* out = nullptr;
#define DL_AS_NONE(cls, name) \
  void visit(cls&) override {}
    DRIFTLAB_LAYER_KINDS(DL_AS_NONE)
#undef DL_AS_NONE
#define DL_AS(cls, name) \
  void visit(cls& x) override { \
    if constexpr (std::is_same_v<cls, T>) out = &x; \
  }
    DRIFTLAB_QUANT_LAYER_KINDS(DL_AS)
#undef DL_AS
    void visit(ExternalLayer& x) override {
      if (auto* q = external_quant_layer(x)) q->accept(static_cast<QuantLayerVisitor&>(*this));
    }
  } v;
  l.accept(static_cast<LayerVisitor&>(v));
  return v.out;
}

}  // namespace quant
}  // namespace driftlab
