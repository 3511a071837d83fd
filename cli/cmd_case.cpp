// driftlab case list / run: the casebook (driftlab/casebook.h, docs/casebook/): real reported
// discrepancies, each reproduced and explained by its knob.
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "driftlab/casebook.h"

namespace driftlab {
namespace cli {
namespace {

void case_list() {
  std::cout << std::left << std::setw(30) << "case" << std::setw(10) << "area" << std::setw(36) << "thread" << "knob(s)\n";
  for (const CaseInfo& c : casebook())
    std::cout << std::setw(30) << c.name << std::setw(10) << c.area << std::setw(36) << c.thread << c.knobs << "\n";
  std::cout << casebook().size() << " cases; `driftlab case run NAME` reproduces one (docs/casebook/NAME.md)\n";
}

// Runs the named cases (all when `all`); a case whose symptom does not show, or does not go with
// its knob, makes the command fail (exit 1) after every case has printed.
void case_run(const std::vector<std::string>& names, bool all) {
  std::vector<std::string> todo = names;
  if (all)
    for (const CaseInfo& c : casebook()) todo.push_back(c.name);
  check(!todo.empty(), "case run: name a case (driftlab case list) or give --all");
  for (const std::string& n : todo) case_named(n);  // every name checked before anything runs
  std::string failed;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const CaseRun r = run_case(todo[i]);
    std::cout << (i ? "\n" : "") << case_report(r);
    if (!r.reproduced()) failed += (failed.empty() ? "" : ", ") + todo[i];
  }
  check(failed.empty(), "case run: not reproduced: ", failed);
}

}  // namespace

void register_case(CLI::App& app) {
  auto* c = app.add_subcommand("case", "the casebook: publicly reported cross-framework discrepancies, each reproduced and explained by its knob");
  c->require_subcommand(1);
  auto* list = c->add_subcommand("list", "every case: its area, its public thread, the knob(s) that explain it");
  list->callback([] { case_list(); });
  auto* run = c->add_subcommand("run", "reproduce cases: the symptom under the reporter's setting, gone with the knob(s) flipped (exit 1 if not)");
  auto names = std::make_shared<std::vector<std::string>>();
  auto all = std::make_shared<bool>(false);
  run->add_option("name", *names, "case names (driftlab case list)");
  run->add_flag("--all", *all, "every case");
  run->callback([names, all] { case_run(*names, *all); });
}

}  // namespace cli
}  // namespace driftlab
