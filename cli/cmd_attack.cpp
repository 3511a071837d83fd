// driftlab attack: one attack on one saved model (driftlab/attack.h computes it, report/attack.h
// writes adversarial.npy, png/, result.json and samples.csv); the options and the printed summary.
#include "cli/commands.h"
#include "cli/common.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "driftlab/attack.h"
#include "report/attack.h"

namespace driftlab {
namespace cli {
namespace {

// The command's options: the attack's settings and request, and what only the command has.
struct AttackOptions {
  AttackRequest request;
  std::string out;
  bool png = false;
  int threads = 0;
  DataOptions data;
  DeviceOptions dev;
};

void attack_cmd(AttackOptions o) {
  set_threads(o.threads);
  check(!o.out.empty(), "attack: --out DIR is required");
  o.request.data = o.data;
  o.request.loader = o.data.loader.get();
  o.request.device = o.dev.device;
  const AttackOutcome a = run_attack(o.request);
  report::write_attack(o.out, a, o.png);
  const AttackSettings& s = a.settings;
  const attacks::AttackSummary &all = a.over_all, &on_correct = a.over_correct;
  const std::size_t n = a.labels.size();
  std::cout << s.attack;
  if (!a.decision) {
    if (a.spec.gradient.schedule == attacks::EpsSchedule::foolbox2_sweep)
      std::cout << " sweep of " << s.epsilons << " eps up to " << s.max_epsilon << " (" << s.eps_units << ")";
    else
      std::cout << " eps " << a.spec.gradient.eps << " (" << s.eps_units << ")";
    if (s.convention != "driftlab") std::cout << ", " << s.convention << "'s conventions";
  }
  std::cout << " on " << n << " inputs of " << a.inputs << " (" << a.model << (a.int8 ? " int8" : "") << ", "
            << a.policy << (a.ran_on == Device::cuda ? ", cuda" : "") << ")\n"
            << "  clean accuracy " << fmt(a.clean_accuracy, 4) << "; success rate " << fmt(on_correct.success_rate, 4)
            << " over the " << on_correct.samples << " classified correctly (" << fmt(all.success_rate, 4)
            << " over all)\n"
            << "  per success: mean L2 " << fmt(on_correct.mean_l2, 4) << ", mean Linf " << fmt(on_correct.mean_linf, 4)
            << (a.decision ? "; mean queries " + fmt(on_correct.mean_queries, 1)
                           : "; zero gradients " + std::to_string(all.zero_gradients))
            << "\n";
  if (a.eight_bit != attacks::EightBit::off)
    std::cout << "  as 8-bit images (" << s.eight_bit << "): " << all.successes << " successes of "
              << a.successes_before_8bit << " before\n";
  for (const AttackJudge& j : a.judges)
    std::cout << "  judged by " << j.weights << ": success rate " << fmt(j.rate_all, 4) << " over the "
              << j.samples_all << " classified correctly by every model\n";
  std::cout << "  wrote " << o.out << "/adversarial.npy, result.json, samples.csv" << (o.png ? ", png/" : "") << "\n";
}

}  // namespace

void register_attack(CLI::App& app) {
  // attack
  auto ao = std::make_shared<AttackOptions>();
  AttackSettings& as = ao->request.settings;
  auto* ak = app.add_subcommand("attack", "attack a saved model (fgsm, bim, pgd; boundary and single-pixel on int8 "
                                           "models too): "
                                           "adversarial examples (.npy), result.json, samples.csv");
  ak->add_option("--weights", ao->request.weights, "model file (.dlm); int8: white-box attacks on straight-through gradients (quant/ste.h)")->required();
  ak->add_option("--attack", as.attack, "fgsm | bim | pgd | boundary | single-pixel")->capture_default_str();
  ak->add_option("--iterations", as.iterations, "boundary: steps (Foolbox 2's iterations; default the rules' own: "
                 "5000 Foolbox 2, 25000 Foolbox 3)");
  ak->add_option("--max-directions", as.max_directions, "boundary: candidates per step (Foolbox 2's; Foolbox 3: 1; ART: sample_size)")
      ->capture_default_str();
  ak->add_option("--boundary-rules", as.boundary_rules, "boundary: foolbox2 | foolbox3 | art (default: the convention's; "
                 "driftlab: foolbox2). foolbox3 steps --batch samples together");
  ak->add_option("--max-pixels", as.max_pixels, "single-pixel: positions tried")->capture_default_str();
  ak->add_flag("--transposed-index", as.transposed_index, "single-pixel: Foolbox 2's (x = p % w) reading of a position");
  ak->add_option("--eps", as.eps, "L-inf budget (--eps-units)")->check(kFiniteNonNegative)->capture_default_str();
  ak->add_option("--step", as.step, "bim/pgd step size (--eps-units)")->check(kFiniteNonNegative)->capture_default_str();
  ak->add_option("--steps", as.steps, "bim/pgd iterations")->capture_default_str();
  ak->add_flag("--random-start", as.random_start, "pgd: start from a uniform point of the eps-ball (--seed)");
  ak->add_option("--restarts", as.restarts, "pgd with --random-start: runs from seeds --seed, --seed + 1, ... (ART's "
                 "num_random_init)")->capture_default_str();
  ak->add_option("--restart-select", as.restart_select, "pgd --restarts: per-sample (each sample's successful restart: "
                 "ART >= 1.5) | per-run (the run with the most successes: ART <= 1.4)")->capture_default_str();
  ak->add_flag("--early-stop", as.early_stop, "bim/pgd: a sample stops once misclassified (Foolbox 2's return_early)");
  ak->add_option("--projection", as.projection, "bim/pgd: clip-delta (x0 + clamp(x - x0, -eps, eps), then the "
                 "bounds) | max-min (torchattacks' BIM)")->capture_default_str();
  ak->add_option("--eps-units", as.eps_units, "absolute (input units) | fraction (of the input range: Foolbox 2)")
      ->capture_default_str();
  ak->add_option("--labels-from", as.labels_from, "the loss's labels: true | prediction (ART's default)")
      ->capture_default_str();
  ak->add_option("--lo", as.lo, "lowest valid input (default: 0 through the model's normalisation)");
  ak->add_option("--hi", as.hi, "highest valid input (default: 1 through the model's normalisation)");
  ak->add_option("--seed", as.seed, "pgd's random start")->capture_default_str()->check(CLI::NonNegativeNumber);
  ak->add_option("--batch", as.batch, "inputs per gradient call")->capture_default_str();
  ak->add_option("--input", ao->request.input, "attack these inputs (.npy, the model's input shape) instead of the test split");
  ak->add_option("--labels", ao->request.labels, "their classes (.npy, N integers)");
  ak->add_option("--convention", as.convention,
                 "driftlab | foolbox2 | foolbox3 | art | torchattacks: the library's units, step rule, labels, "
                 "success rule, schedule and defaults for every flag not given")
      ->capture_default_str();
  ak->add_option("--eps-schedule", as.eps_schedule, "fgsm: single | foolbox2-sweep (--epsilons, --max-epsilon); bim, pgd: single | foolbox2-search "
                  "(Foolbox 2's eps search from --eps, step/eps ratio kept)")
      ->capture_default_str();
  ak->add_option("--epsilons", as.epsilons, "foolbox2-sweep: grid size (Foolbox 2's epsilons)")->capture_default_str();
  ak->add_option("--max-epsilon", as.max_epsilon, "foolbox2-sweep: its end (--eps-units)")->capture_default_str();
  ak->add_option("--step-units", as.step_units, "bim/pgd: eps (the step in eps's units) | of-eps (a fraction of "
                 "eps: Foolbox 3)")->capture_default_str();
  ak->add_option("--success", as.success, "label (prediction != label) | clean-prediction (the prediction "
                 "changed: ART)")->capture_default_str();
  ak->add_option("--uint8", as.eight_bit, "off | round | truncate: judge the examples again as 8-bit images, as a PNG stores them "
                 "(k/255, k = x*255 rounded half to even or truncated)")
      ->capture_default_str();
  ak->add_flag("--png", ao->png, "also write each adversarial example as OUT/png/adv_<i>.png");
  ak->add_option("--judge", ao->request.judges, "judge the examples on this model too (transfer; e.g. its int8 version); "
                 "repeatable");
  ak->add_option("--out", ao->out, "output folder")->required();
  add_threads_option(ak, ao->threads);
  add_data_options(ak, ao->data);
  add_device_options(ak, ao->dev);
  ak->callback([ao, ak] {
    AttackOptions o = *ao;
    for (const CLI::Option* opt : ak->get_options())
      if (opt->count() > 0) o.request.settings.given.insert(opt->get_name());
    attack_cmd(o);
  });
}

}  // namespace cli
}  // namespace driftlab
