// RAII cuDNN descriptors and small helpers for kernels/cuda/cudnn/*.cpp.
#pragma once
#include <cudnn.h>

#include "core/tensor.h"
#include "kernels/cuda/check.h"

namespace driftlab {
namespace cuda {

inline cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::i8:
    case DType::u8:
    case DType::i32:
    case DType::i64: break;
  }
  fail_dtype("cudnn_type", t);
}

// alpha/beta scalars: cuDNN reads them as float for float data and double for double data.
struct CudnnScalars {
  float f[2];
  double d[2];
  DType t;
  CudnnScalars(DType dt, double alpha, double beta) : t(dt) {
    f[0] = static_cast<float>(alpha), f[1] = static_cast<float>(beta);
    d[0] = alpha, d[1] = beta;
  }
  const void* alpha() const { return t == DType::f32 ? static_cast<const void*>(&f[0]) : &d[0]; }
  const void* beta() const { return t == DType::f32 ? static_cast<const void*>(&f[1]) : &d[1]; }
};

// One cuDNN descriptor, created on construction and destroyed with its owner. As a member it
// is constructed before the owner's constructor body sets it, so a Set call that throws still
// destroys it.
template <typename Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { DL_CUDNN_CHECK(Create(&d_)); }
  ~CudnnDescriptor() { Destroy(d_); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  Handle get() const { return d_; }

 private:
  Handle d_ = nullptr;
};
using TensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;

class TensorDesc {
 public:
  TensorDesc(DType t, long long n, long long c, long long h, long long w) {
    check(n <= 2147483647 && c <= 2147483647 && h <= 2147483647 && w <= 2147483647,
          "cudnn: tensor dimension above int range");
    // cuDNN's 4-D descriptors take int strides: a tensor of 2^31 elements or more is refused with
    // CUDNN_STATUS_NOT_SUPPORTED (seen on an H200 with 200,000 VGG-16 inputs in one batch, whose
    // first conv output has 13.1e9 elements and would fit the card's memory). Say so plainly.
    const long long numel = n * c * h * w;
    check(numel <= 2147483647LL, "cudnn: a tensor of ", numel, " elements (", n, "x", c, "x", h, "x", w,
          ") is above cuDNN's limit of 2^31-1 elements per tensor; split the batch (--max-batch)");
    DL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_.get(), CUDNN_TENSOR_NCHW, cudnn_type(t), static_cast<int>(n),
                                              static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
  }
  cudnnTensorDescriptor_t get() const { return d_.get(); }

 private:
  TensorDescriptor d_;
};

}  // namespace cuda
}  // namespace driftlab
