// The fast conv_block kernel's tile switch (kernels/cpu/fast/conv_block_fast.cpp), for tests: on AVX-512 builds
// the kernel may choose 16-float tiles, which give the same bits as the 8-float ones (each output's
// taps added in the same order); tests turn them off to check exactly that.
#pragma once

namespace driftlab {

// Whether this build has the wide tiles (AVX-512F and DQ).
bool conv_block_fast_has_wide_tiles();
// Let the tile choice take them (the default) or not. Not thread-safe: tests only.
void conv_block_fast_allow_wide_tiles(bool on);

}  // namespace driftlab
