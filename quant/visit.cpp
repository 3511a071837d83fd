#include "quant/visit.h"

#include "core/error.h"

namespace driftlab {
namespace quant {

const char* quant_layer_kind_name(QuantLayerKind k) {
  switch (k) {
#define DL_KIND_NAME(cls, name) \
  case QuantLayerKind::name:    \
    return #name;
    DRIFTLAB_QUANT_LAYER_KINDS(DL_KIND_NAME)
#undef DL_KIND_NAME
  }
  return "?";
}

QuantLayer* external_quant_layer(ExternalLayer& l) {
  // The one cast between the two visitor families: the engine knows external layers only as
  // ExternalLayer, and quant/ is the library that defines them.
  return dynamic_cast<QuantLayer*>(&l);
}

QuantLayer* as_quant_layer(Layer& l) {
  ExternalLayer* e = layer_as<ExternalLayer>(l);
  return e ? external_quant_layer(*e) : nullptr;
}

void visit_quant(ExternalLayer& l, QuantLayerVisitor& v, const char* who) {
  QuantLayer* q = external_quant_layer(l);
  check(q != nullptr, who, ": layer kind '", l.kind(), "' is defined by none of the libraries this one knows");
  q->accept(v);
}

namespace {

// int8 layers are inference-only (their backward refuses; white-box attacks differentiate the
// straight-through mirror, quant/ste.h); the mirror's fake_quant has a backward.
struct CpuQuantSupport {
#define DL_CPU(cls, name) \
  static Support support(Kind<cls>) { return Support::some("forward only (inference)"); }
  DL_CPU(QuantizeLayer, quantize)
  DL_CPU(DequantizeLayer, dequantize)
  DL_CPU(QConv2dLayer, qconv2d)
  DL_CPU(QDenseLayer, qdense)
  DL_CPU(QMaxPool2dLayer, qmaxpool2d)
  DL_CPU(QGlobalAvgPoolLayer, qglobal_avg_pool)
  DL_CPU(QResidualLayer, qresidual)
  DL_CPU(QReluLayer, qrelu)
  DL_CPU(QAddLayer, qadd)
  DL_CPU(QDynDenseLayer, qdyn_dense)
  DL_CPU(QDynRnnLayer, qdyn_rnn)
#undef DL_CPU
  static Support support(Kind<FakeQuantLayer>) { return Support::all("forward, straight-through backward"); }
};

}  // namespace

QuantSupportColumn cpu_quant_support() { return quant_support_of<CpuQuantSupport>(); }

}  // namespace quant
}  // namespace driftlab
