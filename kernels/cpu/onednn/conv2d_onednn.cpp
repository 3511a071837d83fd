// oneDNN conv2d: forward (with bias), backward data, backward weights (with bias), float32 only
// (supports() is false for float64, so the dispatcher falls back to the reference).
// User-side layouts x (N,C,H,W) [nchw], w (K,C,R,S) [oihw], y (N,K,P,Q) [nchw].
// forward and backward_data write (=); backward_weight ADDS (+=) into dw and db: oneDNN writes
// the gradient into a scratch buffer which is then added.
//
// Explicit asymmetric padding maps to oneDNN's padding_l {pad_t, pad_l} / padding_r {pad_b,
// pad_r}; oneDNN counts dilation from 0, so it gets (dil - 1). Flip (true convolution) is done
// on a copy: the weights are rotated 180 degrees before forward/backward_data, and the weight
// gradient is rotated back while it is added into dw.
//
// Activations may also come and go channel-blocked (engine/layers/layout.h): each of x, y, dy, dx
// is described to oneDNN in the layout its Tensor carries (nchw, nChw8c or nChw16c), so where it
// is the layout the primitive computes in (channel_block(): nChw16c on AVX-512) no reorder runs.
// The primitive is the same whatever the caller's layouts: the same bits.
//
// Memory formats: the JIT kernels oneDNN picks for format "any" use channel-blocked layouts
// (nChw16c, OIhw16i16o) and beat the im2col+sgemm path it uses for plain nchw at LeNet sizes
// even after reordering to and from nchw (measured at batch 128, one thread: forward 1.4-3x,
// backward weights 2-4x), except backward data into fewer than 4 input channels (the first
// layer), where the blocked kernel pads C to 16 and is ~6x slower than the plain one (nhwc is
// no better). The rule (use_blocked_layout) depends only on the op and the shape, never on a
// timing, so which kernel runs, and therefore every rounding, is fixed by the params and the
// thread count.
//
// Convolutions that are dense layers (every output position meets every input position at one
// kernel tap: VGG-16's 2x2 planes) run as three oneDNN matmuls on a gathered weight matrix
// instead (section "Convolutions that are dense layers" below; Conv2dKernel::algorithm names the
// path), by the same kind of shape-only rule.
//
// Threading: oneDNN is built on OpenMP and uses omp_get_max_threads() threads; its kernels are
// run-to-run reproducible for a fixed thread count. The thread count is part of the plan key.
#include <omp.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "core/host_memory.h"
#include "core/ops/conv2d.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum class ConvOp : int64_t { forward, backward_data, backward_weight };

