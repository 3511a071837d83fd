// Own CUDA kernels the device layers need besides the ops: in-place add, elementwise product,
// row bias and column sums (dense), spatial mean (global average pooling), NCHW <-> NHWC
// permutation (channels-last flatten), the strided zero-channel shortcut, a sum of squares
// (the l2 penalty) and a non-finite flag. float and double; every sum runs in a fixed order
// and no kernel uses atomics, so each gives the same bits on every run. Built with
// -fmad=false like the other elementwise files: spatial means and the mask product round as
// the CPU layers do. Outputs: '=' unless the name says add (+=).
#include <algorithm>
#include <cstring>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

void check_numel(const char* op, const DeviceTensor& a, const DeviceTensor& b) {
  check(a.numel() == b.numel() && a.dtype() == b.dtype(), op, ": ", shape_str(a.shape()), " ", dtype_name(a.dtype()),
        " vs ", shape_str(b.shape()), " ", dtype_name(b.dtype()));
}

template <typename T>
__global__ void add_inplace_kernel(long long n, T* __restrict__ y, const T* __restrict__ x) {
  DL_GRID_STRIDE(i, n) { y[i] += x[i]; }
}

template <typename T>
__global__ void multiply_kernel(long long n, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y) {
  DL_GRID_STRIDE(i, n) { y[i] = a[i] * b[i]; }
}

template <typename T>
__global__ void add_row_bias_kernel(long long rows, long long cols, T* __restrict__ y, const T* __restrict__ b) {
  DL_GRID_STRIDE(i, rows * cols) { y[i] += b[i % cols]; }
}

// One thread per column; rows in ascending order (neighbouring threads read neighbouring words).
template <typename T>
__global__ void add_column_sums_kernel(long long rows, long long cols, const T* __restrict__ dy, T* __restrict__ db) {
  DL_GRID_STRIDE(j, cols) {
    T acc = T(0);
    for (long long i = 0; i < rows; ++i) acc += dy[i * cols + j];
    db[j] += acc;
  }
}

// One thread per (n,c) map: ascending sum, then the division (the CPU layer's order).
template <typename T>
__global__ void spatial_mean_forward_kernel(long long maps, long long s, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, maps) {
    T acc = T(0);
    for (long long k = 0; k < s; ++k) acc += x[i * s + k];
    y[i] = acc / static_cast<T>(s);
  }
}

template <typename T>
__global__ void spatial_mean_backward_kernel(long long maps, long long s, const T* __restrict__ dy, T* __restrict__ dx) {
  DL_GRID_STRIDE(i, maps * s) { dx[i] = dy[i / s] / static_cast<T>(s); }
}

// i runs over the NCHW index; to_last: y[nhwc] = x[nchw], else y[nchw] = x[nhwc].
template <typename T>
__global__ void permute_channels_kernel(long long total, long long c, long long hw, bool to_last,
                                        const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, total) {
    const long long b = i / (c * hw), ci = (i / hw) % c, k = i % hw;
    const long long last = (b * hw + k) * c + ci;
    if (to_last)
      y[last] = x[i];
    else
      y[i] = x[last];
  }
}

struct PadDev {
  long long n, c, h, w, oc, oh, ow, stride, pad_before;
};

// i runs over the carried elements (n, ci, oi, oj) of the input's channels.
template <typename T>
__global__ void channel_pad_subsample_kernel(PadDev p, bool backward, const T* __restrict__ src, T* __restrict__ dst) {
  DL_GRID_STRIDE(i, p.n * p.c * p.oh * p.ow) {
    const long long oj = i % p.ow, oi = (i / p.ow) % p.oh, ci = (i / (p.ow * p.oh)) % p.c, b = i / (p.ow * p.oh * p.c);
    const long long out = ((b * p.oc + ci + p.pad_before) * p.oh + oi) * p.ow + oj;
    const long long in = ((b * p.c + ci) * p.h + oi * p.stride) * p.w + oj * p.stride;
    if (backward)
      dst[in] += src[out];
    else
      dst[out] += src[in];
  }
}

constexpr int kReduceThreads = 256;

