// Static quantization of a graph model (quant/ptq.h calls these for a GraphLayer; not a public
// face of its own). The fp32 graph is planned into units the way PyTorch's eager-mode fusion
// groups modules (torchvision's quantizable models, fuse_model): a conv takes the BatchNorm that
// alone reads it along (folded), a conv, dense or add the ReLU that alone reads it (when the
// scheme fuses ReLU); a dropout is the identity. Every unit becomes one node of an int8 graph
// over the same value names: qconv2d (grouped too), qdense, qmaxpool2d, qglobal_avg_pool, qrelu,
// flatten, reshape, and qadd (GraphLayer::add_multi: two values, each with its own scale and
// zero point). The activation points are the outputs of convs, denses and adds (and of a global
// average pool where the scheme requantizes it), in node order, named "<prefix><node name>" of
// the last fp32 node the unit covers. Any other node is refused naming it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/layers/conv2d_layer.h"
#include "engine/layers/graph_layer.h"
#include "engine/policy.h"
#include "quant/observer.h"
#include "quant/scheme.h"

namespace driftlab {

class BatchNormLayer;

namespace quant {

struct GraphPlan;  // quant/graph_ptq.cpp

std::shared_ptr<GraphPlan> plan_graph(GraphLayer& g, bool relu_fused, const Policy& fp32_policy,
                                      const std::string& prefix);
// Appends the plan's point names (observer indices from names.size() on).
void number_graph_points(GraphPlan& plan, std::vector<std::string>& names, bool gap_point);
// The fp32 graph as the toolchain runs it while observing (BatchNorm folded, ReLU fused).
Tensor run_graph_fp32(GraphPlan& plan, GraphLayer& g, const Tensor& x, RunContext& ctx,
                      std::vector<std::unique_ptr<Observer>>& obs);
// The int8 graph; `cur`: the scale and zero point of its input, then of its output.
std::unique_ptr<GraphLayer> convert_graph(GraphPlan& plan, GraphLayer& g, const QuantScheme& s, const Policy& policy,
                                          const std::vector<ActQParams>& q, ActQParams& cur);

// Shared with quant/ptq.cpp (defined there).
std::unique_ptr<Conv2dLayer> fold_conv_bn(Conv2dLayer& conv, BatchNormLayer& bn, const Shape& in, const Policy& policy,
                                          const std::string& where);
Param* param_named(Layer& l, const std::string& name);
Tensor unflip(const Tensor& w);

}  // namespace quant
}  // namespace driftlab
