// The library face as the Python module calls it (driftlab/evaluate.h predict_inputs on a model held
// in memory): the C++ side of the Python overhead measurement (bench/peers/python_overhead.py runs
// this binary and the same calls through `import driftlab` in one run, and prints the difference
// per call). LeNet-5 under the torch preset, 1 and 1,000 inputs, float32.
#include <benchmark/benchmark.h>

#include "driftlab/evaluate.h"
#include "driftlab/model.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

void BM_FacePredict(benchmark::State& state) {
  SavedModel m = zoo_model("lenet5", "torch", 1);
  const Tensor x = random_tensor({state.range(0), 1, 28, 28}, DType::f32, 2, 0.0, 1.0);
  for (auto _ : state) {
    Tensor y = predict_inputs(m, x, "x");
    benchmark::DoNotOptimize(y.raw());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_FacePredict)->Arg(1)->Arg(1000)->ArgName("inputs")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace driftlab