// One block: each thread a strided ascending sum in double, then a fixed halving tree.
template <typename T>
__global__ void sum_squares_kernel(long long n, const T* __restrict__ x, double* __restrict__ out) {
  __shared__ double part[kReduceThreads];
  double acc = 0;
  for (long long i = threadIdx.x; i < n; i += kReduceThreads) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int h = kReduceThreads / 2; h > 0; h /= 2) {
    if (static_cast<int>(threadIdx.x) < h) part[threadIdx.x] += part[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = part[0];
}

// Every thread that sees a non-finite value stores the same 1.0f: the outcome does not depend
// on which store lands last.
template <typename T>
__global__ void flag_nonfinite_kernel(long long n, const T* __restrict__ x, float* __restrict__ flag) {
  DL_GRID_STRIDE(i, n) {
    if (!isfinite(x[i])) *flag = 1.0f;
  }
}

// The same over many tensors in one launch: block row blockIdx.y reads tensor blockIdx.y of the
// table and flags slot blockIdx.y.
struct TableEntry {
  const void* ptr;
  long long n;
};

template <typename T>
__global__ void flag_nonfinite_many_kernel(const TableEntry* __restrict__ table, float* __restrict__ flags) {
  const TableEntry e = table[blockIdx.y];
  const T* x = static_cast<const T*>(e.ptr);
  DL_GRID_STRIDE(i, e.n) {
    if (!isfinite(x[i])) flags[blockIdx.y] = 1.0f;
  }
}

}  // namespace

void TensorTable::bind(CudaContext& ctx, const std::vector<const DeviceTensor*>& tensors) {
  std::vector<TableEntry> entries;
  entries.reserve(tensors.size());
  for (const DeviceTensor* t : tensors) {
    check(t->dtype() == tensors.front()->dtype(), "TensorTable: mixed dtypes (", dtype_name(t->dtype()), " and ",
          dtype_name(tensors.front()->dtype()), ")");
    entries.push_back({t->raw(), static_cast<long long>(t->numel())});
  }
  dtype_ = tensors.empty() ? DType::f32 : tensors.front()->dtype();
  max_numel_ = 0;
  for (const TableEntry& e : entries) max_numel_ = std::max<int64_t>(max_numel_, e.n);
  const std::size_t bytes = entries.size() * sizeof(TableEntry);
  if (size_ == static_cast<int64_t>(entries.size()) && host_.size() == bytes &&
      std::memcmp(host_.data(), entries.data(), bytes) == 0)
    return;  // the same tensors as last time: the device copy stands
  host_.assign(reinterpret_cast<const char*>(entries.data()), reinterpret_cast<const char*>(entries.data()) + bytes);
  size_ = static_cast<int64_t>(entries.size());
  table_ = bytes_to_device(ctx, entries.data(), bytes);
}

void flag_nonfinite_many_cuda(CudaContext& ctx, const TensorTable& table, DeviceTensor& flags) {
  check(flags.dtype() == DType::f32 && flags.numel() >= table.size(), "flag_nonfinite_many_cuda: ", table.size(),
        " tensors for a ", dtype_name(flags.dtype()), " flags tensor of ", flags.numel());
  if (table.size() == 0 || table.max_numel() == 0) return;
  check(table.size() <= 65535, "flag_nonfinite_many_cuda: ", table.size(), " tensors (at most 65535 per launch)");
  dispatch_dtype(table.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(dl_blocks(table.max_numel(), 256), 64)),
                    static_cast<unsigned>(table.size()));
    flag_nonfinite_many_kernel<T><<<grid, 256, 0, stream_of(ctx)>>>(static_cast<const TableEntry*>(table.device()),
                                                                    flags.data<float>());
    DL_CUDA_LAUNCH_CHECK("flag_nonfinite_many_kernel");
  });
}

void add_inplace_cuda(CudaContext& ctx, DeviceTensor& y, const DeviceTensor& x) {
  check_numel("add_inplace_cuda", y, x);
  check(y.dtype() == x.dtype(), "add_inplace_cuda: y is ", dtype_name(y.dtype()), ", x is ", dtype_name(x.dtype()));
  add_block_cuda(ctx, y.dtype(), x.raw(), y.raw(), y.numel());
}

void add_block_cuda(CudaContext& ctx, DType dtype, const void* src, void* dst, int64_t count) {
  if (count == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    add_inplace_kernel<T><<<dl_blocks(count, 256), 256, 0, stream_of(ctx)>>>(count, static_cast<T*>(dst),
                                                                            static_cast<const T*>(src));
    DL_CUDA_LAUNCH_CHECK("add_inplace_kernel");
  });
}

