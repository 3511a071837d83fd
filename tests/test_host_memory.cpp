// host_memory (core/host_memory.h): tensor storage of >= 64 KiB is cached when freed and
// handed out again by size class. What must hold: the classes are as documented, a freed block is
// reused (the point of the cache), a reused block never leaks its old bytes into a zero-filled
// tensor, every block is 64-byte aligned, and the cache returns its memory on trim().
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "core/host_memory.h"
#include "core/tensor.h"

namespace driftlab {
namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

TEST(HostMemory, SizeClasses) {
  EXPECT_EQ(host_memory::size_class(64), 64u);                    // small: malloc, the request itself
  EXPECT_EQ(host_memory::size_class(64 * KiB - 64), 64 * KiB - 64);
  EXPECT_EQ(host_memory::size_class(64 * KiB), 64 * KiB);         // 64 KiB steps up to 2 MiB
  EXPECT_EQ(host_memory::size_class(64 * KiB + 64), 128 * KiB);
  EXPECT_EQ(host_memory::size_class(2 * MiB - 64), 2 * MiB);
  EXPECT_EQ(host_memory::size_class(2 * MiB), 2 * MiB);           // 2 MiB steps (huge pages) above
  EXPECT_EQ(host_memory::size_class(2 * MiB + 64), 4 * MiB);
  EXPECT_EQ(host_memory::size_class(8 * MiB + 4096), 10 * MiB);
}

// The high-water mark: each block counts at its size class (a small one at its 64-byte rounding)
// while it is out, the peak keeps the most out at once, and a cached block handed out again counts
// again. Other threads of this test binary allocate nothing meanwhile (one test at a time).
TEST(HostMemory, InUseAndPeakFollowTheBlocksHandedOut) {
  host_memory::trim();  // no cached block to lend: each request counts at its own class
  host_memory::reset_peak();
  const host_memory::Stats s0 = host_memory::stats();
  EXPECT_EQ(s0.peak_bytes, s0.in_use_bytes);
  // 3 MiB counts at its class, 4 MiB, where the cache is on; at its 64-byte rounding in a
  // sanitizer build (malloc/free)
  const std::size_t big = s0.caching ? 4 * MiB : 3 * MiB;
  void* a = host_memory::allocate(3 * MiB);
  void* b = host_memory::allocate(100);  // small: 128 bytes
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const host_memory::Stats s1 = host_memory::stats();
  EXPECT_EQ(s1.in_use_bytes, s0.in_use_bytes + big + 128);
  EXPECT_EQ(s1.peak_bytes, s1.in_use_bytes);
  host_memory::release(a, 3 * MiB);
  const host_memory::Stats s2 = host_memory::stats();
  EXPECT_EQ(s2.in_use_bytes, s0.in_use_bytes + 128);
  EXPECT_EQ(s2.peak_bytes, s1.peak_bytes) << "the peak stays when a block comes back";
  void* c = host_memory::allocate(3 * MiB + 64);  // the same class (from the cache where it is on)
  EXPECT_EQ(host_memory::stats().in_use_bytes, s0.in_use_bytes + (s0.caching ? 4 * MiB : 3 * MiB + 64) + 128);
  host_memory::release(c, 3 * MiB + 64);
  host_memory::release(b, 100);
  EXPECT_EQ(host_memory::stats().in_use_bytes, s0.in_use_bytes);
  host_memory::reset_peak();
  EXPECT_EQ(host_memory::stats().peak_bytes, s0.in_use_bytes);
}

TEST(HostMemory, BlocksAreAlignedAndUsable) {
  for (std::size_t bytes : {std::size_t{64}, 1000 * std::size_t{64}, 64 * KiB, 300 * KiB, 2 * MiB, 5 * MiB + 64}) {
    void* p = host_memory::allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (bytes >= 2 * MiB) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (2 * MiB), 0u) << bytes;  // huge-page aligned
    std::memset(p, 0xab, bytes);  // every byte writable
    host_memory::release(p, bytes);
  }
}

TEST(HostMemory, AFreedBlockIsReusedForItsSizeClass) {
  const host_memory::Stats s0 = host_memory::stats();
  if (!s0.caching) GTEST_SKIP() << "sanitizer build: the cache is off (malloc/free)";
  const std::size_t bytes = 3 * MiB + 128;  // class 4 MiB
  void* a = host_memory::allocate(bytes);  // from the cache or new: earlier tests may have left one
  ASSERT_NE(a, nullptr);
  const uint64_t hits = host_memory::stats().hits;
  host_memory::release(a, bytes);
  EXPECT_GE(host_memory::stats().cached_bytes, 4 * MiB);
  // Another request of the same class gets that block back; a hit, no new memory.
  void* b = host_memory::allocate(4 * MiB - 64);
  EXPECT_EQ(b, a);
  EXPECT_EQ(host_memory::stats().hits, hits + 1);
  host_memory::release(b, 4 * MiB - 64);
  // trim() gives every cached block back.
  host_memory::trim();
  EXPECT_EQ(host_memory::stats().cached_bytes, 0u);
}