// The CPU engine is stateless from the caller's point of view; one per process is enough.
const dnnl::engine& cpu_engine() {
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// See the file comment: blocked ("any") layouts everywhere except backward data into fewer
// than 4 input channels, where the plain-layout im2col kernel wins (at C=4 they tie).
bool use_blocked_layout(ConvOp op, const Conv2dParams& p) {
  if (op == ConvOp::backward_data) return p.c >= 4;
  return true;
}

// One tensor argument of a primitive: the caller's plain memory and, when oneDNN wants another
// layout, the primitive's own buffer plus the reorder between the two.
struct PlanArg {
  int arg = 0;
  bool output = false;
  memory user;  // plain layout; its data handle is set on every call
  memory prim;  // == user when no reorder is needed
  dnnl::reorder reorder;
  bool reordered = false;
  // prim's storage: taken from host_memory for one call and given back after it (run_plan), so
  // that every plan's reorder buffers share the same few blocks instead of each plan holding its
  // own (ResNet-20 training: ~40 activation-sized buffers, each fresh memory on the first step).
  std::size_t prim_bytes = 0;
};

// A created primitive and everything it needs to run, for one (op, shape, thread count).
struct Plan {
  dnnl::primitive conv;
  std::vector<PlanArg> args;
  std::vector<float> flipped_w;  // rotated weights (flip), see applied_weights
  std::vector<float> dw_scratch, db_scratch;  // backward_weight: gradients before adding
};

void add_arg(Plan& plan, int arg, bool output, const memory::desc& user_md, const memory::desc& prim_md) {
  const dnnl::engine& eng = cpu_engine();
  PlanArg a;
  a.arg = arg;
  a.output = output;
  a.user = memory(user_md, eng, DNNL_MEMORY_NONE);
  if (prim_md == user_md) {
    a.prim = a.user;
  } else {
    a.prim_bytes = std::max<std::size_t>(prim_md.get_size(), 64);
    a.prim = memory(prim_md, eng, DNNL_MEMORY_NONE);
    a.reordered = true;
    a.reorder = output ? dnnl::reorder(a.prim, a.user) : dnnl::reorder(a.user, a.prim);
  }
  plan.args.push_back(std::move(a));
}

memory::dims dims4(int64_t a, int64_t b, int64_t c, int64_t d) { return {a, b, c, d}; }

// The oneDNN format of an activation Tensor's channel block.
Tag activation_tag(int block) {
  switch (block) {
    case 0: return Tag::nchw;
    case 8: return Tag::nChw8c;
    case 16: return Tag::nChw16c;
    default: fail("conv2d_onednn: channel block ", block, " (takes plain, 8 or 16)");
  }
}

// `make(algo)`, a primitive descriptor of the given algorithm; where algo asks for Winograd and
// oneDNN has no such primitive (it throws), `make(direct)` with algo set to direct.
template <typename Make>
auto winograd_or_direct(dnnl::algorithm& algo, Make&& make) -> decltype(make(algo)) {
  try {
    return make(algo);
  } catch (const dnnl::error&) {
    if (algo == dnnl::algorithm::convolution_direct) throw;
    algo = dnnl::algorithm::convolution_direct;
    return make(algo);
  }
}

// The forward training descriptor of p under algorithm a: x, w and y in the layouts the primitive
// picks (blocked) or plain.
dnnl::convolution_forward::primitive_desc forward_desc(const Conv2dParams& p, dnnl::algorithm a, bool bias,
                                                       bool blocked) {
  const auto f32 = memory::data_type::f32;
  const Tag act = blocked ? Tag::any : Tag::nchw;
  return dnnl::convolution_forward::primitive_desc(
      {dnnl::prop_kind::forward_training, a, memory::desc(dims4(p.n, p.c, p.h, p.w), f32, act),
       memory::desc(dims4(p.k, p.c, p.r, p.s), f32, blocked ? Tag::any : Tag::oihw),
       bias ? memory::desc({p.k}, f32, Tag::x) : memory::desc(),
       memory::desc(dims4(p.n, p.k, p.out_h(), p.out_w()), f32, act), {p.stride_h, p.stride_w},
       {p.dil_h - 1, p.dil_w - 1}, {p.pad_t, p.pad_l}, {p.pad_b, p.pad_r}},
      cpu_engine());
}

// xb / yb: the channel blocks of the caller's x (and dx) and y (and dy).
std::unique_ptr<Plan> make_plan(ConvOp op, const Conv2dParams& p, bool bias, int xb, int yb) {
  const dnnl::engine& eng = cpu_engine();
  const memory::dims xd = dims4(p.n, p.c, p.h, p.w), wd = dims4(p.k, p.c, p.r, p.s),
                     yd = dims4(p.n, p.k, p.out_h(), p.out_w()), bd = {p.k};
  const memory::dims strides = {p.stride_h, p.stride_w}, dil = {p.dil_h - 1, p.dil_w - 1},
                     pad_l = {p.pad_t, p.pad_l}, pad_r = {p.pad_b, p.pad_r};
  const auto f32 = memory::data_type::f32;
  const bool blocked = use_blocked_layout(op, p);
  const memory::desc x_user(xd, f32, activation_tag(xb)), w_user(wd, f32, Tag::oihw),
      y_user(yd, f32, activation_tag(yb)), b_md(bd, f32, Tag::x);
  // The primitive's layouts depend on the op and the shape only, never on the caller's: a plain
  // primitive (im2col) takes nchw, and a blocked caller's tensors are reordered to it.
  const memory::desc x_any = memory::desc(xd, f32, blocked ? Tag::any : Tag::nchw);
  const memory::desc w_any = blocked ? memory::desc(wd, f32, Tag::any) : w_user;
  const memory::desc y_any = memory::desc(yd, f32, blocked ? Tag::any : Tag::nchw);
  // ConvAlgorithm::winograd: oneDNN's Winograd primitives where it has one for the shape and pass
  // (core/ops/conv2d.h), the direct ones otherwise.
  auto algo = p.algorithm == ConvAlgorithm::winograd && blocked ? dnnl::algorithm::convolution_winograd
                                                                 : dnnl::algorithm::convolution_direct;
  // The forward descriptor is the hint the backward primitives need.
  const dnnl::convolution_forward::primitive_desc fwd_pd =
      winograd_or_direct(algo, [&](dnnl::algorithm a) { return forward_desc(p, a, bias, blocked); });
  const dnnl::algorithm fwd_algo = algo;
  // A backward pass without a Winograd primitive of its own runs the direct one, with a direct hint.
  auto hint = [&](dnnl::algorithm a) { return a == fwd_algo ? fwd_pd : forward_desc(p, a, bias, blocked); };

  auto plan = std::make_unique<Plan>();
  if (op == ConvOp::forward) {
    plan->conv = dnnl::convolution_forward(fwd_pd);
    add_arg(*plan, DNNL_ARG_SRC, false, x_user, fwd_pd.src_desc());
    add_arg(*plan, DNNL_ARG_WEIGHTS, false, w_user, fwd_pd.weights_desc());
    if (bias) add_arg(*plan, DNNL_ARG_BIAS, false, b_md, fwd_pd.bias_desc());
    add_arg(*plan, DNNL_ARG_DST, true, y_user, fwd_pd.dst_desc());
  } else if (op == ConvOp::backward_data) {
    const auto pd = winograd_or_direct(algo, [&](dnnl::algorithm a) {
      return dnnl::convolution_backward_data::primitive_desc({a, x_any, w_any, y_any, strides, dil, pad_l, pad_r}, eng,
                                                             hint(a));
    });
    plan->conv = dnnl::convolution_backward_data(pd);
    add_arg(*plan, DNNL_ARG_DIFF_DST, false, y_user, pd.diff_dst_desc());
    add_arg(*plan, DNNL_ARG_WEIGHTS, false, w_user, pd.weights_desc());
    add_arg(*plan, DNNL_ARG_DIFF_SRC, true, x_user, pd.diff_src_desc());
  } else {
    const auto pd = winograd_or_direct(algo, [&](dnnl::algorithm a) {
      return dnnl::convolution_backward_weights::primitive_desc(
          {a, x_any, w_any, bias ? b_md : memory::desc(), y_any, strides, dil, pad_l, pad_r}, eng, hint(a));
    });
    plan->conv = dnnl::convolution_backward_weights(pd);
    add_arg(*plan, DNNL_ARG_SRC, false, x_user, pd.src_desc());
    add_arg(*plan, DNNL_ARG_DIFF_DST, false, y_user, pd.diff_dst_desc());
    add_arg(*plan, DNNL_ARG_DIFF_WEIGHTS, true, w_user, pd.diff_weights_desc());
    if (bias) add_arg(*plan, DNNL_ARG_DIFF_BIAS, true, b_md, pd.diff_bias_desc());
    plan->dw_scratch.resize(static_cast<std::size_t>(p.k * p.c * p.r * p.s));
    if (bias) plan->db_scratch.resize(static_cast<std::size_t>(p.k));
  }
  return plan;
}

// Whether oneDNN has a Winograd forward primitive for p's shape (what make_plan's forward runs
// under ConvAlgorithm::winograd; Conv2dKernel::algorithm's answer).
bool winograd_forward(const Conv2dParams& p) {
  dnnl::algorithm algo = dnnl::algorithm::convolution_winograd;
  winograd_or_direct(algo, [&](dnnl::algorithm a) { return forward_desc(p, a, false, true); });
  return algo == dnnl::algorithm::convolution_winograd;
}

// Internal cache of created primitives, keyed by everything that shapes them (op, every
// Conv2dParams field oneDNN sees, bias or not, OpenMP thread count). It has no semantic
// effect: a miss builds exactly the plan a hit would have returned. It is thread_local so that
// no caller ever shares mutable state (each plan owns scratch buffers); flip and sum_order are
// not in the key because the primitive does not depend on them.
using PlanKey = std::array<int64_t, 21>;
constexpr std::size_t kMaxPlans = 64;  // cleared when full: a net uses a handful of shapes

Plan& get_plan(ConvOp op, const Conv2dParams& p, bool bias, int xb, int yb) {
  static thread_local std::map<PlanKey, std::unique_ptr<Plan>> cache;
  const PlanKey key = {static_cast<int64_t>(op), p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.stride_h, p.stride_w,
                       p.dil_h, p.dil_w, p.pad_t, p.pad_b, p.pad_l, p.pad_r, bias ? 1 : 0, omp_get_max_threads(),
                       xb, yb, static_cast<int64_t>(p.algorithm)};
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  if (cache.size() >= kMaxPlans) cache.clear();
  return *cache.emplace(key, make_plan(op, p, bias, xb, yb)).first->second;
}

// The channel block of the layout oneDNN's forward computes activations in for format "any"
// (asked once of a 16-channel 3x3 convolution): 16 on AVX-512, 8 on AVX2, 0 otherwise.
int onednn_channel_block() {
  static const int block = [] {
    try {
      const auto f32 = memory::data_type::f32;
      const memory::dims xd = {2, 16, 8, 8}, wd = {16, 16, 3, 3};
      dnnl::convolution_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, memory::desc(xd, f32, Tag::any),
           memory::desc(wd, f32, Tag::any), memory::desc(), memory::desc(xd, f32, Tag::any), {1, 1}, {0, 0},
           {1, 1}, {1, 1}},
          cpu_engine());
      for (int b : {16, 8})
        if (pd.dst_desc() == memory::desc(xd, f32, activation_tag(b))) return b;
    } catch (const dnnl::error&) {
    }
    return 0;
  }();
  return block;
}

