// The casebook's registry and its printed form (driftlab/casebook.h).
#include "driftlab/casebook.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "core/error.h"

namespace driftlab {

const std::vector<CaseInfo>& casebook() {
  static const std::vector<CaseInfo> kCases = [] {
    std::vector<CaseInfo> all;
    for (auto part : {casebook_detail::layer_cases(), casebook_detail::int8_cases(), casebook_detail::attack_cases()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return kCases;
}

const CaseInfo& case_named(const std::string& name) {
  std::string known;
  for (const CaseInfo& c : casebook()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  fail("case: unknown case '", name, "' (known: ", known, ")");
}

CaseRun run_case(const std::string& name) {
  CaseRun r;
  r.info = &case_named(name);
  r.result = r.info->run();
  r.present = r.result.reporter > r.info->present_above;
  r.gone = r.result.flipped <= r.info->gone_at_most;
  return r;
}

std::string case_report(const CaseRun& r) {
  const CaseInfo& c = *r.info;
  std::ostringstream os;
  os << "case " << c.name << " (" << c.area << "): " << c.thread << "\n"
     << "  reported: \"" << c.quote << "\"\n"
     << "  setting:  " << c.setting << "\n"
     << "  knob(s):  " << c.knobs << "\n\n"
     << r.result.text << "\n"
     << std::setprecision(6) << "  " << c.measure << ":\n"
     << "    reporter's setting  " << r.result.reporter << "  (the symptom: above " << c.present_above << ") "
     << (r.present ? "present" : "NOT present") << "\n"
     << "    knob(s) flipped     " << r.result.flipped << "  (gone: at most " << c.gone_at_most << ") "
     << (r.gone ? "gone" : "NOT gone") << "\n"
     << "  fix: " << c.fix << "\n"
     << (r.reproduced() ? "reproduced: the symptom shows under the reporter's setting and the knob(s) remove it\n"
                        : "NOT reproduced\n");
  return os.str();
}

}  // namespace driftlab