TEST(HostMemory, TrimAboveKeepsASmallCacheAndGivesBackALargeOne) {
  if (!host_memory::stats().caching) GTEST_SKIP() << "sanitizer build: the cache is off (malloc/free)";
  host_memory::trim();
  const std::size_t bytes = 4 * MiB;
  void* a = host_memory::allocate(bytes);
  ASSERT_NE(a, nullptr);
  host_memory::release(a, bytes);
  ASSERT_EQ(host_memory::stats().cached_bytes, bytes);
  host_memory::trim_above(bytes);  // holds exactly `keep`: kept
  EXPECT_EQ(host_memory::stats().cached_bytes, bytes);
  host_memory::trim_above(bytes - 1);  // more than `keep`: all given back
  EXPECT_EQ(host_memory::stats().cached_bytes, 0u);
}

TEST(HostMemory, ARequestWithoutItsClassBorrowsACachedBlockOfAtMostTwiceIt) {
  if (!host_memory::stats().caching) GTEST_SKIP() << "sanitizer build: the cache is off (malloc/free)";
  host_memory::trim();
  void* big = host_memory::allocate(10 * MiB);  // class 10 MiB: more than twice 4 MiB
  void* mid = host_memory::allocate(6 * MiB);   // class 6 MiB: at most twice 4 MiB
  ASSERT_NE(big, nullptr);
  ASSERT_NE(mid, nullptr);
  host_memory::release(big, 10 * MiB);
  host_memory::release(mid, 6 * MiB);
  const host_memory::Stats s0 = host_memory::stats();
  ASSERT_EQ(s0.cached_bytes, 16 * MiB);
  // A 4 MiB request: no 4 MiB block cached, so the 6 MiB one is lent (not the 10 MiB one, nor new
  // memory), and it counts in use at its own 6 MiB.
  void* a = host_memory::allocate(4 * MiB);
  EXPECT_EQ(a, mid);
  const host_memory::Stats s1 = host_memory::stats();
  EXPECT_EQ(s1.lends, s0.lends + 1);
  EXPECT_EQ(s1.misses, s0.misses);
  EXPECT_EQ(s1.cached_bytes, 10 * MiB);
  EXPECT_EQ(s1.in_use_bytes, s0.in_use_bytes + 6 * MiB);
  std::memset(a, 0x5a, 6 * MiB);  // the whole block is the borrower's
  // Released as the 4 MiB it was asked for, it goes back to its own 6 MiB class: a 6 MiB request
  // is then a hit on it.
  host_memory::release(a, 4 * MiB);
  EXPECT_EQ(host_memory::stats().in_use_bytes, s0.in_use_bytes);
  EXPECT_EQ(host_memory::stats().cached_bytes, 16 * MiB);
  const uint64_t hits = host_memory::stats().hits;
  void* b = host_memory::allocate(6 * MiB);
  EXPECT_EQ(b, mid);
  EXPECT_EQ(host_memory::stats().hits, hits + 1);
  host_memory::release(b, 6 * MiB);
  // A 2 MiB request finds nothing of at most 4 MiB: new memory.
  const uint64_t misses = host_memory::stats().misses;
  void* c = host_memory::allocate(2 * MiB);
  EXPECT_NE(c, mid);
  EXPECT_NE(c, big);
  EXPECT_EQ(host_memory::stats().misses, misses + 1);
  host_memory::release(c, 2 * MiB);
  host_memory::trim();
}

TEST(HostMemory, ZeroFilledTensorsStayZeroOnReusedBlocks) {
  // A training step frees and reallocates the same shapes: the zero-filled constructor must clear a
  // reused block that its last user left dirty, and empty() must still give the right size.
  const Shape shape = {128, 16, 32, 32};  // 8 MiB: a ResNet-20 stage-1 activation at batch 128
  std::set<const void*> seen;
  for (int round = 0; round < 3; ++round) {
    {
      Tensor dirty = Tensor::empty(shape, DType::f32);
      seen.insert(dirty.raw());
      float* d = dirty.data<float>();
      for (int64_t i = 0; i < dirty.numel(); ++i) d[i] = 1.0f + static_cast<float>(i % 7);
    }
    Tensor z(shape, DType::f32);
    seen.insert(z.raw());
    const float* d = z.data<float>();
    int64_t nonzero = 0;
    for (int64_t i = 0; i < z.numel(); ++i) nonzero += d[i] != 0.0f;
    EXPECT_EQ(nonzero, 0) << "round " << round;
  }
  // With the cache on, the six tensors shared blocks (each freed before the next was made).
  if (host_memory::stats().caching) EXPECT_LT(seen.size(), 6u);
}

}  // namespace
}  // namespace driftlab
