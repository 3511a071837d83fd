// The casebook's attack cases (driftlab/casebook.h; pages in docs/casebook/).
#include <algorithm>
#include <iomanip>
#include <sstream>

#include "attacks/gradient.h"
#include "driftlab/casebook.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "models/reparam.h"

namespace driftlab {
namespace {

using namespace attacks;

// bethgelab/foolbox#108: FGSM through a Keras model's probability outputs vs through its logits.
CaseResult foolbox_probabilities() {
  const int64_t n = 200;
  Rng rng(RngEngine::mt19937_u24, 21);
  Tensor x({n, 1, 28, 28}, DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform_f32();
  // A LeNet-5 made as confident as a trained model on easy inputs (the reporter's MNIST model had
  // 99.8% clean accuracy): its last layer (bias zero) scaled so that the median gap between the
  // two largest logits on these inputs is 30, beyond the clip's -log(1e-7) = 16.1.
  Model keras = build_model("lenet5", Policy::tensorflow(), 3);
  std::vector<double> gaps;
  {
    CpuRunner runner(keras);
    const Tensor z = runner.logits(x);
    for (int64_t i = 0; i < n; ++i) {
      double a = -1e300, b = -1e300;
      for (int64_t c = 0; c < 10; ++c) {
        const double v = z.at(i * 10 + c);
        if (v > a) b = a, a = v;
        else if (v > b) b = v;
      }
      gaps.push_back(a - b);
    }
  }
  std::nth_element(gaps.begin(), gaps.begin() + n / 2, gaps.end());
  const float factor = static_cast<float>(30.0 / gaps[static_cast<std::size_t>(n / 2)]);
  auto ps = keras.net->named_params();
  for (auto it = ps.rbegin(); it != ps.rend(); ++it)
    if (!it->second->is_bias) {
      Tensor& w = it->second->value;
      for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] *= factor;
      break;
    }
  Model logits = rebuild_under(keras, Policy::parse("tensorflow,ce_formulation=log_softmax"), true);
  GradientAttackSpec spec;
  spec.kind = AttackKind::fgsm;
  spec.eps = 0.1;
  auto attack = [&](Model& m) {
    CpuRunner runner(m);
    const Tensor z = runner.logits(x);
    std::vector<int32_t> pred(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int32_t best = 0;
      for (int32_t c = 1; c < 10; ++c)
        if (z.at(i * 10 + c) > z.at(i * 10 + best)) best = c;
      pred[static_cast<std::size_t>(i)] = best;
    }
    return summarize(run_gradient_attack(runner, x, pred, spec));  // move each input off its class
  };
  const AttackSummary k = attack(keras), l = attack(logits);
  CaseResult r;
  r.reporter = double(k.zero_gradients) / double(k.samples);
  r.flipped = double(l.zero_gradients) / double(l.samples);
  std::ostringstream os;
  os << std::setprecision(3) << "  LeNet-5 (last layer x" << factor << ": median top-2 logit gap 30), " << n
     << " inputs, FGSM L-inf eps 0.1 away from each input's predicted class\n"
     << "  loss on the probabilities, clipped (Keras, Foolbox < 0.14): zero gradient on " << k.zero_gradients << " of "
     << k.samples << ", success " << 100 * k.success_rate << "%\n"
     << "  loss on the logits (cleverhans, Foolbox >= 0.14):          zero gradient on " << l.zero_gradients << " of "
     << l.samples << ", success " << 100 * l.success_rate << "%\n"
     << "  (the reporter: Foolbox 47.7% success, cleverhans 78% on the same model)\n";
  r.text = os.str();
  return r;
}

// Trusted-AI/adversarial-robustness-toolbox#714: PGD's random restarts kept the best whole run.
CaseResult art_pgd_restarts() {
  const int64_t n = 200;
  const int restarts = 10;
  Rng rng(RngEngine::mt19937_u24, 31);
  Tensor x({n, 1, 28, 28}, DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform_f32();
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  // ART's conventions (labels from the model's predictions, success = the prediction changed), a
  // small L-inf ball so that the restarts' random starts decide which inputs fall
  GradientAttackSpec spec;
  spec.kind = AttackKind::pgd;
  spec.eps = 0.1, spec.step = 0.04, spec.steps = 3;
  spec.random_start = true;
  spec.labels = LabelSource::clean_prediction;
  spec.success = SuccessRule::differs_from_clean_prediction;
  spec.seed = 5;
  const std::vector<int32_t> unused(static_cast<std::size_t>(n), 0);  // labels come from the predictions
  // every restart on its own (restarts = 1 from seed + k): which inputs some restart fools
  std::vector<uint8_t> fooled(static_cast<std::size_t>(n), 0);
  std::ostringstream per;
  for (int k = 0; k < restarts; ++k) {
    GradientAttackSpec one = spec;
    one.seed = spec.seed + static_cast<uint64_t>(k);
    const AttackResult rk = run_gradient_attack(runner, x, unused, one);
    int64_t c = 0;
    for (int64_t s = 0; s < n; ++s) fooled[s] = fooled[s] || rk.success[s], c += rk.success[s];
    per << (k ? ", " : "") << c;
  }
  const int64_t any = std::count(fooled.begin(), fooled.end(), uint8_t{1});
  auto with = [&](RestartSelect sel) {
    GradientAttackSpec s = spec;
    s.restarts = restarts, s.restart_select = sel;
    return summarize(run_gradient_attack(runner, x, unused, s));
  };
  const AttackSummary run = with(RestartSelect::per_run), sample = with(RestartSelect::per_sample);
  CaseResult r;
  r.reporter = double(any - run.successes) / double(n);
  r.flipped = double(any - sample.successes) / double(n);
  std::ostringstream os;
  os << std::setprecision(3) << "  LeNet-5 (untrained, seed 3), " << n << " inputs, L-inf PGD eps 0.1 (3 steps of 0.04) with a "
     << "random start, ART's labels and success rule, " << restarts << " restarts\n"
     << "  each restart alone fools " << per.str() << " inputs; some restart fools " << any << "\n"
     << "  robust accuracy reported: keeping the best whole run (ART <= 1.4) " << 100 * (1 - run.success_rate)
     << "%, each input's successful restart (ART >= 1.5) " << 100 * (1 - sample.success_rate) << "%\n"
     << "  (the thread's illustration: two restarts each fooling half of 10 inputs, the other half: 50% against 0%)\n";
  r.text = os.str();
  return r;
}

}  // namespace

namespace casebook_detail {

std::vector<CaseInfo> attack_cases() {
  std::vector<CaseInfo> v;
  v.push_back({"foolbox-fgsm-probabilities", "attacks", "bethgelab/foolbox#108",
               "I've noticed an issue, particularly with FGSM where cleverhans is somehow mounting a much stronger attack.",
               "FGSM on a Keras model whose output is softmax probabilities: the loss taken on the clipped probabilities "
               "(Foolbox before 0.14) vs on the logits (cleverhans)",
               "ce_formulation: softmax_clip -> log_softmax",
               "share of inputs whose loss gradient is exactly zero (FGSM cannot move them)", 0.05, 0.0,
               "attack the logits: Foolbox >= 0.14 takes the softmax's input; elsewhere build the model without its final "
               "softmax for the attack",
               foolbox_probabilities});
  v.push_back({"art-pgd-restarts", "attacks", "Trusted-AI/adversarial-robustness-toolbox#714",
               "However, this can give overly optimistic scores of model performance.",
               "ART <= 1.4's ProjectedGradientDescent(num_random_init=10): every restart runs over all inputs, and the "
               "restart with the highest success rate is returned whole",
               "--restart-select: per-run (ART <= 1.4) -> per-sample (ART >= 1.5, Madry et al.'s worst case per input)",
               "share of the inputs reported robust that some restart fooled (each restart rerun alone here)", 0.0,
               0.0, "ART >= 1.5 (the fix, #765); with an older ART, run the restarts yourself and keep each input's "
               "adversarial example",
               art_pgd_restarts});
  return v;
}

}  // namespace casebook_detail
}  // namespace driftlab