// A layout-aware pointer to an activation argument.
float* act_ptr(const Tensor& t) { return const_cast<float*>(t.blocked_data<float>()); }

// The weights the primitive applies: w itself, or with flip a copy rotated 180 degrees in (R,S),
// out[.., r, s] = w[.., R-1-r, S-1-s], kept in the plan (flip is not part of the plan key, so
// the buffer is sized on first use).
const float* applied_weights(Plan& plan, const Conv2dParams& p, const Tensor& w) {
  const float* wp = w.data<float>();
  if (!p.flip) return wp;
  const int64_t rs = p.r * p.s;
  plan.flipped_w.resize(static_cast<std::size_t>(p.k * p.c * rs));
  float* out = plan.flipped_w.data();
  for (int64_t kc = 0; kc < p.k * p.c; ++kc)
    for (int64_t i = 0; i < rs; ++i) out[kc * rs + i] = wp[kc * rs + rs - 1 - i];
  return out;
}

// The reorder buffers of one call, from host_memory, given back when the call ends (or throws).
class CallBuffers {
 public:
  ~CallBuffers() {
    for (auto& b : blocks_) host_memory::release(b.first, b.second);
  }
  void* take(std::size_t bytes) {
    void* p = host_memory::allocate(bytes);
    if (!p) fail("conv2d_onednn: out of memory allocating ", bytes, " bytes for a reorder buffer");
    blocks_.emplace_back(p, bytes);
    return p;
  }

