// What oneDNN's Winograd convolution would give ResNet-20's and VGG-16's 3x3 stride-1 layers
// against the direct algorithm driftlab runs (issue 43: "the convolutions checked against the best
// oneDNN can do on this ISA"). driftlab's conv2d kernel, as PyTorch's mkldnn convolution
// (ideep's default, alg:convolution_direct under ONEDNN_VERBOSE), creates direct primitives;
// oneDNN 2.6 also has F(4x4, 3x3) Winograd primitives (jit_wino_4x3) for all three passes on
// AVX-512, which do fewer multiplications and round differently. This suite times both on the same
// shapes, each primitive in the layouts it chooses (format any, as driftlab's blocked activations),
// and measures each one's forward error first (batch 2, against the sum in long double).
//
// Counters: FLOP/s of the direct algorithm's count (2 per multiply-add, padding taps included;
// above the machine's FMA limit only an algorithm doing fewer multiplications can go),
// err_rel = the largest |y - exact| over the largest sum_{c,r,s} |x w| of an output (the scale of
// a dot product's rounding error), impl_wino = 1 where oneDNN ran jit_wino_4x3.
//
// Run: bm_conv_algorithms --benchmark_filter='vgg16' (OMP_NUM_THREADS=2 as bench/compare).
// Not driftlab's kernel: a probe of the library, as bm_peak is of the machine.
#include <benchmark/benchmark.h>

#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::memory;

struct Shape3x3 {
  const char* name;
  int ic, oc, hw;
};

// The 3x3 stride-1 pad-1 layers of the two models at 32x32 inputs (VGG-16's 2x2 layers run as
// dense layers in driftlab, docs/BENCHMARKS.md 1a31286; the stride-2 ones have no Winograd).
const Shape3x3 kShapes[] = {
    {"resnet20_16x32", 16, 16, 32},  {"resnet20_32x16", 32, 32, 16},    {"resnet20_64x8", 64, 64, 8},
    {"vgg16_3to64x32", 3, 64, 32},   {"vgg16_64x32", 64, 64, 32},       {"vgg16_64to128x16", 64, 128, 16},
    {"vgg16_128x16", 128, 128, 16},  {"vgg16_128to256x8", 128, 256, 8}, {"vgg16_256x8", 256, 256, 8},
    {"vgg16_256to512x4", 256, 512, 4}, {"vgg16_512x4", 512, 512, 4},
};

enum class Pass { forward, backward_data, backward_weights };

dnnl::engine& eng() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

float value(int64_t i, double a) { return static_cast<float>(std::sin(a * static_cast<double>(i) + 0.3)); }

// A memory in md's layout holding the plain (nchw / oihw) values f(i).
memory filled(const memory::desc& md, const memory::dims& dims, memory::format_tag plain, double a) {
  memory::desc pmd(dims, memory::data_type::f32, plain);
  memory p(pmd, eng());
  float* d = static_cast<float*>(p.get_data_handle());
  const int64_t n = static_cast<int64_t>(pmd.get_size() / sizeof(float));
  for (int64_t i = 0; i < n; ++i) d[i] = value(i, a);
  if (md == pmd) return p;
  memory m(md, eng());
  dnnl::stream s(eng());
  dnnl::reorder(p, m).execute(s, p, m);
  s.wait();
  return m;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Shape3x3& sh, int n, dnnl::algorithm alg) {
  const auto any = memory::format_tag::any;
  const auto f32 = memory::data_type::f32;
  memory::desc x({n, sh.ic, sh.hw, sh.hw}, f32, any), w({sh.oc, sh.ic, 3, 3}, f32, any),
      b({sh.oc}, f32, memory::format_tag::a), y({n, sh.oc, sh.hw, sh.hw}, f32, any);
  return dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, x, w, b, y, {1, 1}, {1, 1}, {1, 1}),
      eng());
}

// The forward's largest error over the largest absolute dot product, batch 2 (see the file comment).
double forward_error(const Shape3x3& sh, dnnl::algorithm alg) {
  const int n = 2;
  auto pd = forward_pd(sh, n, alg);
  const memory::dims xd{n, sh.ic, sh.hw, sh.hw}, wd{sh.oc, sh.ic, 3, 3}, yd{n, sh.oc, sh.hw, sh.hw};
  memory x = filled(pd.src_desc(), xd, memory::format_tag::nchw, 0.7);
  memory w = filled(pd.weights_desc(), wd, memory::format_tag::oihw, 0.37);
  memory b = filled(pd.bias_desc(), {sh.oc}, memory::format_tag::a, 0.0);  // sin(0.3): one constant
  memory y(pd.dst_desc(), eng());
  dnnl::stream s(eng());
  dnnl::convolution_forward(pd).execute(
      s, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}});
  memory yp(memory::desc(yd, memory::data_type::f32, memory::format_tag::nchw), eng());
  dnnl::reorder(y, yp).execute(s, y, yp);
  s.wait();
  const float* got = static_cast<const float*>(yp.get_data_handle());
  double worst = 0, scale = 0;
  const int H = sh.hw;
  for (int in = 0; in < n; ++in)
    for (int k = 0; k < sh.oc; ++k)
      for (int p = 0; p < H; ++p)
        for (int q = 0; q < H; ++q) {
          long double sum = value(0, 0.0), abs_sum = std::fabs(value(0, 0.0));  // the bias
          for (int c = 0; c < sh.ic; ++c)
            for (int r = 0; r < 3; ++r)
              for (int t = 0; t < 3; ++t) {
                const int ih = p - 1 + r, iw = q - 1 + t;
                if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
                const long double xv = value(((int64_t(in) * sh.ic + c) * H + ih) * H + iw, 0.7);
                const long double wv = value(((int64_t(k) * sh.ic + c) * 3 + r) * 3 + t, 0.37);
                sum += xv * wv;
                abs_sum += std::fabs(xv * wv);
              }
          const int64_t o = ((int64_t(in) * sh.oc + k) * H + p) * H + q;
          worst = std::max(worst, static_cast<double>(std::fabs(got[o] - sum)));
          scale = std::max(scale, static_cast<double>(abs_sum));
        }
  return worst / scale;
}

