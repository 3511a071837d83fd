// What the graph importers' fuzz targets check of an imported graph: one forward of a zero batch of
// one gives the output shape the import reported. Graphs with a value over 2^20 elements per sample
// are not run (a valid graph may be large; the fuzzer's memory limit is not the reader's).
#pragma once
#include "engine/layers/graph_layer.h"
#include "kernels/cpu/registry.h"
#include "fuzz/fuzz_common.h"

namespace driftlab {

inline void fuzz_forward_graph(GraphLayer& g, const Shape& input_shape, const Shape& output_shape, const char* what) {
  for (std::size_t v = 0; v < g.num_values(); ++v)
    if (shape_numel(g.value_shape(static_cast<int>(v))) > (int64_t{1} << 20)) return;
  Shape s{1};
  s.insert(s.end(), input_shape.begin(), input_shape.end());
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor y = g.forward(ctx, Tensor(s, DType::f32));
  Shape want{1};
  want.insert(want.end(), output_shape.begin(), output_shape.end());
  fuzz_require(y.shape() == want, what);
}

}  // namespace driftlab
