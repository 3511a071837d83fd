// cuDNN's RNN for the LSTM/GRU layers: cudnnRNNForward, cudnnRNNBackwardData_v8 and
// cudnnRNNBackwardWeights_v8 (cuDNN 9's RNN API), one layer, one direction, zero initial state.
// Set up as PyTorch's aten/src/ATen/native/cudnn/RNN.cpp does for an unpacked batch: the input
// transposed to sequence-major (CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, every sequence the
// full length, padded I/O enabled, no device copy of the sequence lengths: PyTorch passes none),
// a no-dropout descriptor, the algorithm of the cudnn_rnn_algo knob (rnn_persist_small_h:
// PyTorch's get_algo, below; else CUDNN_RNN_ALGO_STANDARD, TensorFlow's default), and the
// math type of aten/src/ATen/cudnn/Descriptors.h (RNNDescriptor::set): for float32
// CUDNN_FMA_MATH unless TF32 is allowed for cuDNN (tf32_conv, PyTorch's cudnn.allow_tf32, which
// governs both cuDNN convolutions and RNNs), then CUDNN_DEFAULT_MATH; float64 CUDNN_DEFAULT_MATH.
//
// Weights: cuDNN keeps them in its own weight space; each call copies the canonical tensors in.
// Linear layer ids 0..G-1 are the input matrices of the gates in PyTorch's order (LSTM i,f,g,o;
// GRU r,z,n), G..2G-1 the recurrent ones, each (H, in) row-major: PyTorch's weight_ih_l0 is the
// concatenation of ids 0..G-1 (get_parameters in RNN.cpp), which is driftlab's canonical layout.
// Every matrix and bias size cuDNN reports is checked against that before a copy.
// Biases: two (CUDNN_RNN_DOUBLE_BIAS) or one on the input side (CUDNN_RNN_SINGLE_INP_BIAS, which
// is Keras's one bias: a = x W + h U + b; for the reset-after GRU it leaves the recurrent n
// block without bias, as the one-bias layer has none there).
// Gradients: the weight gradient goes to a zeroed weight space (CUDNN_WGRAD_MODE_ADD) and is
// then added block by block into the caller's gradients (+=); dx is written (=).
#include <cudnn.h>

#include <vector>

#include "kernels/cuda/cudnn/cudnn_util.h"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

class DropoutDesc {
 public:
  explicit DropoutDesc(cudnnHandle_t h) {
    // dropout 0: no random states are needed (PyTorch's set_no_dropout)
    DL_CUDNN_CHECK(cudnnSetDropoutDescriptor(d_.get(), h, 0.0f, nullptr, 0, 0));
  }
  cudnnDropoutDescriptor_t get() const { return d_.get(); }

 private:
  CudnnDescriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor> d_;
};

using RnnDesc = CudnnDescriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;

class RnnDataDesc {
 public:
  RnnDataDesc(DType dt, int steps, int batch, int vec) {
    std::vector<int> lengths(static_cast<std::size_t>(batch), steps);
    DL_CUDNN_CHECK(cudnnSetRNNDataDescriptor(d_.get(), cudnn_type(dt), CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                             steps, batch, vec, lengths.data(), nullptr));
  }
  cudnnRNNDataDescriptor_t get() const { return d_.get(); }

 private:
  CudnnDescriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor> d_;
};

// A 3-D tensor descriptor (dims a, b, c; packed), or an unset one for cuDNN to fill.
class Tensor3Desc {
 public:
  Tensor3Desc() = default;
  Tensor3Desc(DType dt, int a, int b, int c) {
    const int dims[3] = {a, b, c}, strides[3] = {b * c, c, 1};
    DL_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d_.get(), cudnn_type(dt), 3, dims, strides));
  }
  cudnnTensorDescriptor_t get() const { return d_.get(); }

 private:
  TensorDescriptor d_;
};

// PyTorch's get_algo (aten/src/ATen/native/cudnn/RNN.cpp, cuDNN >= 8.2.1) for an unpacked
// input: PERSIST_STATIC_SMALL_H for a non-double LSTM or GRU whose hidden size is at most 192 in
// the forward, 128 in the backward (use_rnn_persist_small_h); PERSIST_STATIC is its float16-only
// branch (driftlab has no float16); STANDARD otherwise. The backward reads the reserve space its
// forward wrote, under its own choice, as PyTorch's does.
cudnnRNNAlgo_t rnn_algo(const CudaContext& ctx, const RnnParams& p, DType dt, bool forward) {
  if (!ctx.params().rnn_persist_small_h || dt == DType::f64) return CUDNN_RNN_ALGO_STANDARD;
  return p.hidden <= (forward ? 192 : 128) ? CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H : CUDNN_RNN_ALGO_STANDARD;
}

