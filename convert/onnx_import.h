// ONNX import: an ONNX file (torch.onnx.export's, or driftlab's own export under the
// torch preset) mapped onto one of driftlab's models.
//
// driftlab's model files name a zoo architecture, so an import finds the zoo model whose layers
// the graph computes: the graph's weighted nodes (Conv, BatchNormalization, Gemm/MatMul, LSTM,
// GRU, an embedding's Gather) are assigned in graph order to the model's weighted layers in
// layer order, each checked against the layer (weight shapes, strides, pads, dilations, group,
// epsilon, hidden size, gate activations, linear_before_reset, direction); the pools (kind,
// window, stride, pads) and the count of activations and residual Adds must match too. The
// first zoo model that matches is built under the torch preset (ONNX's semantics:
// cross-correlation, explicit pads, channels-first flatten, PyTorch's gate sets) and given the
// graph's weights, gate blocks reordered from ONNX's i,o,f,c / z,r,h.
//
// torch.onnx.export in eval mode folds each BatchNorm into the convolution before it (a Conv with
// a bias and no BatchNormalization node): such a Conv fills the zoo's bias-free conv with the
// folded weights and the BatchNorm after it with the identity plus the folded bias (gamma 1,
// mean 0, a variance for which 1/sqrt(var + eps) is exactly 1 in float).
//
// Errors name the file and, for a node that cannot be mapped, the node's name, op type and
// attributes; for a graph that maps onto no zoo model, each candidate's first mismatch.
#pragma once
#include <string>
#include <vector>

#include "engine/layers/visit.h"
#include "engine/model.h"

namespace driftlab {
namespace convert {

struct OnnxImport {
  Model model;                       // under the torch preset
  std::vector<std::string> mapping;  // "node 'Conv_0' (Conv) -> 0.conv2d", one per weighted node
  std::string producer;              // the file's producer_name and producer_version
  int64_t opset = 0;
};

OnnxImport import_onnx(const std::string& path);
// The same from the file's bytes; `name` stands for the file in messages.
OnnxImport import_onnx_bytes(const std::string& bytes, const std::string& name);

// Which layer kinds import_onnx can fill from an ONNX file's nodes (the capability table,
// driftlab model kinds).
SupportColumn onnx_import_support();

}  // namespace convert
}  // namespace driftlab
