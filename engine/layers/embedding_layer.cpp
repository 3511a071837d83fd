#include "engine/layers/embedding_layer.h"

#include <cmath>
#include <sstream>

#include "engine/random.h"

namespace driftlab {
namespace {

template <typename T>
T uniform01(Rng& rng) {
  if constexpr (std::is_same_v<T, float>)
    return rng.uniform_f32();
  else
    return rng.uniform_f64();
}

// PyTorch normal_fill_16: 8 Box-Muller pairs from the 16 uniforms d[0..15], in T as PyTorch
// computes them (theta through double, as its 2.0f * c10::pi<double> * u2).
template <typename T>
void box_muller_16(T* d) {
  for (int j = 0; j < 8; ++j) {
    const T u1 = 1 - d[j];
    const T u2 = d[j + 8];
    const T radius = std::sqrt(-2 * std::log(u1));
    const T theta = static_cast<T>(2.0 * M_PI * static_cast<double>(u2));
    d[j] = radius * std::cos(theta);
    d[j + 8] = radius * std::sin(theta);
  }
}

template <typename T>
void fill_normal_torch(T* d, int64_t n, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) d[i] = uniform01<T>(rng);
  if (n >= 16) {
    for (int64_t i = 0; i + 16 <= n; i += 16) box_muller_16(d + i);
    if (n % 16 != 0) {
      T* tail = d + n - 16;
      for (int j = 0; j < 16; ++j) tail[j] = uniform01<T>(rng);
      box_muller_16(tail);
    }
    return;
  }
  for (int64_t i = 0; i < n; i += 2) {  // pairs (d[i], d[i+1]); an odd last one draws its u2
    const T u1 = 1 - d[i];
    const T u2 = i + 1 < n ? d[i + 1] : uniform01<T>(rng);
    const T radius = std::sqrt(-2 * std::log(u1));
    const T theta = static_cast<T>(2.0 * M_PI * static_cast<double>(u2));
    d[i] = radius * std::cos(theta);
    if (i + 1 < n) d[i + 1] = radius * std::sin(theta);
  }
}

}  // namespace

const char* embedding_init_name(EmbeddingInit init) {
  return init == EmbeddingInit::uniform_0p05 ? "uniform(-0.05,0.05)" : "normal(0,1)";
}

EmbeddingInit embedding_init_for(const Policy& policy) { return policy.embedding_init; }

void init_embedding(Tensor& table, EmbeddingInit init, Rng& rng) {
  dispatch_dtype(table.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = table.data<T>();
    if (init == EmbeddingInit::normal_1) {
      fill_normal_torch(d, table.numel(), rng);
    } else {
      for (int64_t i = 0; i < table.numel(); ++i) d[i] = rng.uniform<T>(T(-0.05), T(0.05));
    }
  });
}

EmbeddingLayer::EmbeddingLayer(const EmbeddingArgs& args, const Shape& in, const Policy& policy, Rng& rng)
    : num_ids_(args.num_ids),
      dim_(args.dim),
      steps_(in.size() == 1 ? in[0] : -1),
      init_(args.init.value_or(embedding_init_for(policy))) {
  check(in.size() == 1, "embedding: input must be token ids (steps,), got ", shape_str(in));
  check(num_ids_ >= 1, "embedding: num_ids=", num_ids_, " must be >= 1");
  check(num_ids_ <= (int64_t{1} << 24), "embedding: num_ids=", num_ids_,
        " exceeds 2^24, the largest id float32 inputs hold exactly");
  check(dim_ >= 1, "embedding: dim=", dim_, " must be >= 1");
  const DType dt = policy.dtype == FloatType::float64 ? DType::f64 : DType::f32;
  table_ = {"weight", Tensor({num_ids_, dim_}, dt), Tensor({num_ids_, dim_}, dt), false};
  init_embedding(table_.value, init_, rng);
}

std::string EmbeddingLayer::describe() const {
  std::ostringstream os;
  os << "embedding " << num_ids_ << "x" << dim_ << " [" << embedding_init_name(init_) << "]";
  return os.str();
}

std::vector<int64_t> EmbeddingLayer::read_ids(const Tensor& x) const {
  check_input("embedding", x, {steps_});
  const int64_t cells = x.dim(0) * steps_;
  std::vector<int64_t> ids(static_cast<std::size_t>(cells));
  for (int64_t i = 0; i < cells; ++i) {
    const double v = x.at(i);
    if (!(v >= 0 && v < static_cast<double>(num_ids_) && v == std::floor(v)))
      fail("embedding ", num_ids_, "x", dim_, ": id ", v, " at [", i / steps_, ",", i % steps_, "] of input ",
           shape_str(x.shape()), " is not an integer in 0..", num_ids_ - 1);
    ids[static_cast<std::size_t>(i)] = static_cast<int64_t>(v);
  }
  return ids;
}

StepMask EmbeddingLayer::padding_mask(const std::vector<int64_t>& ids, int64_t batch, int64_t steps) {
  StepMask mask;
  mask.batch = batch;
  mask.steps = steps;
  mask.keep.resize(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) mask.keep[i] = ids[i] != 0;
  return mask;
}

Tensor EmbeddingLayer::forward(RunContext& ctx, const Tensor& x) {
  std::vector<int64_t> ids = read_ids(x);
  const int64_t n = x.dim(0), cells = n * steps_;
  const DType dt = table_.value.dtype();
  Tensor y = Tensor::empty({n, steps_, dim_}, dt);
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* w = table_.value.data<T>();
    T* yd = y.data<T>();
    for (int64_t i = 0; i < cells; ++i) {
      const T* src = w + ids[static_cast<std::size_t>(i)] * dim_;
      std::copy(src, src + dim_, yd + i * dim_);
    }
  });
  ctx.step_mask = padding_mask(ids, n, steps_);
  if (ctx.record) {
    ids_ = std::move(ids);
    batch_ = n;
  } else {
    ids_.clear();
    batch_ = -1;
  }
  return y;
}

Tensor EmbeddingLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(batch_ >= 0, "embedding: backward without a recorded forward");
  check_shape("embedding backward", "dy", dy, {batch_, steps_, dim_});
  check_same_dtype("embedding backward", dy, table_.grad);
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    T* dw = table_.grad.data<T>();
    for (int64_t i = 0; i < batch_ * steps_; ++i) {
      T* row = dw + ids_[static_cast<std::size_t>(i)] * dim_;
      for (int64_t k = 0; k < dim_; ++k) row[k] += g[i * dim_ + k];
    }
  });
  const int64_t n = batch_;
  ids_.clear();  // the backward takes the recording (engine/layers/layer.h)
  batch_ = -1;
  if (!ctx.need_dx) return Tensor();
  return Tensor({n, steps_}, dy.dtype());  // zero: ids are not differentiable
}

}  // namespace driftlab
