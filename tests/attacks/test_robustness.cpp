// attacks/robustness.h: the common samples are those every model classifies correctly; each cell
// is the attack's own success rate on them (recomputed here with the attack alone); a model that
// crafts on another judges that model's examples (transfer); repeats change the seed (PGD's random
// start) and give the mean and the n - 1 standard deviation; R(m) is the min-max indicator of the
// means; model 0 is compared with each other one by Wilcoxon and A12 over (attack, repeat).
#include <gtest/gtest.h>

#include <cmath>

#include "attacks/robustness.h"
#include "core/error.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

TEST(Robustness, CommonSamplesCellsTransferRepeatsAndIndicator) {
  // b: a with its last layer's bias moved a little (its own model, its own success rates)
  Model ma = build_model("lenet5", Policy::torch(), 3), mb = build_model("lenet5", Policy::torch(), 3);
  {
    auto params = mb.net->named_params();
    Tensor& bias = params.back().second->value;
    for (int64_t i = 0; i < bias.numel(); ++i) bias.data<float>()[i] += 0.001f * static_cast<float>(i % 3);
  }
  CpuRunner ra(ma), rb(mb);
  const int64_t n = 24;
  const Tensor x = random_tensor({n, 1, 28, 28}, DType::f32, 31, 0.0, 1.0);
  const std::vector<int32_t> pa = predictions(ra.logits(x)), pb = predictions(rb.logits(x));
  // the labels: a's predictions on the even inputs, another class on the odd ones; so the common
  // samples are the even ones where b agrees with a
  std::vector<int32_t> y = pa;
  std::vector<int64_t> want_common;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 2) y[i] = (pa[i] + 1) % 10;
    if (i % 2 == 0 && pb[i] == pa[i]) want_common.push_back(i);
  }
  ASSERT_GE(want_common.size(), 2u) << "the two should agree on some inputs";

  std::vector<attacks::RobustnessAttack> atts(2);
  atts[0].name = "fgsm";
  atts[0].gradient.eps = 0.05;
  atts[1].name = "pgd";
  atts[1].gradient.eps = 0.05, atts[1].gradient.step = 0.02, atts[1].gradient.steps = 2;
  atts[1].gradient.random_start = true;
  const std::vector<attacks::RobustnessModel> models = {{"a", &ra, -1}, {"b", &rb, -1}, {"b_from_a", &rb, 0}};
  const int repeats = 3;
  const attacks::RobustnessTable t = attacks::run_robustness(models, atts, x, y, repeats, 7);
  EXPECT_EQ(t.common, want_common);
  EXPECT_DOUBLE_EQ(t.clean_accuracy[0], 0.5);
  EXPECT_EQ(t.seeds, (std::vector<uint64_t>{7, 8, 9}));

  // each cell recomputed with the attack alone on the common samples
  Tensor xc = Tensor::empty({static_cast<int64_t>(want_common.size()), 1, 28, 28}, DType::f32);
  std::vector<int32_t> yc;
  for (std::size_t i = 0; i < want_common.size(); ++i) {
    std::copy_n(x.data<float>() + want_common[i] * 784, 784, xc.data<float>() + i * 784);
    yc.push_back(y[want_common[i]]);
  }
  const double k = static_cast<double>(want_common.size());
  for (std::size_t a = 0; a < atts.size(); ++a)
    for (int r = 0; r < repeats; ++r) {
      attacks::GradientAttackSpec g = atts[a].gradient;
      g.kind = attacks::parse_attack_kind(atts[a].name);
      g.seed = 7 + static_cast<uint64_t>(r);
      const attacks::AttackResult on_a = attacks::run_gradient_attack(ra, xc, yc, g);
      const attacks::AttackResult on_b = attacks::run_gradient_attack(rb, xc, yc, g);
      const std::vector<int32_t> b_judges_a = predictions(rb.logits(on_a.x_adv));
      int64_t sa = 0, sb = 0, st = 0;
      for (std::size_t i = 0; i < yc.size(); ++i) {
        sa += on_a.success[i], sb += on_b.success[i];
        st += b_judges_a[i] != yc[i];
      }
      SCOPED_TRACE(atts[a].name + " repeat " + std::to_string(r));
      EXPECT_DOUBLE_EQ(t.cell[0][a].rates[r], sa / k);
      EXPECT_DOUBLE_EQ(t.cell[1][a].rates[r], sb / k);
      EXPECT_DOUBLE_EQ(t.cell[2][a].rates[r], st / k);
    }
  // mean, sample standard deviation (n - 1)
  for (std::size_t m = 0; m < 3; ++m)
    for (std::size_t a = 0; a < 2; ++a) {
      const auto& v = t.cell[m][a].rates;
      const double mean = (v[0] + v[1] + v[2]) / 3;
      const double var = ((v[0] - mean) * (v[0] - mean) + (v[1] - mean) * (v[1] - mean) + (v[2] - mean) * (v[2] - mean)) / 2;
      EXPECT_DOUBLE_EQ(t.cell[m][a].mean, mean);
      EXPECT_NEAR(t.cell[m][a].std, std::sqrt(var), 1e-15);
    }
  // FGSM is deterministic: its repeats are equal
  EXPECT_EQ(t.cell[0][0].std, 0.0);
  // R(m) of the means
  std::vector<std::vector<double>> means(3, std::vector<double>(2));
  for (std::size_t m = 0; m < 3; ++m)
    for (std::size_t a = 0; a < 2; ++a) means[m][a] = t.cell[m][a].mean;
  EXPECT_EQ(t.r, attacks::min_max_indicator(means));
  // model 0 against 1 and 2, over 2 attacks x 3 repeats
  ASSERT_EQ(t.pairs.size(), 2u);
  EXPECT_EQ(t.pairs[0].k, 1);
  std::vector<double> a0, a1;
  for (std::size_t a = 0; a < 2; ++a)
    for (int r = 0; r < 3; ++r) a0.push_back(t.cell[0][a].rates[r]), a1.push_back(t.cell[1][a].rates[r]);
  EXPECT_DOUBLE_EQ(t.pairs[0].a12, attacks::a12(a0, a1));

  // at most max_samples of the common ones, the first
  const attacks::RobustnessTable t1 = attacks::run_robustness(models, {atts[0]}, x, y, 1, 7, 1);
  EXPECT_EQ(t1.common, (std::vector<int64_t>{want_common[0]}));
  // bad input by name
  EXPECT_THROW(attacks::run_robustness({{"a", &ra, 1}, {"b", &rb, 0}}, atts, x, y, 1, 7), Error);  // a chain
  attacks::RobustnessAttack cw;
  cw.name = "cw";
  EXPECT_THROW(attacks::run_robustness(models, {cw}, x, y, 1, 7), Error);
  std::vector<int32_t> wrong(y.size(), 0);
  for (std::size_t i = 0; i < y.size(); ++i) wrong[i] = (pa[i] + 1) % 10;  // nothing correct under a
  EXPECT_THROW(attacks::run_robustness(models, atts, x, wrong, 1, 7), Error);
}

}  // namespace
}  // namespace driftlab
