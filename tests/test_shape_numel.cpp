// shape_numel (core/tensor.h) is the element count every reader and layer sizes its
// allocations by: a product of dimensions that wraps past 2^63-1 must be refused, not turned
// into a small (or negative) count that a later memcpy trusts.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/tensor.h"
#include "tests/scratch_util.h"

namespace driftlab {
namespace {

TEST(ShapeNumel, ProductsUpToInt64MaxAreExact) {
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({3, 0, int64_t{1} << 62}), 0);
  EXPECT_EQ(shape_numel({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  EXPECT_EQ(shape_numel({INT64_MAX}), INT64_MAX);
}

TEST(ShapeNumel, OverflowIsRefusedNamingTheShape) {
  // 2^32 * 2^32 = 2^64 wraps to 0 in 64 bits; 3 * 2^62 wraps to a negative count.
  EXPECT_TRUE(throws_error_with([] { shape_numel({int64_t{1} << 32, int64_t{1} << 32}); },
                                {"[4294967296,4294967296]", "2^63-1"}));
  EXPECT_TRUE(throws_error_with([] { shape_numel({3, int64_t{1} << 62}); }, {"[3,4611686018427387904]", "2^63-1"}));
  EXPECT_TRUE(throws_error_with([] { shape_numel({2, -1}); }, {"negative dimension", "[2,-1]"}));
}

}  // namespace
}  // namespace driftlab
