// attacks/single_pixel.h: Foolbox 2's single-pixel attack. Properties: a successful example
// differs from its input at exactly one spatial position (every channel set to the range's
// minimum or maximum) and the model misclassifies it; everything stays in bounds; the same seed
// gives the same result twice; max_pixels bounds the queries; an input the model already
// misclassifies is a success with no pixel changed and one query.
#include <gtest/gtest.h>

#include <cstring>

#include "attacks/single_pixel.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

TEST(SinglePixel, SuccessesChangeExactlyOnePixelAndAreMisclassified) {
  Model m = input_sensitive_lenet5();
  CpuRunner runner(m);
  const Tensor x = random_tensor({6, 1, 28, 28}, DType::f32, 12, 0.0, 1.0);
  const std::vector<int32_t> y = predictions(runner.logits(x));  // every input correctly classified
  attacks::SinglePixelSpec spec;
  spec.max_pixels = 784;
  spec.seed = 3;
  const attacks::SinglePixelResult r = attacks::run_single_pixel(runner, x, y, spec);
  const std::vector<int32_t> judged = predictions(runner.logits(r.x_adv));
  int successes = 0;
  for (int64_t s = 0; s < 6; ++s) {
    int64_t changed = 0, at = -1;
    for (int64_t e = 0; e < 784; ++e) {
      const float a = x.data<float>()[s * 784 + e], b = r.x_adv.data<float>()[s * 784 + e];
      ASSERT_GE(b, 0.f);
      ASSERT_LE(b, 1.f);
      if (a != b) ++changed, at = e;
    }
    EXPECT_LE(r.queries[s], 1 + 2 * 784);
    if (r.success[s]) {
      ++successes;
      EXPECT_LE(changed, 1) << s;  // one position (0 if the new value happened to equal the old)
      EXPECT_NE(judged[s], y[s]) << s << ": the returned example must be adversarial";
      EXPECT_EQ(r.adv_pred[s], judged[s]);
      if (changed) {
        EXPECT_EQ(at, r.row[s] * 28 + r.col[s]);
        const float v = r.x_adv.data<float>()[s * 784 + at];
        EXPECT_TRUE(v == 0.f || v == 1.f);
      }
    } else {
      EXPECT_EQ(changed, 0) << s;
      EXPECT_EQ(r.queries[s], 1 + 2 * 784) << s << ": a failure tried every pixel twice";
    }
  }
  EXPECT_GT(successes, 0) << "an untrained LeNet-5 should flip on some single pixel";
  // the same seed twice: the same examples and queries
  const attacks::SinglePixelResult again = attacks::run_single_pixel(runner, x, y, spec);
  EXPECT_EQ(std::memcmp(r.x_adv.raw(), again.x_adv.raw(), r.x_adv.nbytes()), 0);
  EXPECT_EQ(r.queries, again.queries);
}

TEST(SinglePixel, MaxPixelsBoundsQueriesAndMisclassifiedInputsCostOne) {
  Model m = input_sensitive_lenet5();
  CpuRunner runner(m);
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 13, 0.0, 1.0);
  std::vector<int32_t> y = predictions(runner.logits(x));
  y[1] = (y[1] + 1) % 10;  // sample 1 misclassified from the start
  attacks::SinglePixelSpec spec;
  spec.max_pixels = 5;
  const attacks::SinglePixelResult r = attacks::run_single_pixel(runner, x, y, spec);
  EXPECT_TRUE(r.success[1]);
  EXPECT_EQ(r.queries[1], 1);
  EXPECT_EQ(r.row[1], -1);
  for (int64_t s = 0; s < 3; ++s) EXPECT_LE(r.queries[s], 1 + 2 * 5);
  // Foolbox 2's transposed reading of the flat position: still one pixel, the transposed one
  spec.max_pixels = 784;
  spec.transposed_index = true;
  const attacks::SinglePixelResult t = attacks::run_single_pixel(runner, x, predictions(runner.logits(x)), spec);
  for (int64_t s = 0; s < 3; ++s)
    if (t.success[s] && t.row[s] >= 0) EXPECT_LT(t.row[s], 28);
  // bad input by name
  spec.max_pixels = 0;
  EXPECT_THROW(attacks::run_single_pixel(runner, x, y, spec), Error);
  spec.max_pixels = 5;
  EXPECT_THROW(attacks::run_single_pixel(runner, Tensor({2, 784}, DType::f32), {0, 1}, spec), Error);
}

}  // namespace
}  // namespace driftlab