 private:
  std::vector<std::pair<void*, std::size_t>> blocks_;
};

// An input kept in a primitive's layout beyond one call (Conv2dKernel's keep): a recorded forward's
// source for the step's backward_weight, backward_data's reordered dy for the backward_weight after
// it. Its storage comes from host_memory and goes back when the last holder lets go.
struct Kept {
  memory::desc md;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  Kept(const memory::desc& d, std::size_t b) : md(d), ptr(host_memory::allocate(b)), bytes(b) {
    if (!ptr) fail("conv2d_onednn: out of memory allocating ", b, " bytes for a kept reorder");
  }
  ~Kept() { host_memory::release(ptr, bytes); }
  Kept(const Kept&) = delete;
  Kept& operator=(const Kept&) = delete;
};
using KeptPtr = std::shared_ptr<Kept>;

// Binds the caller's pointers (in PlanArg order), reorders inputs in, runs, reorders outputs out.
// given[i] (optional): input i already in the primitive's layout, bound instead of reordered where
// its layout is the one this primitive wants. keep_arg / kept: input keep_arg's reordered copy is
// made into a Kept handed back (null where that input needs no reorder).
void run_plan(Plan& plan, const std::vector<void*>& ptrs, const std::vector<KeptPtr>* given = nullptr,
              int keep_arg = -1, KeptPtr* kept = nullptr) {
  static thread_local dnnl::stream strm(cpu_engine());
  CallBuffers buffers;
  std::unordered_map<int, memory> exec_args;
  for (std::size_t i = 0; i < plan.args.size(); ++i) {
    PlanArg& a = plan.args[i];
    a.user.set_data_handle(ptrs[i]);
    if (a.reordered) {
      const Kept* g = given && i < given->size() ? (*given)[i].get() : nullptr;
      if (g && g->md == a.prim.get_desc()) {
        a.prim.set_data_handle(g->ptr);  // reordered by an earlier call, unchanged since
      } else if (kept && static_cast<int>(i) == keep_arg) {
        *kept = std::make_shared<Kept>(a.prim.get_desc(), a.prim_bytes);
        a.prim.set_data_handle((*kept)->ptr);
        a.reorder.execute(strm, a.user, a.prim);
      } else {
        a.prim.set_data_handle(buffers.take(a.prim_bytes));
        if (!a.output) a.reorder.execute(strm, a.user, a.prim);
      }
    }
    exec_args.emplace(a.arg, a.prim);
  }
  plan.conv.execute(strm, exec_args);
  for (PlanArg& a : plan.args)
    if (a.reordered && a.output) a.reorder.execute(strm, a.prim, a.user);
  strm.wait();
}

template <typename F>
void with_onednn_errors(const char* fn, const Conv2dParams& p, const F& f) {
  try {
    f();
  } catch (const dnnl::error& e) {
    fail(fn, ": oneDNN error: ", e.what(), " (", p.str(), ")");
  }
}

void check_args(const char* fn, const Conv2dParams& p, const Tensor& in, const char* in_name, const Shape& in_shape,
                const Tensor& w) {
  p.validate();
  check_shape(fn, in_name, in, in_shape);
  check_shape(fn, "w", w, p.w_shape());
  check(in.dtype() == DType::f32 && w.dtype() == DType::f32, fn, ": float32 only, got ", dtype_name(in.dtype()),
        " (", p.str(), ")");
}

// ---- Convolutions that are dense layers ----
// Where every output position sees every input position through exactly one kernel tap (a 2x2
// plane under a 3x3 kernel with padding 1, as in VGG-16's last three convolutions on 32x32 images;
// any 1x1 plane), the convolution is a dense layer over each image's flattened (channel, position)
// vector:
//   y[n, (k,p)] = b[k] + sum over (c,q) of G[(k,p), (c,q)] x[n, (c,q)],   G[(k,p), (c,q)] = w[k, c, tap(p,q)]
// and its gradients are dx = dy G and dG = dy^T x, each tap's entries of dG then summed into dw.
// These run as oneDNN matmuls instead of its direct kernels, whose loops over so small a plane are
// mostly edge handling (docs/BENCHMARKS.md, "Convolutions that are dense layers").
// The flattened vectors are taken in one layout whatever the caller's (the kernel's own channel
// block where the channel count is a multiple of it, else plain; others converted), so the matmuls
// sum in the same order for every caller layout: the same bits, as for the direct kernels. Which
// path runs depends only on the shape (dense_plane), never on a timing.

