// attacks/boundary.h: properties of the Boundary attack (Foolbox 2's rules; its numpy noise cannot
// be reproduced, so there is no bit-level oracle): every returned example is misclassified by the
// model and inside the bounds, its distance to the input never increases from step to step, the
// same seed gives the same result twice, and an input the model already misclassifies is returned
// unchanged with one query.
#include <gtest/gtest.h>

#include <cstring>

#include "attacks/boundary.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

TEST(Boundary, AdversarialInBoundsDistanceNeverGrowsSeedRepeats) {
  Model m = input_sensitive_lenet5();
  CpuRunner runner(m);
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 14, 0.0, 1.0);
  std::vector<int32_t> y = predictions(runner.logits(x));
  y[2] = (y[2] + 1) % 10;  // misclassified from the start
  attacks::BoundarySpec spec;
  spec.steps = 60;
  spec.seed = 11;
  const attacks::BoundaryResult r = attacks::run_boundary(runner, x, y, spec);
  const std::vector<int32_t> judged = predictions(runner.logits(r.x_adv));
  for (int64_t s = 0; s < 2; ++s) {
    ASSERT_TRUE(r.success[s]) << s << ": an untrained LeNet-5 misclassifies uniform noise";
    EXPECT_NE(judged[s], y[s]) << s << ": the returned example must be adversarial";
    for (int64_t e = 0; e < 784; ++e) {
      ASSERT_GE(r.x_adv.data<float>()[s * 784 + e], 0.f);
      ASSERT_LE(r.x_adv.data<float>()[s * 784 + e], 1.f);
    }
    ASSERT_FALSE(r.trace[s].empty());
    for (std::size_t k = 1; k < r.trace[s].size(); ++k) EXPECT_LT(r.trace[s][k], r.trace[s][k - 1]) << s << " step " << k;
    EXPECT_LT(r.trace[s].back(), r.trace[s].front()) << s << ": 60 steps should get closer than the start";
    EXPECT_DOUBLE_EQ(r.mse[s], r.trace[s].back());
    EXPECT_GT(r.queries[s], 60);
  }
  EXPECT_TRUE(r.success[2]);
  EXPECT_EQ(r.queries[2], 1);
  EXPECT_EQ(std::memcmp(r.x_adv.data<float>() + 2 * 784, x.data<float>() + 2 * 784, 784 * sizeof(float)), 0);
  const attacks::BoundaryResult again = attacks::run_boundary(runner, x, y, spec);
  EXPECT_EQ(std::memcmp(r.x_adv.raw(), again.x_adv.raw(), r.x_adv.nbytes()), 0);
  EXPECT_EQ(r.queries, again.queries);
  EXPECT_EQ(r.trace, again.trace);
  spec.max_directions = 0;
  EXPECT_THROW(attacks::run_boundary(runner, x, y, spec), Error);
}

}  // namespace
}  // namespace driftlab
