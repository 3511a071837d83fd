// EmbeddingLayer: float64 gradient check (reference kernels) of embedding -> flatten -> dense,
// row lookup, accumulation of repeated ids, ids refused with the layer and the id named, the
// initialiser resolved from the preset, and its distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/layers/dense_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/sequential.h"
#include "engine/random.h"
#include "tests/layers/gradcheck_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Policy f64_reference(const std::string& preset) {
  Policy p = Policy::preset_named(preset);
  use_reference_kernels(p);
  p.dtype = FloatType::float64;
  return p;
}

Tensor ids_tensor(Shape shape, const std::vector<double>& ids, DType dt = DType::f64) {
  return Tensor::from<double>(std::move(shape), ids).to(dt);
}

TEST(GradCheckEmbedding, TableThroughDense) {
  for (const char* preset : {"tensorflow", "torch"}) {
    SCOPED_TRACE(preset);
    Policy p = f64_reference(preset);
    Rng rng(p.rng_engine, 5);
    Sequential net({5});
    net.add(std::make_unique<EmbeddingLayer>(EmbeddingArgs{7, 3, {}}, net.current_shape(), p, rng));
    net.add(std::make_unique<FlattenLayer>(net.current_shape(), p));
    net.add(std::make_unique<DenseLayer>(4, net.current_shape(), p, rng));
    // Repeated ids (3 three times, 0 twice) so rows collect several contributions; id 6 = V-1.
    Tensor x = ids_tensor({3, 5}, {3, 0, 3, 6, 1, 0, 3, 2, 2, 5, 6, 6, 1, 4, 4});
    // The loss is bilinear in (table, dense weight), so the central difference has no
    // truncation error: only rounding, eps*|f|/h ~ 2e-16 * 10 / 1e-6 = 2e-9. 1e-7 is 50x that,
    // while a wrong row or a missed repeat is off by a whole |R * W| ~ 1e-2..1.
    gradcheck_sequential(net, x, 1e-7, /*x_stride=*/0, /*p_stride=*/1);
  }
}

TEST(Embedding, ForwardPicksRowsBackwardAddsRepeats) {
  Policy p = f64_reference("torch");
  Rng rng(p.rng_engine, 1);
  EmbeddingLayer emb({4, 2, EmbeddingInit::uniform_0p05}, {3}, p, rng);
  Param* w = emb.params()[0];
  EXPECT_EQ(w->value.shape(), (Shape{4, 2}));
  // Table row r = (10r, 10r+1): every output names the row it came from.
  for (int64_t r = 0; r < 4; ++r) {
    w->value.data<double>()[r * 2] = 10.0 * r;
    w->value.data<double>()[r * 2 + 1] = 10.0 * r + 1;
  }
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  // Ids as float32 (how datasets store them) into a float64 table: the output takes the table's dtype.
  Tensor y = emb.forward(ctx, ids_tensor({2, 3}, {3, 0, 3, 1, 1, 2}, DType::f32));
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(y.dtype(), DType::f64);
  const std::vector<double> want{30, 31, 0, 1, 30, 31, 10, 11, 10, 11, 20, 21};
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.at(i), want[static_cast<std::size_t>(i)]) << i;
  // dy[n,t,k] = 1 + k + 2*(3n+t): row 3 gets cells 0 and 2, row 1 cells 3 and 4, row 2 cell 5.
  Tensor dy({2, 3, 2}, DType::f64);
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<double>()[i] = 1.0 + static_cast<double>(i);
  Tensor dx = emb.backward(ctx, dy);
  ASSERT_EQ(dx.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < dx.numel(); ++i) EXPECT_EQ(dx.at(i), 0.0);
  const std::vector<double> g{3, 4, 7 + 9, 8 + 10, 11, 12, 1 + 5, 2 + 6};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(w->grad.at(i), g[static_cast<std::size_t>(i)]) << i;
  // The backward took the recording (engine/layers/layer.h): another needs another forward.
  EXPECT_NE(error_of([&] { emb.backward(ctx, dy); }).find("embedding: backward without a recorded forward"),
            std::string::npos);
  // Backward adds: a second recorded pass doubles the gradient.
  const Tensor ids = ids_tensor({2, 3}, {3, 0, 3, 1, 1, 2}, DType::f32);
  emb.forward(ctx, ids);
  emb.backward(ctx, dy);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(w->grad.at(i), 2 * g[static_cast<std::size_t>(i)]) << i;
  // A container that needs no dx gets none.
  emb.forward(ctx, ids);
  ctx.need_dx = false;
  EXPECT_FALSE(emb.backward(ctx, dy).defined());
}