// Every (output, input) index pair along one axis meets the kernel at exactly one tap.
bool axis_all_pairs_tapped(int64_t in, int64_t out, int64_t taps, int64_t stride, int64_t dil, int64_t pad_before) {
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      const int64_t d = i - o * stride + pad_before;
      if (d < 0 || d % dil != 0 || d / dil >= taps) return false;
    }
  return true;
}

// The gathered matrix G has (K*P*Q) x (C*H*W) floats; past 16 Mi of them (64 MiB; VGG-16's 2x2
// layers have 4 Mi) the direct kernel is kept rather than a buffer that large per call.
constexpr int64_t kDensePlaneMaxFloats = int64_t(16) << 20;

bool dense_plane(const Conv2dParams& p) {
  const int64_t rows = p.k * p.out_h() * p.out_w(), cols = p.c * p.h * p.w;
  return p.groups == 1 && rows * cols <= kDensePlaneMaxFloats &&
         axis_all_pairs_tapped(p.h, p.out_h(), p.r, p.stride_h, p.dil_h, p.pad_t) &&
         axis_all_pairs_tapped(p.w, p.out_w(), p.s, p.stride_w, p.dil_w, p.pad_l);
}

// One side (x or y) of a dense-plane convolution, flattened: channel c at position s of an image
// sits at base[c] + s * step (channel block b: base[c] = (c/b)*plane*b + c%b and step = b; plain:
// base[c] = c*plane and step = 1).
struct FlatSide {
  int64_t channels, plane;
  int block;
  std::vector<int64_t> base;
  int64_t step;
  FlatSide(int64_t channels_, int64_t plane_, int block_)
      : channels(channels_), plane(plane_), block(block_), base(static_cast<std::size_t>(channels_)),
        step(block_ > 0 ? block_ : 1) {
    for (int64_t c = 0; c < channels; ++c)
      base[static_cast<std::size_t>(c)] = block > 0 ? c / block * plane * block + c % block : c * plane;
  }
  int64_t size() const { return channels * plane; }
};

// The shapes of one dense-plane convolution: the flattened x and y sides, and the tap in w[k, c, :]
// (as stored: with flip the applied kernel is w rotated 180 degrees) joining output position o to
// input position i, tap[o * H*W + i].
struct DensePlane {
  int64_t n, rs;
  FlatSide x, y;
  std::vector<int64_t> tap;
  DensePlane(const Conv2dParams& p, int own)
      : n(p.n), rs(p.r * p.s), x(p.c, p.h * p.w, own > 0 && p.c % own == 0 ? own : 0),
        y(p.k, p.out_h() * p.out_w(), own > 0 && p.k % own == 0 ? own : 0),
        tap(static_cast<std::size_t>(y.plane * x.plane)) {
    for (int64_t o = 0; o < y.plane; ++o)
      for (int64_t i = 0; i < x.plane; ++i) {
        const int64_t oh = o / p.out_w(), ow = o % p.out_w(), ih = i / p.w, iw = i % p.w;
        const int64_t t = (ih - oh * p.stride_h + p.pad_t) / p.dil_h * p.s + (iw - ow * p.stride_w + p.pad_l) / p.dil_w;
        tap[static_cast<std::size_t>(o * x.plane + i)] = p.flip ? rs - 1 - t : t;
      }
  }
};

// Copies N images of `from`'s side between channel blocks (elements moved, none computed).
void relayout(const float* src, const FlatSide& from, float* dst, const FlatSide& to, int64_t n) {
  const int64_t image = from.size();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < from.channels; ++c)
      for (int64_t s = 0; s < from.plane; ++s)
        dst[i * image + to.base[c] + s * to.step] = src[i * image + from.base[c] + s * from.step];
}

float* take_floats(CallBuffers& buffers, int64_t count) {
  return static_cast<float*>(buffers.take(static_cast<std::size_t>(std::max<int64_t>(count, 16)) * sizeof(float)));
}

// t's values laid out as `side`: t's own storage when it already is, else a converted copy.
const float* as_side(const Tensor& t, const FlatSide& side, CallBuffers& buffers) {
  if (t.channel_block() == side.block) return act_ptr(t);
  float* out = take_floats(buffers, t.numel());
  relayout(act_ptr(t), FlatSide(side.channels, side.plane, t.channel_block()), out, side, t.dim(0));
  return out;
}

// An output laid out as `side`, written into t when t is laid out so, else into a buffer that
// to_caller then converts into t.
float* out_side(Tensor& t, const FlatSide& side, CallBuffers& buffers) {
  return t.channel_block() == side.block ? act_ptr(t) : take_floats(buffers, t.numel());
}
void to_caller(const float* out, const FlatSide& side, Tensor& t) {
  if (out != act_ptr(t)) relayout(out, side, act_ptr(t), FlatSide(side.channels, side.plane, t.channel_block()), t.dim(0));
}