const char* rnn_algo_name(cudnnRNNAlgo_t a) {
  return a == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? "RNN_ALGO_PERSIST_STATIC_SMALL_H" : "RNN_ALGO_STANDARD";
}

int as_int(const char* what, int64_t v) {
  check(v >= 0 && v <= 2147483647, "rnn_cudnn: ", what, "=", v, " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

// Everything one call needs: the descriptors (the same shapes and modes in forward and
// backward, as the reserve space requires; the algorithm may differ, as in PyTorch) and the
// sizes cuDNN asks for.
struct Setup {
  cudnnHandle_t handle;
  DropoutDesc dropout;
  RnnDesc rnn;
  RnnDataDesc xd, yd;
  Tensor3Desc hd;
  std::size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  std::string math;
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  std::string refused;  // the persistent algorithm's refusal, when cuDNN gave one and STANDARD ran

  // forward: the forward's algorithm choice (else the backward's).
  Setup(CudaContext& ctx, const RnnParams& p, DType dt, bool training, bool forward)
      : handle(static_cast<cudnnHandle_t>(ctx.cudnn())),
        dropout(handle),
        xd(dt, as_int("steps", p.steps), as_int("batch", p.batch), as_int("input", p.input)),
        yd(dt, as_int("steps", p.steps), as_int("batch", p.batch), as_int("hidden", p.hidden)),
        hd(dt, 1, as_int("batch", p.batch), as_int("hidden", p.hidden)) {
    // float64: DEFAULT (TF32 is a float32 matter; PyTorch's default allow_tf32=True gives it too).
    const bool fma = dt == DType::f32 && !ctx.params().tf32_conv;
    const cudnnMathType_t mt = fma ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    math = fma ? "FMA" : (dt == DType::f32 ? "DEFAULT(tf32 allowed)" : "DEFAULT");
    auto configure = [&](cudnnRNNAlgo_t a) {
      cudnnStatus_t st = cudnnSetRNNDescriptor_v8(
          rnn.get(), a, p.cell == RnnCell::lstm ? CUDNN_LSTM : CUDNN_GRU,
          p.two_biases ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_SINGLE_INP_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
          cudnn_type(dt), cudnn_type(dt), mt, as_int("input", p.input), as_int("hidden", p.hidden),
          as_int("hidden", p.hidden), 1, dropout.get(), CUDNN_RNN_PADDED_IO_ENABLED);
      if (st == CUDNN_STATUS_SUCCESS) st = cudnnGetRNNWeightSpaceSize(handle, rnn.get(), &weight_bytes);
      if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnGetRNNTempSpaceSizes(handle, rnn.get(), training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                       xd.get(), &work_bytes, training ? &reserve_bytes : nullptr);
      return st;
    };
    algo = rnn_algo(ctx, p, dt, forward);
    cudnnStatus_t st = configure(algo);
    if (st != CUDNN_STATUS_SUCCESS && algo != CUDNN_RNN_ALGO_STANDARD) {
      // A configuration the persistent kernels do not take: PyTorch would fail here; driftlab
      // runs STANDARD and says so in the algorithm log.
      refused = std::string(rnn_algo_name(algo)) + " refused (" + cudnnGetErrorString(st) + ")";
      algo = CUDNN_RNN_ALGO_STANDARD;
      st = configure(algo);
    }
    DL_CUDNN_CHECK(st);
  }
  cudnnTensorDescriptor_t cell_desc(const RnnParams& p) const { return p.cell == RnnCell::lstm ? hd.get() : nullptr; }
};

std::size_t numel_of(const Tensor3Desc& d) {
  cudnnDataType_t t;
  int nd = 0, dims[8], strides[8];
  DL_CUDNN_CHECK(cudnnGetTensorNdDescriptor(d.get(), 8, &t, &nd, dims, strides));
  std::size_t n = 1;
  for (int i = 0; i < nd; ++i) n *= static_cast<std::size_t>(dims[i]);
  return n;
}

// For each linear layer id: where cuDNN keeps its matrix and bias inside `space`, and which
// block of the canonical tensors they are: the matrix (H, in) is rows [g*H, (g+1)*H) of w_ih
// (ids < G) or w_hh, the bias the same rows of b_ih or b_hh. `which` indexes {w_ih, w_hh, b_ih,
// b_hh}. Sizes are checked against the canonical ones.
struct Block {
  char* space_addr;
  int which;
  int64_t offset, count;
};

std::vector<Block> blocks(const Setup& s, const RnnParams& p, void* space) {
  const int64_t G = rnn_gates(p.cell), H = p.hidden, F = p.input;
  std::vector<Block> out;
  for (int64_t id = 0; id < 2 * G; ++id) {
    const bool rec = id >= G;
    const int64_t g = rec ? id - G : id, in = rec ? H : F;
    Tensor3Desc md, bd;
    void *m = nullptr, *b = nullptr;
    DL_CUDNN_CHECK(cudnnGetRNNWeightParams(s.handle, s.rnn.get(), 0, s.weight_bytes, space, static_cast<int32_t>(id),
                                           md.get(), &m, bd.get(), &b));
    check(m != nullptr, "rnn_cudnn: cuDNN gave no matrix for linear layer ", id);
    check(numel_of(md) == static_cast<std::size_t>(H * in), "rnn_cudnn: linear layer ", id, " holds ", numel_of(md),
          " values, expected ", H, "x", in);
    out.push_back({static_cast<char*>(m), rec ? 1 : 0, g * H * in, H * in});
    const bool has_bias = !rec || p.two_biases;
    check((b != nullptr) == has_bias, "rnn_cudnn: linear layer ", id, (b ? " has" : " has no"),
          " bias in cuDNN's weight space, the layer ", (has_bias ? "has one" : "has none"));
    if (b) {
      check(numel_of(bd) == static_cast<std::size_t>(H), "rnn_cudnn: bias of linear layer ", id, " holds ",
            numel_of(bd), " values, expected ", H);
      out.push_back({static_cast<char*>(b), rec ? 3 : 2, g * H, H});
    }
  }
  return out;
}

// The weight space for these weights (zeroed, then every block copied in).
DeviceBytes pack_weights(CudaContext& ctx, const Setup& s, const RnnParams& p, const RnnDeviceWeights& w, DType dt) {
  DeviceBytes space(ctx, s.weight_bytes);
  DL_CUDA_CHECK(cudaMemsetAsync(space.get(), 0, s.weight_bytes, stream_of(ctx)));
  const DeviceTensor* src[4] = {w.w_ih, w.w_hh, w.b_ih, w.b_hh};
  const std::size_t es = dtype_size(dt);
  for (const Block& b : blocks(s, p, space.get()))
    DL_CUDA_CHECK(cudaMemcpyAsync(b.space_addr, static_cast<const char*>(src[b.which]->raw()) + b.offset * es,
                                  b.count * es, cudaMemcpyDeviceToDevice, stream_of(ctx)));
  return space;
}

void record(CudaContext& ctx, const char* op, const RnnParams& p, DType dt, const Setup& s) {
  const std::string sig = std::string(rnn_cell_name(p.cell)) + " N=" + std::to_string(p.batch) +
                          " T=" + std::to_string(p.steps) + " F=" + std::to_string(p.input) +
                          " H=" + std::to_string(p.hidden) + " biases=" + (p.two_biases ? "2 " : "1 ") + dtype_name(dt) +
                          " " + rnn_algo_name(s.algo);
  if (ctx.find_algo(op, sig)) return;
  AlgoRecord r;
  r.op = op;
  r.signature = sig;
  r.algo = s.algo;
  r.algo_name = rnn_algo_name(s.algo);
  if (!s.refused.empty()) r.algo_name += std::string(", ") + s.refused;
  r.workspace = s.work_bytes;
  r.deterministic = false;  // not documented either way; rnn_cudnn_supports refuses deterministic runs
  r.math = s.math;
  ctx.record_algo(r);
}

}  // namespace

void rnn_forward_cudnn(CudaContext& ctx, const RnnParams& p, const DeviceTensor& x, const RnnDeviceWeights& w,
                       DeviceTensor& h_seq, RnnDeviceState* state) {
  const char* fn = "rnn_forward_cudnn";
  check_rnn_params(p);
  check(rnn_cudnn_supports(p, false), fn, ": cuDNN has no cell for these parameters (see rnn_cudnn_supports)");
  check_device_shape(fn, "x", x, {p.batch, p.steps, p.input});
  check_device_shape(fn, "h_seq", h_seq, {p.batch, p.steps, p.hidden});
  const DType dt = x.dtype();
  check(h_seq.dtype() == dt, fn, ": h_seq and x dtypes differ");
  check_rnn_weights(fn, p, w, dt);
  const bool training = state != nullptr;
  if (training) *state = RnnDeviceState{};  // nothing of an earlier call (of either implementation) stays
  Setup s(ctx, p, dt, training, /*forward=*/true);
  record(ctx, "rnn_forward", p, dt, s);
  DeviceTensor x_tm(ctx, {p.steps, p.batch, p.input}, dt), y_tm(ctx, {p.steps, p.batch, p.hidden}, dt);
  swap_batch_time_cuda(ctx, x, x_tm);
  DeviceBytes space = pack_weights(ctx, s, p, w, dt);
  DeviceBytes work(ctx, s.work_bytes), reserve(ctx, s.reserve_bytes);
  DL_CUDNN_CHECK(cudnnRNNForward(s.handle, s.rnn.get(), training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                 nullptr, s.xd.get(), x_tm.raw(), s.yd.get(),
                                 y_tm.raw(), s.hd.get(), nullptr, nullptr, s.cell_desc(p), nullptr, nullptr,
                                 s.weight_bytes, space.get(), s.work_bytes, work.get(), s.reserve_bytes,
                                 reserve.get()));
  swap_batch_time_cuda(ctx, y_tm, h_seq);
  if (training) {
    state->vendor = true;
    state->x_tm = std::move(x_tm);
    state->y_tm = std::move(y_tm);
    state->reserve = std::move(reserve);
    state->weight_space = std::move(space);
  }
}

void rnn_backward_cudnn(CudaContext& ctx, const RnnParams& p, const RnnDeviceWeights& w, const RnnDeviceState& st,
                        const DeviceTensor& dh, DeviceTensor* dx, const RnnDeviceGrads& g) {
  const char* fn = "rnn_backward_cudnn";
  check_rnn_params(p);
  check(st.vendor && st.reserve.get() != nullptr, fn, ": no cuDNN training forward to go back through");
  check(rnn_cudnn_supports(p, false), fn, ": cuDNN has no cell for these parameters (see rnn_cudnn_supports)");
  check_device_shape(fn, "state x_tm", st.x_tm, {p.steps, p.batch, p.input});
  check_device_shape(fn, "state y_tm", st.y_tm, {p.steps, p.batch, p.hidden});
  const DType dt = st.x_tm.dtype();
  check_rnn_weights(fn, p, w, dt);  // cuDNN reads the weight space the forward packed
  check_rnn_grads(fn, p, g, dt);
  check_rnn_backward_io(fn, p, dh, dx, dt);
  Setup s(ctx, p, dt, true, /*forward=*/false);
  record(ctx, "rnn_backward", p, dt, s);
  check(s.weight_bytes == st.weight_space.size(), fn, ": cuDNN's weight space changed size between forward and backward");
  check(s.reserve_bytes <= st.reserve.size(), fn, ": the backward's algorithm (", rnn_algo_name(s.algo), ") needs ",
        s.reserve_bytes, " bytes of reserve space, the forward kept ", st.reserve.size());
  // The loss gradient per output step; with only h_T's gradient it is dhy (the final state)
  // and the per-step gradients are zero.
  DeviceTensor dy_tm = p.dh_last_step ? DeviceTensor::zeros(ctx, {p.steps, p.batch, p.hidden}, dt)
                                      : DeviceTensor(ctx, {p.steps, p.batch, p.hidden}, dt);
  if (!p.dh_last_step) swap_batch_time_cuda(ctx, dh, dy_tm);
  DeviceTensor dx_tm(ctx, {p.steps, p.batch, p.input}, dt);
  DeviceBytes work(ctx, s.work_bytes);
  const int32_t* lengths = nullptr;  // every sequence full length: cuDNN reads the data descriptors'
  void* reserve = st.reserve.get();
  DL_CUDNN_CHECK(cudnnRNNBackwardData_v8(s.handle, s.rnn.get(), lengths, s.yd.get(), st.y_tm.raw(), dy_tm.raw(),
                                         s.xd.get(), dx_tm.raw(), s.hd.get(), nullptr,
                                         p.dh_last_step ? dh.raw() : nullptr, nullptr, s.cell_desc(p), nullptr,
                                         nullptr, nullptr, s.weight_bytes, st.weight_space.get(), s.work_bytes,
                                         work.get(), st.reserve.size(), reserve));
  DeviceBytes dspace(ctx, s.weight_bytes);
  DL_CUDA_CHECK(cudaMemsetAsync(dspace.get(), 0, s.weight_bytes, stream_of(ctx)));
  DL_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(s.handle, s.rnn.get(), CUDNN_WGRAD_MODE_ADD, lengths, s.xd.get(),
                                            st.x_tm.raw(), s.hd.get(), nullptr, s.yd.get(), st.y_tm.raw(),
                                            s.weight_bytes, dspace.get(), s.work_bytes, work.get(),
                                            st.reserve.size(), reserve));
  DeviceTensor* dst[4] = {g.dw_ih, g.dw_hh, g.db_ih, g.db_hh};
  const std::size_t es = dtype_size(dt);
  for (const Block& b : blocks(s, p, dspace.get()))
    add_block_cuda(ctx, dt, b.space_addr, static_cast<char*>(dst[b.which]->raw()) + b.offset * es, b.count);
  if (dx) swap_batch_time_cuda(ctx, dx_tm, *dx);
}

}  // namespace cuda
}  // namespace driftlab