void multiply_cuda(CudaContext& ctx, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& y) {
  check_numel("multiply_cuda", a, b);
  check_numel("multiply_cuda", a, y);
  if (a.numel() == 0) return;
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    multiply_kernel<T><<<dl_blocks(a.numel(), 256), 256, 0, stream_of(ctx)>>>(a.numel(), a.data<T>(), b.data<T>(),
                                                                            y.data<T>());
    DL_CUDA_LAUNCH_CHECK("multiply_kernel");
  });
}

void add_row_bias_cuda(CudaContext& ctx, DeviceTensor& y, const DeviceTensor& b) {
  check(y.rank() == 2 && b.numel() == y.dim(1) && b.dtype() == y.dtype(), "add_row_bias_cuda: y ",
        shape_str(y.shape()), ", b ", shape_str(b.shape()));
  if (y.numel() == 0) return;
  dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    add_row_bias_kernel<T><<<dl_blocks(y.numel(), 256), 256, 0, stream_of(ctx)>>>(y.dim(0), y.dim(1), y.data<T>(),
                                                                                 b.data<T>());
    DL_CUDA_LAUNCH_CHECK("add_row_bias_kernel");
  });
}

void add_column_sums_cuda(CudaContext& ctx, const DeviceTensor& dy, DeviceTensor& db) {
  check(dy.rank() == 2 && db.numel() == dy.dim(1) && db.dtype() == dy.dtype(), "add_column_sums_cuda: dy ",
        shape_str(dy.shape()), ", db ", shape_str(db.shape()));
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    add_column_sums_raw<T>(ctx, dy.dim(0), dy.dim(1), dy.data<T>(), db.data<T>());
  });
}

template <typename T>
void add_column_sums_raw(CudaContext& ctx, int64_t rows, int64_t cols, const T* dy, T* db) {
  if (cols == 0) return;
  add_column_sums_kernel<T><<<dl_blocks(cols, 128), 128, 0, stream_of(ctx)>>>(rows, cols, dy, db);
  DL_CUDA_LAUNCH_CHECK("add_column_sums_kernel");
}
template void add_column_sums_raw<float>(CudaContext&, int64_t, int64_t, const float*, float*);
template void add_column_sums_raw<double>(CudaContext&, int64_t, int64_t, const double*, double*);

void spatial_mean_forward_cuda(CudaContext& ctx, const DeviceTensor& x, DeviceTensor& y) {
  check(x.rank() == 4, "spatial_mean_forward_cuda: x must be (N,C,H,W), got ", shape_str(x.shape()));
  check_device_shape("spatial_mean_forward_cuda", "y", y, {x.dim(0), x.dim(1)});
  check(x.dtype() == y.dtype(), "spatial_mean_forward_cuda: x and y dtypes differ");
  const long long maps = x.dim(0) * x.dim(1), s = x.dim(2) * x.dim(3);
  if (maps == 0) return;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    spatial_mean_forward_kernel<T><<<dl_blocks(maps, 128), 128, 0, stream_of(ctx)>>>(maps, s, x.data<T>(),
                                                                                   y.data<T>());
    DL_CUDA_LAUNCH_CHECK("spatial_mean_forward_kernel");
  });
}

void spatial_mean_backward_cuda(CudaContext& ctx, const DeviceTensor& dy, DeviceTensor& dx) {
  check(dx.rank() == 4, "spatial_mean_backward_cuda: dx must be (N,C,H,W), got ", shape_str(dx.shape()));
  check_device_shape("spatial_mean_backward_cuda", "dy", dy, {dx.dim(0), dx.dim(1)});
  check(dx.dtype() == dy.dtype(), "spatial_mean_backward_cuda: dy and dx dtypes differ");
  const long long maps = dx.dim(0) * dx.dim(1), s = dx.dim(2) * dx.dim(3);
  if (maps * s == 0) return;
  dispatch_dtype(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    spatial_mean_backward_kernel<T><<<dl_blocks(maps * s, 256), 256, 0, stream_of(ctx)>>>(maps, s, dy.data<T>(),
                                                                                        dx.data<T>());
    DL_CUDA_LAUNCH_CHECK("spatial_mean_backward_kernel");
  });
}