// dst[c / step * chunk + c % step] = src[c] for c < channels: runs of `step` contiguous floats,
// `chunk` apart; the usual steps as constants, so that each run is a few vector moves, not a call.
template <int64_t kStep>
void copy_runs_of(const float* src, float* dst, int64_t channels, int64_t chunk) {
  for (int64_t cb = 0; cb < channels; cb += kStep, dst += chunk)
    for (int64_t j = 0; j < kStep; ++j) dst[j] = src[cb + j];
}
void copy_runs(const float* src, float* dst, int64_t channels, int64_t step, int64_t chunk) {
  if (step == 16) return copy_runs_of<16>(src, dst, channels, chunk);
  if (step == 8) return copy_runs_of<8>(src, dst, channels, chunk);
  return copy_runs_of<1>(src, dst, channels, chunk);
}

// G[(k,p), (c,q)] (rows: the y side, K*P*Q; columns: the x side, C*H*W) from w:(K,C,R,S). Each
// output channel's weights are first turned tap-major (wt[t][c]), so that every run of a row, the
// `step` channels at one input position, is a contiguous copy.
void gather_weights(const DensePlane& d, const float* w, float* g) {
  const int64_t cols = d.x.size(), channels = d.x.channels, step = d.x.step, chunk = d.x.plane * step;
#pragma omp parallel
  {
    std::vector<float> wt(static_cast<std::size_t>(d.rs * channels));
#pragma omp for schedule(static)
    for (int64_t k = 0; k < d.y.channels; ++k) {
      const float* wk = w + k * channels * d.rs;
      for (int64_t t = 0; t < d.rs; ++t)
        for (int64_t c = 0; c < channels; ++c) wt[static_cast<std::size_t>(t * channels + c)] = wk[c * d.rs + t];
      for (int64_t o = 0; o < d.y.plane; ++o) {
        float* row = g + (d.y.base[k] + o * d.y.step) * cols;
        for (int64_t i = 0; i < d.x.plane; ++i) {
          const float* src = wt.data() + d.tap[o * d.x.plane + i] * channels;
          copy_runs(src, row + i * step, channels, step, chunk);
        }
      }
    }
  }
}

// The three matmuls, as oneDNN primitives cached per (op, N, rows, cols, threads) like the
// convolution plans. Row-major operands; a transposed one is the same buffer with swapped strides.
enum class PlaneOp : int64_t { forward, backward_data, backward_weight };

struct PlaneMatmul {
  dnnl::matmul prim;
  memory::desc src, wei, dst;
};

PlaneMatmul& plane_matmul(PlaneOp op, int64_t n, int64_t rows, int64_t cols) {
  using Key = std::array<int64_t, 5>;
  static thread_local std::map<Key, PlaneMatmul> cache;
  const Key key = {static_cast<int64_t>(op), n, rows, cols, omp_get_max_threads()};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= kMaxPlans) cache.clear();
  const auto f32 = memory::data_type::f32;
  auto md = [&](int64_t a, int64_t b, bool transposed) {
    // (a x b) row-major, or the transpose of a (b x a) row-major buffer
    return memory::desc({a, b}, f32, transposed ? memory::dims{1, a} : memory::dims{b, 1});
  };
  PlaneMatmul m;
  switch (op) {
    case PlaneOp::forward:  // y[N, rows] = x[N, cols] G^T
      m.src = md(n, cols, false), m.wei = md(cols, rows, true), m.dst = md(n, rows, false);
      break;
    case PlaneOp::backward_data:  // dx[N, cols] = dy[N, rows] G
      m.src = md(n, rows, false), m.wei = md(rows, cols, false), m.dst = md(n, cols, false);
      break;
    case PlaneOp::backward_weight:  // dG[rows, cols] = dy^T x
      m.src = md(rows, n, true), m.wei = md(n, cols, false), m.dst = md(rows, cols, false);
      break;
  }
  m.prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(m.src, m.wei, m.dst), cpu_engine()));
  return cache.emplace(key, std::move(m)).first->second;
}

void run_matmul(PlaneOp op, const DensePlane& d, const float* a, const float* b, float* c) {
  static thread_local dnnl::stream strm(cpu_engine());
  PlaneMatmul& m = plane_matmul(op, d.n, d.y.size(), d.x.size());
  const dnnl::engine& eng = cpu_engine();
  m.prim.execute(strm, {{DNNL_ARG_SRC, memory(m.src, eng, const_cast<float*>(a))},
                        {DNNL_ARG_WEIGHTS, memory(m.wei, eng, const_cast<float*>(b))},
                        {DNNL_ARG_DST, memory(m.dst, eng, c)}});
  strm.wait();
}

// x:(N,C,H,W) w:(K,C,R,S) b:(K) or null -> y:(N,K,P,Q) (=)
void dense_plane_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  const DensePlane d(p, onednn_channel_block());
  CallBuffers buffers;
  const float* xs = as_side(x, d.x, buffers);
  float* ys = out_side(y, d.y, buffers);
  float* g = take_floats(buffers, d.y.size() * d.x.size());
  gather_weights(d, w.data<float>(), g);
  run_matmul(PlaneOp::forward, d, xs, g, ys);
  if (b) {
    const float* bp = b->data<float>();
    const int64_t rows = d.y.size();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t k = 0; k < d.y.channels; ++k)
        for (int64_t o = 0; o < d.y.plane; ++o) ys[i * rows + d.y.base[k] + o * d.y.step] += bp[k];
  }
  to_caller(ys, d.y, y);
}

