// Every layer kind of the engine, known in one place.
//
// DRIFTLAB_LAYER_KINDS lists them; LayerVisitor has one pure virtual visit() per kind, and each
// layer's accept() calls the one for its class. Code that does something per kind (build the
// device counterpart, export to ONNX or TF.js, plan int8 quantization, convert weights between
// conventions) is one visitor class: a kind missing from it fails to compile, where a ladder of
// dynamic_casts would fail only at run time. kLayerKindCount and the static_assert below make a
// switch over LayerKind that forgot a kind fail to compile too.
//
// Layers defined by a library above the engine (quant/'s int8 layers, quant/visit.h) are one kind
// here, ExternalLayer: the engine cannot name them. Such a library carries a visitor of its own for
// its kinds, and a visitor that handles them too derives from both (quant/visit.h says how).
//
// Which visitor handles which kind is declared by the visitor itself (Support, below) and printed
// as one table by `driftlab model kinds` (docs/ARCHITECTURE.md, "Layer kinds").
//
// To add a layer kind: 1) its class in engine/layers/ (layer.h says how), with DL_ACCEPT_VISITOR
// in its body; 2) one X(...) line in DRIFTLAB_LAYER_KINDS and kLayerKindCount + 1; 3) build: the
// compiler names every visitor and every support declaration that lacks the kind
// (docs/ARCHITECTURE.md, "Adding a layer kind", lists them); 4) the capability table in
// docs/ARCHITECTURE.md regenerated (`driftlab model kinds --markdown`; tests/test_layer_kinds.cpp
// fails while it is stale).
#pragma once
#include <array>
#include <cstddef>

namespace driftlab {

class Layer;

// X(Class, name): the class and the kind's name in the capability table.
#define DRIFTLAB_LAYER_KINDS(X)                  \
  X(Conv2dLayer, conv2d)                         \
  X(Pool2dLayer, pool2d)                         \
  X(DenseLayer, dense)                           \
  X(ActivationLayer, activation)                 \
  X(BatchNormLayer, batchnorm)                   \
  X(DropoutLayer, dropout)                       \
  X(FlattenLayer, flatten)                       \
  X(GlobalAvgPoolLayer, global_avg_pool)         \
  X(EmbeddingLayer, embedding)                   \
  X(RnnLayer, rnn)                               \
  X(ResidualLayer, residual)                     \
  X(GraphLayer, graph)

#define DL_DECLARE_CLASS(cls, name) class cls;
DRIFTLAB_LAYER_KINDS(DL_DECLARE_CLASS)
#undef DL_DECLARE_CLASS
class ExternalLayer;

enum class LayerKind {
#define DL_KIND_ENUM(cls, name) name,
  DRIFTLAB_LAYER_KINDS(DL_KIND_ENUM)
#undef DL_KIND_ENUM
      external,
};
constexpr std::size_t kLayerKindCount = 13;  // the twelve above and `external`
static_assert(static_cast<std::size_t>(LayerKind::external) + 1 == kLayerKindCount,
              "a layer kind was added to DRIFTLAB_LAYER_KINDS: update kLayerKindCount and every switch over it");
const char* layer_kind_name(LayerKind k);

class LayerVisitor {
 public:
  virtual ~LayerVisitor() = default;
#define DL_VISIT(cls, name) virtual void visit(cls& l) = 0;
  DRIFTLAB_LAYER_KINDS(DL_VISIT)
#undef DL_VISIT
  // A layer of a library above the engine (quant/visit.h: visit_quant).
  virtual void visit(ExternalLayer& l) = 0;
};

// In the body of each layer class: its accept() and its kind.
#define DL_ACCEPT_VISITOR(name)                                     \
  void accept(LayerVisitor& v) override { v.visit(*this); }         \
  LayerKind layer_kind() const override { return LayerKind::name; }

// The layer as T when it is one (T one of the classes above), else nullptr: a visitor that
// answers one question. For the places that look at one kind among their neighbours (a
// BatchNorm after a convolution, a ReLU after a dense layer); code that does something for
// every kind is a visitor of its own.
template <class T>
T* layer_as(Layer& l);

// How a visitor handles a kind, as it declares it (each capability's static support()
// overloads, one per kind: `driftlab model kinds` builds its table from them).
struct Support {
  enum class Level { none, some, all };
  Level level = Level::none;
  const char* note = "";  // all: what it becomes; some: which variants; none: why not
  static Support all(const char* note = "") { return {Level::all, note}; }
  static Support some(const char* note) { return {Level::some, note}; }
  static Support none(const char* note) { return {Level::none, note}; }
};

// The tag that names a kind in a support() overload.
template <class T>
struct Kind {};

// A capability's answer for every kind, by LayerKind, from Cap's static support(Kind<...>)
// overloads: a kind without one fails to compile here. [external] is its answer for every
// quant/ kind that has no answer of its own (quant/visit.h, quant_support_of).
using SupportColumn = std::array<Support, kLayerKindCount>;
template <class Cap>
SupportColumn support_of() {
  SupportColumn a;
#define DL_SUPPORT(cls, name) a[static_cast<std::size_t>(LayerKind::name)] = Cap::support(Kind<cls>{});
  DRIFTLAB_LAYER_KINDS(DL_SUPPORT)
#undef DL_SUPPORT
  a[static_cast<std::size_t>(LayerKind::external)] = Cap::support(Kind<ExternalLayer>{});
  return a;
}

// What the CPU runs of each kind (engine/layers/visit.cpp; the capability table, driftlab model kinds).
SupportColumn cpu_support();

}  // namespace driftlab
