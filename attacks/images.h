// Adversarial examples as 8-bit images (Abyane & Hemmati's mobile robustness study, docs/GLOSSARY.md,
// saved its adversarial examples as 8-bit PNG and judged the files): the uint8 round trip as a
// knob, and a PNG writer for the examples.
//
// to_8bit(x, rule): x holds images in [0, 1] (the input space, before the model's normalisation);
// each element becomes k / 255 (in x's dtype) with k = round_half_even(x * 255) (numpy's
// np.round, then astype(uint8)) or trunc(x * 255) (astype(uint8) alone, what
// PIL.Image.fromarray((x * 255).astype(np.uint8)) stores), x * 255 computed in x's dtype. An
// element outside [0, 1] or not finite is refused by index.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace driftlab {
namespace attacks {

enum class EightBit { off, round, truncate };
EightBit parse_eight_bit(const std::string& s);  // off | round | truncate
const char* eight_bit_name(EightBit r);

// The 8-bit codes k (N * per) of x in [0, 1]; throws naming the element otherwise.
std::vector<uint8_t> eight_bit_codes(const Tensor& x, EightBit rule);
// x with every element replaced by its code / 255 (rule != off).
Tensor to_8bit(const Tensor& x, EightBit rule);

// One PNG per sample of x (N, C, H, W) with C 1 (grey) or 3 (RGB), values in [0, 1] stored as
// round_half_even(x * 255): DIR/PREFIX<index>.png. Each file is written
// to a temporary name and renamed, so no half-written image is left behind.
void write_pngs(const std::string& dir, const std::string& prefix, const Tensor& x);
// A single image: 8-bit samples, H rows of W pixels of C interleaved channels.
void write_png(const std::string& path, const uint8_t* pixels, int64_t h, int64_t w, int channels);

}  // namespace attacks
}  // namespace driftlab