// x:(N,C,H,W) dy:(N,K,P,Q) w:(K,C,R,S) -> dx:(N,C,H,W) (=, where dx), dw:(K,C,R,S) (+=, where dw),
// db:(K) (+=, where db and dw)
void dense_plane_backward(const Conv2dParams& p, const Tensor& x, const Tensor& dy, const Tensor& w, Tensor* dx,
                          Tensor* dw, Tensor* db) {
  const DensePlane d(p, onednn_channel_block());
  CallBuffers buffers;
  const int64_t rows = d.y.size(), cols = d.x.size();
  const float* dys = as_side(dy, d.y, buffers);
  float* g = take_floats(buffers, rows * cols);
  if (dx) {
    float* dxs = out_side(*dx, d.x, buffers);
    gather_weights(d, w.data<float>(), g);
    run_matmul(PlaneOp::backward_data, d, dys, g, dxs);
    to_caller(dxs, d.x, *dx);
  }
  if (!dw) return;
  run_matmul(PlaneOp::backward_weight, d, dys, as_side(x, d.x, buffers), g);  // g = dG now
  float* dwp = dw->data<float>();
  const int64_t channels = d.x.channels, step = d.x.step, chunk = d.x.plane * step;
#pragma omp parallel
  {
    // Each tap's sum over the (o, i) pairs that meet it, in that order (o, then i), tap-major
    // (sum[t][c]) so that each run of `step` channels adds a contiguous run of dG; then added into
    // dw once.
    std::vector<float> sum(static_cast<std::size_t>(d.rs * channels));
    std::vector<char> tapped(static_cast<std::size_t>(d.rs));
#pragma omp for schedule(static)
    for (int64_t k = 0; k < d.y.channels; ++k) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      std::fill(tapped.begin(), tapped.end(), 0);
      for (int64_t o = 0; o < d.y.plane; ++o) {
        const float* row = g + (d.y.base[k] + o * d.y.step) * cols;
        for (int64_t i = 0; i < d.x.plane; ++i) {
          const int64_t t = d.tap[o * d.x.plane + i];
          tapped[t] = 1;
          float* st = sum.data() + t * channels;
          for (int64_t cb = 0; cb < channels; cb += step) {
            const float* src = row + cb / step * chunk + i * step;
            for (int64_t j = 0; j < step; ++j) st[cb + j] += src[j];
          }
        }
      }
      // A tap no pair meets has no product to add (adding 0 would turn a -0 into +0).
      float* dwk = dwp + k * channels * d.rs;
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t t = 0; t < d.rs; ++t)
          if (tapped[t]) dwk[c * d.rs + t] += sum[static_cast<std::size_t>(t * channels + c)];
    }
  }
  if (db) {
    float* dbp = db->data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < d.y.channels; ++k) {
      float sum = 0.0f;
      for (int64_t i = 0; i < d.n; ++i)
        for (int64_t o = 0; o < d.y.plane; ++o) sum += dys[i * rows + d.y.base[k] + o * d.y.step];
      dbp[k] += sum;
    }
  }
}

}  // namespace

// x:(N,C,H,W) w:(K,C,R,S) b:(K) or null -> y:(N,K,P,Q) (=); keep (may be null): x in the
// primitive's layout for conv2d_backward_both_onednn (Conv2dKernel::forward_keep).
void conv2d_forward_keep_onednn(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                                std::shared_ptr<void>* keep) {
  const char* fn = "conv2d_forward_onednn";
  check_args(fn, p, x, "x", p.x_shape(), w);
  check_shape(fn, "y", y, p.y_shape());
  if (b) check_shape(fn, "b", *b, {p.k});
  if (dense_plane(p)) {  // nothing kept: the matmuls read x in place or convert the small plane again
    with_onednn_errors(fn, p, [&] { dense_plane_forward(p, x, w, b, y); });
    if (keep) keep->reset();
    return;
  }
  with_onednn_errors(fn, p, [&] {
    Plan& plan = get_plan(ConvOp::forward, p, b != nullptr, x.channel_block(), y.channel_block());
    const float* wp = applied_weights(plan, p, w);
    std::vector<void*> ptrs = {act_ptr(x), const_cast<float*>(wp)};
    if (b) ptrs.push_back(const_cast<float*>(b->data<float>()));
    ptrs.push_back(act_ptr(y));
    KeptPtr kept;
    run_plan(plan, ptrs, nullptr, 0, keep ? &kept : nullptr);
    if (keep) *keep = kept;
  });
}

void conv2d_forward_onednn(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  conv2d_forward_keep_onednn(p, x, w, b, y, nullptr);
}

