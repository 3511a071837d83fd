// onednn_postops: can a oneDNN convolution carry driftlab's BatchNorm (inference) and ReLU as
// post-ops and still give driftlab's bits? Runs one 3x3 convolution (pad 1) plain and with the
// post-ops binary_sub(mean), binary_mul(invstd), binary_mul(gamma), binary_add(beta),
// eltwise_relu(alpha 0), and compares the second with driftlab's formulas applied to the first:
// gamma * ((z - mean) * invstd) + beta, then relu_value (core/ops/activation.h: NaN stays NaN).
// With NANX set (to anything, even empty), one input pixel is NaN; ACT picks the ReLU's post-op
// (below). Prints the differing outputs and the NaN outputs of each.
// docs/BENCHMARKS.md ("A Zen 4 machine") has what it printed. Standalone (not built by CMake):
//
//   g++ -O2 -march=native -ffp-contract=off bench/kprof/onednn_postops.cpp -o /tmp/onednn_postops -ldnnl
//   OMP_NUM_THREADS=2 /tmp/onednn_postops C K HW N   (e.g. 16 16 32 128; NANX=1 ... for the NaN case)
#include <oneapi/dnnl/dnnl.hpp>
#include <cstdio>
#include <string>
#include <cstring>
#include <vector>
#include <random>
#include <cmath>
#include <chrono>
using namespace dnnl;
using Tag = memory::format_tag;
int main(int argc, char** argv) {
  int N = 64, C = 16, H = 32, W = 32, K = 16;
  if (argc > 1) { C = atoi(argv[1]); K = atoi(argv[2]); H = W = atoi(argv[3]); N = atoi(argv[4]); }
  // ACT: the post-op after BatchNorm's four: relu (eltwise_relu, alpha 0), max (binary_max with a
  // per-channel zero tensor) or none (BatchNorm alone).
  const std::string act = getenv("ACT") ? getenv("ACT") : "relu";
  engine eng(engine::kind::cpu, 0); stream s(eng);
  auto f32 = memory::data_type::f32;
  memory::dims xd{N,C,H,W}, wd{K,C,3,3}, yd{N,K,H,W}, cd{1,K,1,1};
  std::mt19937 g(1); std::uniform_real_distribution<float> u(-1,1);
  std::vector<float> x(N*C*H*W), w(K*C*9), rm(K), inv(K), ga(K), be(K), zeros(K, 0.f);
  for (auto& v : x) v = u(g);
  if (getenv("NANX")) x[5*W+5] = NAN;  // image 0, channel 0, row 5, col 5
  for (auto& v : w) v = u(g)*0.2f;
  for (int k = 0; k < K; ++k) { rm[k] = u(g); float rv = 0.5f + std::fabs(u(g)); inv[k] = 1.0f/std::sqrt(rv + 1e-5f); ga[k] = 1+0.5f*u(g); be[k] = u(g); }
  auto mk = [&](bool post) {
    primitive_attr attr;
    if (post) {
      post_ops po;
      memory::desc cmd(cd, f32, Tag::nchw);
      po.append_binary(algorithm::binary_sub, cmd);
      po.append_binary(algorithm::binary_mul, cmd);
      po.append_binary(algorithm::binary_mul, cmd);
      po.append_binary(algorithm::binary_add, cmd);
      if (act == "relu") po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
      if (act == "max") po.append_binary(algorithm::binary_max, cmd);  // max with a per-channel 0
      attr.set_post_ops(po);
    }
    convolution_forward::primitive_desc pd({prop_kind::forward_inference, algorithm::convolution_direct,
      memory::desc(xd,f32,Tag::any), memory::desc(wd,f32,Tag::any), memory::desc(), memory::desc(yd,f32,Tag::any),
      {1,1},{0,0},{1,1},{1,1}}, attr, eng);
    return pd;
  };
  auto run = [&](bool post, std::vector<float>& out, double& ms) {
    auto pd = mk(post);
    printf("%s impl %s\n", post ? "post" : "plain", pd.impl_info_str());
    memory xu({xd,f32,Tag::nchw}, eng, x.data()), wu({wd,f32,Tag::oihw}, eng, w.data());
    memory xp(pd.src_desc(), eng), wp(pd.weights_desc(), eng), yp(pd.dst_desc(), eng);
    reorder(xu, xp).execute(s, xu, xp); reorder(wu, wp).execute(s, wu, wp);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xp},{DNNL_ARG_WEIGHTS, wp},{DNNL_ARG_DST, yp}};
    memory::desc cmd(cd, f32, Tag::nchw);
    std::vector<memory> keep;
    if (post) {
      float* vs[5] = {rm.data(), inv.data(), ga.data(), be.data(), zeros.data()};
      for (int i = 0; i < (act == "max" ? 5 : 4); ++i) { keep.emplace_back(cmd, eng, vs[i]); args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1] = keep.back(); }
    }
    convolution_forward conv(pd);
    conv.execute(s, args); s.wait();
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 10; ++r) conv.execute(s, args);
    s.wait();
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now()-t0).count()/10;
    out.resize(N*K*H*W);
    memory yu({yd,f32,Tag::nchw}, eng, out.data());
    reorder(yp, yu).execute(s, yp, yu); s.wait();
  };
  std::vector<float> a, b; double ta, tb;
  run(false, a, ta); run(true, b, tb);
  // apply BN+relu to a as driftlab does
  long diff = 0;
  for (int n = 0; n < N; ++n) for (int k = 0; k < K; ++k) for (int i = 0; i < H*W; ++i) {
    long idx = ((long)n*K + k)*H*W + i;
    float z = ga[k] * ((a[idx] - rm[k]) * inv[k]) + be[k];
    float y = act == "none" || z > 0 || z != z ? z : 0.f;
    diff += std::memcmp(&y, &b[idx], 4) != 0;
  }
  { long nan_a = 0, nan_b = 0, zero_b = 0; for (long i = 0; i < (long)a.size(); ++i) { float z0 = a[i]; nan_a += z0 != z0; nan_b += b[i] != b[i]; }
    printf("NaN outputs: conv %ld, conv+BN+relu post-ops %ld\n", nan_a, nan_b); }
  printf("N %d C %d K %d HW %d: differing %ld of %ld; conv %.3f ms, conv+post %.3f ms\n", N, C, K, H, diff, (long)N*K*H*W, ta, tb);
}