void bm(benchmark::State& state, Shape3x3 sh, dnnl::algorithm alg, Pass pass) {
  const int n = 128;
  dnnl::convolution_forward::primitive_desc fpd;
  try {
    fpd = forward_pd(sh, n, alg);
  } catch (const dnnl::error& e) {
    state.SkipWithError(("no primitive: " + std::string(e.what())).c_str());
    return;
  }
  const bool wino = std::strstr(fpd.impl_info_str(), "wino") != nullptr;
  const double err = forward_error(sh, alg);
  const auto any = memory::format_tag::any;
  const auto f32 = memory::data_type::f32;
  memory::desc x({n, sh.ic, sh.hw, sh.hw}, f32, any), w({sh.oc, sh.ic, 3, 3}, f32, any),
      b({sh.oc}, f32, memory::format_tag::a), y({n, sh.oc, sh.hw, sh.hw}, f32, any);
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  auto mem = [](const memory::desc& md) {
    memory m(md, eng());
    std::memset(m.get_data_handle(), 0, md.get_size());
    float* d = static_cast<float*>(m.get_data_handle());
    for (size_t i = 0; i < md.get_size() / sizeof(float); ++i) d[i] = value(static_cast<int64_t>(i), 0.7);
    return m;
  };
  const char* impl = fpd.impl_info_str();
  if (pass == Pass::forward) {
    prim = dnnl::convolution_forward(fpd);
    args = {{DNNL_ARG_SRC, mem(fpd.src_desc())}, {DNNL_ARG_WEIGHTS, mem(fpd.weights_desc())},
            {DNNL_ARG_BIAS, mem(fpd.bias_desc())}, {DNNL_ARG_DST, mem(fpd.dst_desc())}};
  } else if (pass == Pass::backward_data) {
    dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(alg, x, w, y, {1, 1}, {1, 1}, {1, 1}), eng(), fpd);
    impl = pd.impl_info_str();
    prim = dnnl::convolution_backward_data(pd);
    args = {{DNNL_ARG_DIFF_SRC, mem(pd.diff_src_desc())}, {DNNL_ARG_WEIGHTS, mem(pd.weights_desc())},
            {DNNL_ARG_DIFF_DST, mem(pd.diff_dst_desc())}};
  } else {
    dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(alg, x, w, b, y, {1, 1}, {1, 1}, {1, 1}), eng(), fpd);
    impl = pd.impl_info_str();
    prim = dnnl::convolution_backward_weights(pd);
    args = {{DNNL_ARG_SRC, mem(pd.src_desc())}, {DNNL_ARG_DIFF_WEIGHTS, mem(pd.diff_weights_desc())},
            {DNNL_ARG_DIFF_BIAS, mem(pd.diff_bias_desc())}, {DNNL_ARG_DIFF_DST, mem(pd.diff_dst_desc())}};
  }
  dnnl::stream s(eng());
  prim.execute(s, args);  // warm-up: the first call's page faults
  s.wait();
  for (auto _ : state) {
    prim.execute(s, args);
    s.wait();
  }
  const double flops = 2.0 * n * sh.ic * sh.oc * sh.hw * sh.hw * 9;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["err_rel"] = err;
  state.counters["impl_wino"] = wino ? 1 : 0;
  state.SetLabel(impl);
}

int register_all() {
  for (const Shape3x3& sh : kShapes)
    for (Pass pass : {Pass::forward, Pass::backward_data, Pass::backward_weights})
      for (dnnl::algorithm alg : {dnnl::algorithm::convolution_direct, dnnl::algorithm::convolution_winograd}) {
        const std::string name = std::string(pass == Pass::forward         ? "forward/"
                                             : pass == Pass::backward_data ? "backward_data/"
                                                                           : "backward_weights/") +
                                 (alg == dnnl::algorithm::convolution_direct ? "direct/" : "winograd/") + sh.name;
        benchmark::RegisterBenchmark(name.c_str(), bm, sh, alg, pass)->Unit(benchmark::kMillisecond)->UseRealTime();
      }
  return 0;
}
const int registered = register_all();

}  // namespace