void permute_channels_cuda(CudaContext& ctx, const DeviceTensor& x, DeviceTensor& y, int64_t c, int64_t h,
                           int64_t w, bool to_channels_last) {
  check_numel("permute_channels_cuda", x, y);
  check(c > 0 && h > 0 && w > 0 && x.numel() % (c * h * w) == 0, "permute_channels_cuda: ", x.numel(),
        " elements are not a whole number of (", c, ",", h, ",", w, ") samples");
  if (x.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    permute_channels_kernel<T><<<dl_blocks(x.numel(), 256), 256, 0, stream_of(ctx)>>>(
        x.numel(), c, h * w, to_channels_last, x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("permute_channels_kernel");
  });
}

namespace {
PadDev pad_dev(const ChannelPadSubsampleParams& p) {
  check(p.stride >= 1 && p.pad_before >= 0 && p.c + p.pad_before <= p.oc && (p.oh - 1) * p.stride < p.h &&
            (p.ow - 1) * p.stride < p.w,
        "channel_pad_subsample: input (", p.c, ",", p.h, ",", p.w, ") does not fit output (", p.oc, ",", p.oh, ",",
        p.ow, ") with stride ", p.stride, " and ", p.pad_before, " channels before");
  return {p.n, p.c, p.h, p.w, p.oc, p.oh, p.ow, p.stride, p.pad_before};
}
}  // namespace

void channel_pad_subsample_add_cuda(CudaContext& ctx, const ChannelPadSubsampleParams& p, const DeviceTensor& x,
                                    DeviceTensor& y) {
  const PadDev d = pad_dev(p);
  check_device_shape("channel_pad_subsample_add_cuda", "x", x, {p.n, p.c, p.h, p.w});
  check_device_shape("channel_pad_subsample_add_cuda", "y", y, {p.n, p.oc, p.oh, p.ow});
  if (p.n * p.c * p.oh * p.ow == 0) return;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    channel_pad_subsample_kernel<T><<<dl_blocks(p.n * p.c * p.oh * p.ow, 256), 256, 0, stream_of(ctx)>>>(
        d, false, x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("channel_pad_subsample_kernel");
  });
}

void channel_pad_subsample_add_backward_cuda(CudaContext& ctx, const ChannelPadSubsampleParams& p,
                                             const DeviceTensor& dy, DeviceTensor& dx) {
  const PadDev d = pad_dev(p);
  check_device_shape("channel_pad_subsample_add_backward_cuda", "dy", dy, {p.n, p.oc, p.oh, p.ow});
  check_device_shape("channel_pad_subsample_add_backward_cuda", "dx", dx, {p.n, p.c, p.h, p.w});
  if (p.n * p.c * p.oh * p.ow == 0) return;
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    channel_pad_subsample_kernel<T><<<dl_blocks(p.n * p.c * p.oh * p.ow, 256), 256, 0, stream_of(ctx)>>>(
        d, true, dy.data<T>(), dx.data<T>());
    DL_CUDA_LAUNCH_CHECK("channel_pad_subsample_kernel");
  });
}

double sum_squares_cuda(CudaContext& ctx, const DeviceTensor& t) {
  if (t.numel() == 0) return 0.0;
  DeviceTensor out(ctx, {1}, DType::f64);
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    sum_squares_kernel<T><<<1, kReduceThreads, 0, stream_of(ctx)>>>(t.numel(), t.data<T>(), out.data<double>());
    DL_CUDA_LAUNCH_CHECK("sum_squares_kernel");
  });
  return to_host(ctx, out).at(0);
}

void flag_nonfinite_cuda(CudaContext& ctx, const DeviceTensor& t, DeviceTensor& flags, int64_t slot) {
  check(flags.dtype() == DType::f32 && slot >= 0 && slot < flags.numel(), "flag_nonfinite_cuda: slot ", slot,
        " of a ", dtype_name(flags.dtype()), " flags tensor of ", flags.numel());
  if (t.numel() == 0) return;
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    flag_nonfinite_kernel<T><<<dl_blocks(t.numel(), 256), 256, 0, stream_of(ctx)>>>(t.numel(), t.data<T>(),
                                                                                  flags.data<float>() + slot);
    DL_CUDA_LAUNCH_CHECK("flag_nonfinite_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
