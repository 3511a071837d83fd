// Foolbox 2's single-pixel attack (foolbox/attacks/localsearch.py SinglePixelAttack, v2.4.0;
// docs/ROBUSTNESS.md, "What exists"): the pixels of an image (every channel of one
// spatial position) are tried in a random order, at most max_pixels of them; each is set to the
// input range's minimum, then to its maximum, and the first setting that the model misclassifies
// is the result. Decision-based: only the model's predictions are read (Runner::logits).
//
// Order: a permutation of the h*w positions drawn by Fisher-Yates from Rng(mt19937_u24, seed
// mixed with the sample's index): each sample's order is its own, whatever the samples before it. Foolbox 2 draws its permutation from
// numpy's unseeded RandomState, so no seed reproduces its order; the count of queries and the
// success rate are what compare. `transposed_index` reproduces Foolbox 2's indexing, which reads
// the flat position p as (row p % w, column p / w) (its x = p % w indexes the first spatial axis),
// a transposition on square images and a different set of positions on non-square ones.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "engine/train/runner.h"

namespace driftlab {
namespace attacks {

struct SinglePixelSpec {
  int64_t max_pixels = 1000;  // Foolbox 2's default; Guo et al. ran 100 (docs/GLOSSARY.md)
  double lo = 0.0, hi = 1.0;  // the values tried, minimum first
  bool transposed_index = false;
  uint64_t seed = 1;
  void validate() const;
};

struct SinglePixelResult {
  Tensor x_adv;                       // the input where the attack failed
  std::vector<int32_t> clean_pred, adv_pred;
  std::vector<uint8_t> success;       // adv_pred != label (a misclassified input: success with no pixel changed)
  std::vector<int64_t> row, col;      // the pixel changed (-1 where none)
  std::vector<int64_t> queries;       // model predictions spent on the sample (the clean one included)
};

// x (N, C, H, W) in [lo, hi] (checked); labels N. One query per candidate, batched per sample.
SinglePixelResult run_single_pixel(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                                   const SinglePixelSpec& spec);

}  // namespace attacks
}  // namespace driftlab
