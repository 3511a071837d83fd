// The CUDA emulation's __dp4a (tests/emu/shim/kernels/cuda/common.cuh) against hand-computed
// values of the PTX dp4a instruction: byte i of a times byte i of b, signed or unsigned as the
// overload says, the four products added to c in 32 bits, wrapping. Part of the emulation binary
// only (ctest cuda_emulation); on a GPU the int8 kernels' tests compare the real instruction's
// results with the CPU reference (tests/cuda/test_quant_cuda.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "kernels/cuda/common.cuh"

namespace {

// Packs four bytes, byte 0 lowest (the order dp4a pairs them in).
unsigned pack(int b0, int b1, int b2, int b3) {
  return (static_cast<unsigned>(b0) & 0xFFu) | (static_cast<unsigned>(b1) & 0xFFu) << 8 |
         (static_cast<unsigned>(b2) & 0xFFu) << 16 | (static_cast<unsigned>(b3) & 0xFFu) << 24;
}

TEST(EmuDp4a, SignedHandComputed) {
  // (-128)(-128) + 127(-128) + (-1)(2) + 0(5) = 16384 - 16256 - 2 = 126
  EXPECT_EQ(__dp4a(static_cast<int>(pack(-128, 127, -1, 0)), static_cast<int>(pack(-128, -128, 2, 5)), 0), 126);
  EXPECT_EQ(__dp4a(static_cast<int>(pack(-128, 127, -1, 0)), static_cast<int>(pack(-128, -128, 2, 5)), -1000), -874);
  // the largest sum, 4 * 16384, and the accumulator wrapping past INT32_MAX to INT32_MIN + 65535
  const int m = static_cast<int>(pack(-128, -128, -128, -128));
  EXPECT_EQ(__dp4a(m, m, 0), 65536);
  EXPECT_EQ(__dp4a(m, m, INT32_MAX), INT32_MIN + 65535);
  // byte i pairs with byte i only
  EXPECT_EQ(__dp4a(static_cast<int>(pack(1, 0, 0, 0)), static_cast<int>(pack(0, 1, 1, 1)), 7), 7);
  EXPECT_EQ(__dp4a(static_cast<int>(pack(0, 0, 0, 3)), static_cast<int>(pack(0, 0, 0, -5)), 0), -15);
}

TEST(EmuDp4a, UnsignedHandComputed) {
  const unsigned f = pack(255, 255, 255, 255);
  EXPECT_EQ(__dp4a(f, f, 0u), 4u * 65025u);
  EXPECT_EQ(__dp4a(f, f, 0xFFFFFFFFu), 4u * 65025u - 1u);  // wraps
  EXPECT_EQ(__dp4a(pack(128, 1, 0, 2), pack(2, 200, 9, 3), 10u), 256u + 200u + 0u + 6u + 10u);
}

// Random words against the definition written out in int64 and reduced mod 2^32.
TEST(EmuDp4a, RandomWordsMatchTheDefinition) {
  std::mt19937 gen(5);
  for (int i = 0; i < 100000; ++i) {
    const unsigned a = gen(), b = gen(), c = gen();
    int64_t ss = static_cast<int32_t>(c), uu = c;
    for (int k = 0; k < 4; ++k) {
      const unsigned ab = (a >> (8 * k)) & 0xFFu, bb = (b >> (8 * k)) & 0xFFu;
      ss += static_cast<int64_t>(static_cast<int8_t>(ab)) * static_cast<int8_t>(bb);
      uu += static_cast<int64_t>(ab) * bb;
    }
    ASSERT_EQ(static_cast<uint32_t>(__dp4a(static_cast<int>(a), static_cast<int>(b), static_cast<int>(c))),
              static_cast<uint32_t>(ss));
    ASSERT_EQ(__dp4a(a, b, c), static_cast<uint32_t>(uu));
  }
}

}  // namespace
