// Whether an input's logits depend on how many inputs it is predicted with. Every driftlab kernel
// but the matrix products of dense layers computes each image's outputs in an order that does not
// depend on the batch (the convolutions, oneDNN's included, BatchNorm, pooling, the residual ops,
// whatever the threads split), so under gemm_backend=reference an input's logits are the same
// bits in a batch of 1, 5, 17 or 64. The fast GEMMs are not batch-invariant: oneDNN's sgemm
// blocks its sums by the number of rows, Eigen's at some sizes (measured once, Zen 4, VGG-16
// predicting 1,000 random CIFAR-shaped inputs against their first 64: 481 of 640 logits differ
// under oneDNN's GEMM, up to 2.2e-7 of the largest, no class changed; 0 under the reference;
// docs/BENCHMARKS.md "Predicting in pieces, and an input's logits and the batch it is predicted
// in"). Those counts are printed
// here, not asserted: they depend on the CPU's sgemm kernels.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>

#include "engine/layers/layer.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Tensor first_rows(const Tensor& x, int64_t n) {
  Shape s = x.shape();
  s[0] = n;
  Tensor r(s, x.dtype());
  std::memcpy(r.raw(), x.raw(), r.nbytes());  // rows of a row-major tensor
  return r;
}

Tensor logits_of(Model& m, const Tensor& x) {
  ExecContext exec;
  exec.threads = 2;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

TEST(BatchInvariance, AnInputsLogitsDoNotDependOnItsBatchUnderTheReferenceGemm) {
  for (const std::string arch : {"lenet5", "resnet20"}) {
    const bool cifar = arch == "resnet20";
    const Tensor x = random_tensor(cifar ? Shape{64, 3, 32, 32} : Shape{64, 1, 28, 28}, DType::f32, 7, 0.0, 1.0);
    for (const std::string gemm : {"reference", "onednn"}) {
      Model m = build_model(arch, Policy::parse("torch,gemm_backend=" + gemm), 3);
      const Tensor all = logits_of(m, x);
      const int64_t k = all.dim(1);
      for (const int64_t n : {1, 5, 17}) {
        const Tensor part = logits_of(m, first_rows(x, n));
        int64_t differ = 0;
        for (int64_t j = 0; j < n * k; ++j) differ += part.data<float>()[j] != all.data<float>()[j];
        if (gemm == "reference")
          EXPECT_EQ(differ, 0) << arch << ": " << differ << " of " << n * k << " logits of the first " << n
                               << " inputs differ between a batch of " << n << " and one of 64";
        std::cout << arch << ", gemm_backend=" << gemm << ": batch " << n << " against 64: " << differ << " of "
                  << n * k << " logits differ\n";
      }
    }
  }
}

}  // namespace
}  // namespace driftlab
