// Graph specs (models/graph.h, build_graph): the JSON a graph model file's header holds. Any
// bytes are refused with a driftlab::Error or build a graph whose forward on a zero batch of one
// gives its output shape; parameters are bounded at 2^22 bytes (as a model file's data bounds
// them) and graphs with values over 2^20 elements per sample are not run.
#include <nlohmann/json.hpp>

#include "engine/random.h"
#include "fuzz/fuzz_common.h"
#include "models/graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  if (size > 8192) return 0;
  fuzz_one([&] {
    nlohmann::json spec;
    try {
      spec = nlohmann::json::parse(fuzz_bytes(data, size));
    } catch (const nlohmann::json::exception&) {
      return;  // not JSON: the model file's reader refuses it before (its header is JSON)
    }
    const Policy p = Policy::torch();
    Rng rng(p.rng_engine, 1);
    std::unique_ptr<GraphLayer> g = build_graph(spec, p, rng, uint64_t{1} << 22);
    for (std::size_t v = 0; v < g->num_values(); ++v)
      if (shape_numel(g->value_shape(static_cast<int>(v))) > (int64_t{1} << 20)) return;
    Shape s{1};
    s.insert(s.end(), g->value_shape(0).begin(), g->value_shape(0).end());
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor y = g->forward(ctx, Tensor(s, DType::f32));
    const Shape out = g->output_shape();  // by value: one copy for begin() and end()
    Shape want{1};
    want.insert(want.end(), out.begin(), out.end());
    fuzz_require(y.shape() == want, "graph spec: output shape");
  });
  return 0;
}
