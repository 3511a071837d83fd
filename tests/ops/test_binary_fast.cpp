// The fast binary kernel (a graph's add, sub, mul on operands of one shape) against the reference:
// bit for bit for each op and dtype, with NaN, infinities, signed zeros and subnormals among the
// operands, above and below the size where it splits over threads; a broadcast goes to the
// reference. Operands blocked alike (a graph's residual add between channel-blocked values) give the
// plain operands' result in that block; mixed layouts are refused by name. (The graph tests and
// oracles run it: act_backend=fast is every preset's.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/ops/binary.h"
#include "core/parallel.h"
#include "engine/layers/layout.h"
#include "kernels/cpu/registry.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// Random values with every 97th and 89th element replaced by a special value.
Tensor operand(int64_t n, DType dt, uint64_t seed) {
  Tensor t = random_tensor({n}, dt, seed, -3.0, 3.0);
  const double special[] = {std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, -0.0, 0.0, 1e-40, -1e-310};
  for (int64_t i = 0; i < n; i += seed % 2 ? 97 : 89) {
    const double v = special[(i / 7) % 7];
    if (dt == DType::f32)
      t.data<float>()[i] = static_cast<float>(v);
    else
      t.data<double>()[i] = v;
  }
  return t;
}

TEST(BinaryFast, SameBitsAsTheReference) {
  const KernelRegistry reg = make_cpu_registry();
  for (const BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul})
    for (const DType dt : {DType::f32, DType::f64})
      for (const int64_t n : {int64_t{1}, int64_t{1000}, 4 * kParallelMinElements + 3}) {
        const Tensor a = operand(n, dt, 1), b = operand(n, dt, 2);
        const BinaryParams p{op, a.shape(), b.shape()};
        const BinaryKernel& fast = reg.binary.select(KernelBackend::fast, p, dt);
        ASSERT_STREQ(fast.name, "fast");
        Tensor yf = Tensor::empty(a.shape(), dt), yr = Tensor::empty(a.shape(), dt);
        fast.forward(p, a, b, yf);
        reg.binary.reference().forward(p, a, b, yr);
        EXPECT_EQ(std::memcmp(yf.raw(), yr.raw(), yr.nbytes()), 0)
            << binary_op_name(op) << " " << dtype_name(dt) << " n=" << n;
      }
  // A broadcast is the reference's.
  const BinaryParams bp{BinaryOp::add, Shape{4, 3}, Shape{3}};
  EXPECT_STREQ(reg.binary.select(KernelBackend::fast, bp, DType::f32).name, "reference");
}

TEST(BinaryFast, BlockedOperandsGiveThePlainResultInTheirBlock) {
  const KernelRegistry reg = make_cpu_registry();
  const Shape s{3, 32, 5, 7};
  for (const BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul})
    for (const DType dt : {DType::f32, DType::f64})
      for (const int block : {8, 16}) {
        const Tensor a = operand(shape_numel(s), dt, 1).reshape(s), b = operand(shape_numel(s), dt, 2).reshape(s);
        const BinaryParams p{op, s, s};
        const BinaryKernel& fast = reg.binary.select(KernelBackend::fast, p, dt);
        ASSERT_TRUE(fast.any_block);
        Tensor yr = Tensor::empty(s, dt), yb = Tensor::empty(s, dt).with_block(block);
        reg.binary.reference().forward(p, a, b, yr);
        fast.forward(p, to_block(a, block), to_block(b, block), yb);
        const Tensor back = to_plain(yb);
        EXPECT_EQ(std::memcmp(back.raw(), yr.raw(), yr.nbytes()), 0) << binary_op_name(op) << " " << dtype_name(dt)
                                                                      << " block " << block;
      }
  const BinaryParams p{BinaryOp::add, s, s};
  const Tensor a = to_block(random_tensor(s, DType::f32, 1), 16), b = random_tensor(s, DType::f32, 2);
  Tensor y = Tensor::empty(s, DType::f32).with_block(16);
  EXPECT_NE(error_of([&] { reg.binary.at(KernelBackend::fast).forward(p, a, b, y); }).find("one layout for all three"),
            std::string::npos);
  EXPECT_FALSE(reg.binary.reference().any_block);  // the broadcasting loops index plain tensors
}

}  // namespace
}  // namespace driftlab
