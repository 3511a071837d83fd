// ONNX export of an fp32 model: the network as an ONNX graph whose every node states
// the semantics the model's Policy resolved to, so that any ONNX runtime computes what driftlab
// computes under that Policy:
//   - convolutions and pools with their explicit begin/end pads (TF's 'same' puts the odd pixel
//     after, Keras-on-Theano before; the graph never says 'same');
//   - Theano's filter flip applied to the stored weights (ONNX Conv is a cross-correlation);
//   - the flatten order: Keras's channels-last flatten as a Transpose(0,2,3,1) before Flatten;
//   - BatchNorm's epsilon (Lasagne's inverse-std running statistics as explicit Sub/Mul/Add);
//   - hard_sigmoid's slope and offset (HardSigmoid alpha/beta), in layers and recurrent gates;
//   - LSTM gates reordered to ONNX's i,o,f,c, GRU's to z,r,h, linear_before_reset from the
//     GRU's reset placement, the Theano-style update (z takes the new state) as a negated z;
//   - the model file's input standardisation as Sub/Mul at the input.
// An int8 model (quant/: `driftlab quantize`) is written with its own numbers (int8 weights, int32
// biases, every scale and zero point) in one of ONNX's two quantized forms:
//   - QDQ: QuantizeLinear/DequantizeLinear pairs around float Conv, Gemm, Add, MaxPool,
//     GlobalAveragePool (what ONNX Runtime's quantize_static writes; ORT fuses each group into its
//     integer kernel);
//   - QOperator: QLinearConv, com.microsoft QGemm / QLinearAdd / QLinearGlobalAveragePool, MaxPool,
//     Slice, Pad and Reshape on the integers.
// ONNX Runtime then computes with its own arithmetic (division by the scale, a float
// requantization rounded half to even, ...): exactly driftlab's under quant_scheme=ort; under
// another scheme OnnxExport::notes lists each choice in which ORT's arithmetic differs.
//
// The graph runs at inference semantics (BatchNorm's running statistics; dropout is the identity)
// and outputs the logits. Input 'x' has the model's per-sample shape with a symbolic batch axis
// (NCHW for images, (N,T,F) for sequences, float token ids for token models).
//
// Written with the ONNX protobuf schema (Debian's libonnx-dev: onnx-ml.pb.h, libonnx_proto) and
// checked by ONNX's own checker before it is returned. Nothing here names a framework: the
// Policy's resolved op parameters are read from the layers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/transform.h"
#include "engine/layers/visit.h"
#include "engine/model.h"
#include "quant/visit.h"

namespace driftlab {
namespace convert {

struct OnnxExportOptions {
  int64_t opset = 13;  // 13..17: every op here has the same semantics across them
  InputNorm norm;      // the model file's input standardisation (Sub/Mul nodes when not identity)
  std::string doc;     // a line for the graph's doc_string (the source file, the command)
  // Deliberately wrong exports, for the negative tests that show what each semantic is worth:
  bool symmetric_pads = false;      // write each axis's pads as (begin+end)/2 on both sides, rounded up
                                    // (what a converter assuming PyTorch's symmetric padding writes)
  bool rnn_gates_as_stored = false;  // write the recurrent weights' gate blocks in driftlab's stored
                                     // order (i,f,g,o / r,z,n) without ONNX's reordering
  // int8 models only:
  enum class QuantForm { qdq, qoperator };
  QuantForm quant_form = QuantForm::qdq;
  // QOperator only: every activation point's integer tensor (the order of quant/report.h's
  // int8_activations: the quantized input, each conv/dense, an own-scale average pool, each residual
  // block's output) is also a graph output, 'point_<k>'.
  bool expose_points = false;
};

struct OnnxExport {
  std::string bytes;               // the serialized ModelProto
  std::vector<std::string> nodes;  // one line per layer: what it became
  int64_t num_nodes = 0, num_initializers = 0;
  // int8 models: where ONNX Runtime's arithmetic differs from the model's scheme (empty under
  // quant_scheme=ort), one line each naming the knob; and how many 'point_<k>' outputs there are.
  std::vector<std::string> notes;
  int64_t num_points = 0;
};

// Throws naming the layer (index, kind) and what cannot be written: a float64 model, rnn_mask
// carry/zero (the padded steps' skip has no ONNX form here), an opset outside 13..17; for an int8
// model a float bias inside the requantization (quant_bias=float_in_requant: ONNX's integer ops
// take an int32 bias), a clamp other than the type's range or a fused ReLU's, expose_points in QDQ.
OnnxExport export_onnx(Model& model, const OnnxExportOptions& options);

// ONNX's checker (onnx::checker::check_model, full) on serialized bytes: "" when it passes, else
// its message.
std::string check_onnx(const std::string& bytes);

// Writes the bytes to PATH atomically (models/model_file.h write_file_atomic: no half-written file).
void write_onnx(const std::string& path, const std::string& bytes);

// What export_onnx writes for each layer kind of an fp32 model, and for each of quant/'s kinds in
// an int8 model (convert/onnx_quant_export.cpp): the capability table, driftlab model kinds.
SupportColumn onnx_export_support();
quant::QuantSupportColumn onnx_quant_export_support();

}  // namespace convert
}  // namespace driftlab
