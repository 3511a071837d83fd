// The casebook (docs/casebook/): real, publicly reported discrepancies between frameworks, each
// reproduced on the smallest model or op that shows it and explained by the knob(s) that cause it.
//
// A case computes one measure twice: under the reporter's setting, where the symptom must show
// (the measure above `present_above`), and with the knob(s) flipped to the other framework's
// values, where it must be gone (at most `gone_at_most`). `driftlab case run NAME` prints the
// walk-through; tests/test_casebook.cpp runs every case and asserts both.
// To add a case: 1) a CaseInfo in driftlab/casebook_<area>.cpp with its run function; 2) its page
// docs/casebook/<name>.md (the test checks that every case has one).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace driftlab {

struct CaseResult {
  double reporter = 0;  // the measure under the reporter's setting
  double flipped = 0;   // the same measure with the knob(s) flipped
  std::string text;     // the walk-through: what ran, the numbers of the kind the reporter saw
};

struct CaseInfo {
  std::string name;     // e.g. "keras-same-padding-stride2"
  std::string area;     // layers | training | int8 | attacks
  std::string thread;   // the public thread, "owner/repo#number"
  std::string quote;    // the reporter's symptom, one line, verbatim
  std::string setting;  // the reporter's setting in driftlab's terms
  std::string knobs;    // the knob(s) flipped: "knob: reporter's value -> other value"
  std::string measure;  // what is compared, in words
  double present_above = 0;
  double gone_at_most = 0;
  std::string fix;      // what a user changes in their framework
  std::function<CaseResult()> run;
};

// Every case, in the order `driftlab case list` prints them (by area, then name).
const std::vector<CaseInfo>& casebook();
// Throws naming the unknown case and listing the known ones.
const CaseInfo& case_named(const std::string& name);

struct CaseRun {
  const CaseInfo* info = nullptr;
  CaseResult result;
  bool present = false;  // result.reporter > present_above
  bool gone = false;     // result.flipped <= gone_at_most
  bool reproduced() const { return present && gone; }
};
CaseRun run_case(const std::string& name);
// The printed form: the thread, the quote, the setting, the walk-through, the verdict.
std::string case_report(const CaseRun& r);

namespace casebook_detail {
// Each area's cases (driftlab/casebook_layers.cpp, casebook_int8.cpp, casebook_attacks.cpp).
std::vector<CaseInfo> layer_cases();
std::vector<CaseInfo> int8_cases();
std::vector<CaseInfo> attack_cases();
}  // namespace casebook_detail

}  // namespace driftlab