// x:(N,C,H,W) dy:(N,K,P,Q) w:(K,C,R,S) -> dx:(N,C,H,W) (=, where dx), dw:(K,C,R,S) (+=, where dw),
// db:(K) (+=, where db and dw). dy is reordered once for both primitives where their layouts agree;
// keep (from conv2d_forward_keep_onednn on this x, or null) stands for x's reorder.
void conv2d_backward_both_onednn(const Conv2dParams& p, const Tensor& x, const Tensor& dy, const Tensor& w, Tensor* dx,
                                 Tensor* dw, Tensor* db, const std::shared_ptr<void>& keep) {
  if (dx) {
    const char* fn = "conv2d_backward_data_onednn";
    check_args(fn, p, dy, "dy", p.y_shape(), w);
    check_shape(fn, "dx", *dx, p.x_shape());
  }
  if (dw) {
    const char* fn = "conv2d_backward_weight_onednn";
    check_args(fn, p, x, "x", p.x_shape(), *dw);
    check_shape(fn, "dy", dy, p.y_shape());
    if (db) check_shape(fn, "db", *db, {p.k});
  }
  if (dense_plane(p)) {
    with_onednn_errors(dx ? "conv2d_backward_data_onednn" : "conv2d_backward_weight_onednn", p,
                       [&] { dense_plane_backward(p, x, dy, w, dx, dw, db); });
    return;
  }
  KeptPtr dy_kept;
  if (dx) {
    const char* fn = "conv2d_backward_data_onednn";
    with_onednn_errors(fn, p, [&] {
      Plan& plan = get_plan(ConvOp::backward_data, p, false, dx->channel_block(), dy.channel_block());
      const float* wp = applied_weights(plan, p, w);
      run_plan(plan, {act_ptr(dy), const_cast<float*>(wp), act_ptr(*dx)}, nullptr,
               0, dw ? &dy_kept : nullptr);
    });
  }
  if (!dw) return;
  const char* fn = "conv2d_backward_weight_onednn";
  with_onednn_errors(fn, p, [&] {
    Plan& plan = get_plan(ConvOp::backward_weight, p, db != nullptr, x.channel_block(), dy.channel_block());
    std::vector<void*> ptrs = {act_ptr(x), act_ptr(dy),
                               plan.dw_scratch.data()};
    if (db) ptrs.push_back(plan.db_scratch.data());
    const std::vector<KeptPtr> given = {std::static_pointer_cast<Kept>(keep), dy_kept};
    run_plan(plan, ptrs, &given);
    // The scratch holds the gradient of the kernel as applied; with flip that is the rotated
    // kernel, so rotate it back while adding.
    // (Without flip one straight loop the compiler vectorises: the flip test inside the loop kept it
    // scalar, 3% of a ResNet-50 training step.)
    float* dwp = dw->data<float>();
    const float* sp = plan.dw_scratch.data();
    const int64_t rs = p.r * p.s, total = p.k * p.c * rs;
    if (!p.flip) {
      for (int64_t i = 0; i < total; ++i) dwp[i] += sp[i];
    } else {
      for (int64_t kc = 0; kc < p.k * p.c; ++kc)
        for (int64_t i = 0; i < rs; ++i) dwp[kc * rs + i] += sp[kc * rs + rs - 1 - i];
    }
    if (db) {
      float* dbp = db->data<float>();
      for (int64_t k = 0; k < p.k; ++k) dbp[k] += plan.db_scratch[static_cast<std::size_t>(k)];
    }
  });
}

// dy:(N,K,P,Q) w:(K,C,R,S) -> dx:(N,C,H,W) (=)
void conv2d_backward_data_onednn(const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  conv2d_backward_both_onednn(p, Tensor(), dy, w, &dx, nullptr, nullptr, nullptr);
}

// x:(N,C,H,W) dy:(N,K,P,Q) -> dw:(K,C,R,S) (+=), db:(K) or null (+=)
void conv2d_backward_weight_onednn(const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                                   Tensor* db) {
  // w is read only for dx, which is not asked for here: dw fills the argument
  conv2d_backward_both_onednn(p, x, dy, dw, nullptr, &dw, db, nullptr);
}

void register_conv2d_onednn(KernelRegistry& reg) {
  Conv2dKernel k;
  k.name = "onednn";
  k.supports_doc = "float32 (oneDNN has no float64 convolution), groups 1; a convolution that is a dense layer "
                   "(every output position meets every input position) as oneDNN matmuls";
  k.supports = [](const Conv2dParams& p, DType dt) { return dt == DType::f32 && p.groups == 1; };
  k.forward = conv2d_forward_onednn;
  k.backward_data = conv2d_backward_data_onednn;
  k.backward_weight = conv2d_backward_weight_onednn;
  k.forward_keep = conv2d_forward_keep_onednn;
  k.backward_both = conv2d_backward_both_onednn;
  k.channel_block = onednn_channel_block;
  k.algorithm = [](const Conv2dParams& p) {
    if (dense_plane(p)) return "gemm";
    return p.algorithm == ConvAlgorithm::winograd && winograd_forward(p) ? "winograd" : "direct";
  };
  reg.conv2d.at(KernelBackend::onednn) = k;
}

}  // namespace driftlab
