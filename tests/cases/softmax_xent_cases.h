// Softmax cross-entropy's case tables: the (N, K) logit shapes, and the knob settings every
// shape runs under (each formulation x both reductions x every class-sum order), read by
// tests/ops/test_softmax_xent.cpp (the fast kernel against the reference, bit for bit) and
// tests/cuda/test_softmax_xent_cuda.cpp (the own CUDA kernel against the reference). Each test
// draws its own logits and labels. No benchmark reads them yet.
//
// To add a case: 1) append a shape row to kSoftmaxXentCases, named for what it exercises; a
// setting belongs in softmax_xent_settings(); 2) if a consumer cannot afford a shape, narrow
// `uses` with a comment why.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/ops/softmax_xent.h"
#include "tests/cases/case_uses.h"

namespace driftlab {

struct SoftmaxXentCase {
  const char* name;
  int64_t n, k;  // z (N, K), labels (N)
  unsigned uses = kAllUses;
};

inline constexpr SoftmaxXentCase kSoftmaxXentCases[] = {
    {"n7_k10", 7, 10},        // below the fast CPU kernel's parallel threshold
    {"n1000_k10", 1000, 10},  // above it
    {"n29_k10", 29, 10},
    {"n29_k1", 29, 1},  // one class: q_y = 1
    {"n29_k37", 29, 37},
};

// Every formulation x both reductions x every order of the sums.
inline std::vector<SoftmaxXentParams> softmax_xent_settings() {
  std::vector<SoftmaxXentParams> out;
  for (CeFormulation form : {CeFormulation::log_softmax, CeFormulation::softmax_clip, CeFormulation::softmax_log})
    for (bool mean : {true, false})
      for (SumOrder order : {SumOrder::ascending, SumOrder::descending, SumOrder::pairwise}) {
        SoftmaxXentParams p;
        p.form = form, p.mean = mean, p.sum_order = order;
        out.push_back(p);
      }
  return out;
}

// "form 1 mean 0 order 2": a setting in a failure message.
inline std::string softmax_xent_setting_str(const SoftmaxXentParams& p) {
  return "form " + std::to_string(static_cast<int>(p.form)) + " mean " + std::to_string(p.mean) + " order " +
         std::to_string(static_cast<int>(p.sum_order));
}

// The gtest-safe name of a row.
inline std::string softmax_xent_case_name(const SoftmaxXentCase& c) { return case_test_name(c.name); }

// gtest prints a parameter with PrintTo when it finds one (by argument lookup): the row's name.
inline void PrintTo(const SoftmaxXentCase& c, std::ostream* os) { *os << c.name; }

}  // namespace driftlab