TEST(Embedding, BadIdsNameTheLayerTheIdAndWhere) {
  Policy p = Policy::tensorflow();
  Rng rng(p.rng_engine, 1);
  EmbeddingLayer emb({7, 3, {}}, {4}, p, rng);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  std::string e = error_of([&] { emb.forward(ctx, ids_tensor({2, 4}, {0, 1, 2, 3, 4, 5, 7, 6}, DType::f32)); });
  EXPECT_NE(e.find("embedding 7x3: id 7 at [1,2]"), std::string::npos) << e;
  EXPECT_NE(e.find("0..6"), std::string::npos) << e;
  e = error_of([&] { emb.forward(ctx, ids_tensor({1, 4}, {0, -1, 2, 3}, DType::f32)); });
  EXPECT_NE(e.find("id -1 at [0,1]"), std::string::npos) << e;
  e = error_of([&] { emb.forward(ctx, ids_tensor({1, 4}, {0, 1, 2.5, 3}, DType::f32)); });
  EXPECT_NE(e.find("id 2.5 at [0,2]"), std::string::npos) << e;
  e = error_of([&] { emb.forward(ctx, ids_tensor({1, 4}, {NAN, 1, 2, 3}, DType::f32)); });
  EXPECT_NE(e.find("at [0,0]"), std::string::npos) << e;
  e = error_of([&] { emb.forward(ctx, ids_tensor({1, 3}, {0, 1, 2}, DType::f32)); });
  EXPECT_NE(e.find("embedding"), std::string::npos) << e;  // wrong number of steps
  e = error_of([&] { EmbeddingLayer({0, 3, {}}, {4}, p, rng); });
  EXPECT_NE(e.find("num_ids=0"), std::string::npos) << e;
  e = error_of([&] { EmbeddingLayer({5, 3, {}}, {4, 2}, p, rng); });
  EXPECT_NE(e.find("token ids"), std::string::npos) << e;
  e = error_of([&] { emb.backward(ctx, Tensor({2, 4, 3}, DType::f32)); });
  EXPECT_NE(e.find("backward without a recorded forward"), std::string::npos) << e;
}

TEST(Embedding, InitialiserFollowsThePreset) {
  EXPECT_EQ(embedding_init_for(Policy::torch()), EmbeddingInit::normal_1);
  EXPECT_EQ(embedding_init_for(Policy::tensorflow()), EmbeddingInit::uniform_0p05);
  EXPECT_EQ(embedding_init_for(Policy::theano()), EmbeddingInit::uniform_0p05);
  // A knob changed on top of a preset does not change the preset's embedding initialiser.
  EXPECT_EQ(embedding_init_for(Policy::parse("torch,init_weight=glorot_uniform")), EmbeddingInit::normal_1);

  const int64_t v = 500, d = 40;  // 20,000 draws
  for (const char* preset : {"tensorflow", "theano", "torch"}) {
    SCOPED_TRACE(preset);
    Policy p = Policy::preset_named(preset);
    Rng rng(p.rng_engine, 3);
    EmbeddingLayer emb({v, d, {}}, {8}, p, rng);
    EXPECT_NE(emb.describe().find(embedding_init_name(embedding_init_for(p))), std::string::npos);
    const Tensor& w = emb.params()[0]->value;
    EXPECT_EQ(w.dtype(), DType::f32);
    double sum = 0, sum2 = 0, lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < w.numel(); ++i) {
      sum += w.at(i);
      sum2 += w.at(i) * w.at(i);
      lo = std::min(lo, w.at(i));
      hi = std::max(hi, w.at(i));
    }
    const double n = static_cast<double>(w.numel()), mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
    if (emb.init() == EmbeddingInit::uniform_0p05) {
      EXPECT_GE(lo, -0.05);
      EXPECT_LT(hi, 0.05);
      // U(-a,a): sd a/sqrt(3) = 0.028868. Standard error of the sample sd ~ sd/sqrt(2n)*1.1
      // ~ 1.6e-4: 1e-3 is > 5 standard errors, while a range of +-0.1 would give 0.0577.
      EXPECT_NEAR(sd, 0.05 / std::sqrt(3.0), 1e-3);
      // Standard error of the mean sd/sqrt(n) ~ 2e-4: 1e-3 is 5 of them.
      EXPECT_NEAR(mean, 0.0, 1e-3);
    } else {
      // N(0,1): standard errors 1/sqrt(n) = 0.007 (mean) and ~1/sqrt(2n) = 0.005 (sd); 0.035 and
      // 0.025 are 5 of them, far from uniform(+-0.05)'s sd 0.029.
      EXPECT_NEAR(mean, 0.0, 0.035);
      EXPECT_NEAR(sd, 1.0, 0.025);
      EXPECT_GT(hi, 3.0);  // P(max of 20,000 N(0,1) < 3) = (1-1.35e-3)^20000 ~ 2e-12
      EXPECT_LT(lo, -3.0);
    }
  }
  // An explicit choice overrides the preset's.
  Policy t = Policy::torch();
  Rng rng(t.rng_engine, 3);
  EmbeddingLayer keras_like({10, 4, EmbeddingInit::uniform_0p05}, {2}, t, rng);
  EXPECT_EQ(keras_like.init(), EmbeddingInit::uniform_0p05);
}

TEST(Embedding, NormalInitIsReproducibleAndDrawsEveryBlock) {
  // 37 elements: two full blocks of 16 plus a redrawn final block overlapping the second.
  for (int64_t numel : {37, 32, 7}) {
    SCOPED_TRACE(numel);
    Tensor a({numel, 1}, DType::f32), b({numel, 1}, DType::f32);
    Rng ra(RngEngine::mt19937_u24, 9), rb(RngEngine::mt19937_u24, 9);
    init_embedding(a, EmbeddingInit::normal_1, ra);
    init_embedding(b, EmbeddingInit::normal_1, rb);
    EXPECT_TRUE(bitwise_equal(a, b));
    for (int64_t i = 0; i < numel; ++i) {
      EXPECT_TRUE(std::isfinite(a.at(i))) << i;
      EXPECT_LT(std::fabs(a.at(i)), 6.0) << i;  // sqrt(-2 ln 2^-24) = 5.77 bounds Box-Muller
    }
    // No element is left a raw uniform in [0,1): with 7..37 N(0,1) draws, some are negative.
    EXPECT_LT(*std::min_element(a.data<float>(), a.data<float>() + numel), 0.0f);
  }
}

}  // namespace
}  // namespace driftlab
