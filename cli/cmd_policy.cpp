// driftlab policy show / diff, and driftlab explain: a policy's knobs, two policies knob by knob, one knob with a live example.
#include "cli/commands.h"
#include "cli/common.h"

#include <iomanip>
#include <iostream>
#include <memory>

#include "drift/explain.h"
#include "driftlab/policy.h"

namespace driftlab {
namespace cli {
namespace {

void policy_show(const std::string& spec) {
  Policy p = Policy::parse(spec);
  std::cout << "policy " << p.to_string() << "\n";
  std::string group;
  for (const auto& k : knob_table()) {
    if (k.group != group) {
      group = k.group;
      std::cout << "\n[" << group << "]\n";
    }
    std::cout << "  " << std::left << std::setw(24) << k.name << " = " << std::setw(22) << p.get(k.name) << " "
              << k.what << "\n"
              << "  " << std::setw(24) << "" << "   " << p.preset << ": " << preset_copies(k, p.preset) << "\n";
  }
}

void policy_diff(const std::string& a, const std::string& b) {
  Policy pa = Policy::parse(a), pb = Policy::parse(b);
  auto d = diff(pa, pb);
  std::cout << "policy diff " << pa.to_string() << " vs " << pb.to_string() << ": " << d.size() << " of "
            << knob_table().size() << " knobs differ\n";
  for (const auto& k : d) {
    const KnobInfo& info = knob_info(k.knob);
    std::cout << "  " << std::left << std::setw(24) << k.knob << std::setw(22) << k.a << std::setw(22) << k.b
              << info.what << "\n";
  }
}

}  // namespace

void register_policy(CLI::App& app) {
  // policy
  auto* pol = app.add_subcommand("policy", "show a policy's knobs, or diff two policies");
  pol->require_subcommand(1);
  auto* show = pol->add_subcommand("show", "print every knob of a policy and the framework behaviour it copies");
  auto spec = std::make_shared<std::string>();
  show->add_option("policy", *spec, "e.g. torch or tensorflow,relu_grad_at_zero=0.5")->required();
  show->callback([spec] { policy_show(*spec); });
  auto* pdiff = pol->add_subcommand("diff", "knob-by-knob difference of two policies");
  auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
  pdiff->add_option("a", *a)->required();
  pdiff->add_option("b", *b)->required();
  pdiff->callback([a, b] { policy_diff(*a, *b); });
}

void register_explain(CLI::App& app) {
  auto knob = std::make_shared<std::string>();
  auto* ex = app.add_subcommand("explain", "what a knob does, its value per framework, its source, a live example");
  ex->add_option("knob", *knob)->required();
  ex->callback([knob] { std::cout << explain_knob(*knob); });
}

}  // namespace cli
}  // namespace driftlab
