#include "engine/train/nonfinite.h"

#include "engine/layers/math_mode.h"

#include <cmath>
#include <sstream>

namespace driftlab {

OnNonFinite parse_on_nonfinite(const std::string& s) {
  if (s == "stop") return OnNonFinite::stop;
  if (s == "skip-batch") return OnNonFinite::skip_batch;
  fail("train: --on-nonfinite '", s, "' (allowed: stop, skip-batch)");
}

const char* on_nonfinite_name(OnNonFinite m) { return m == OnNonFinite::stop ? "stop" : "skip-batch"; }

int64_t first_nonfinite(const Tensor& t) {
  return dispatch_dtype(t.dtype(), [&](auto tag) -> int64_t {
    using T = decltype(tag);
    const T* d = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(d[i])) return i;
    return -1;
  });
}

namespace {

// "output[17] (sample 2) is nan"
std::string element(const char* what, const Tensor& t, int64_t i) {
  std::ostringstream os;
  const int64_t per = t.rank() > 0 && t.dim(0) > 0 ? t.numel() / t.dim(0) : 1;
  os << what << "[" << i << "] (sample " << i / per << ") is " << t.at(i);
  return os.str();
}

}  // namespace

std::string locate_nonfinite_forward(const Model& model, ExecContext& exec, const Tensor& x) {
  Tensor h = x.dtype() == model.dtype() ? x : x.to(model.dtype());
  if (int64_t i = first_nonfinite(h); i >= 0) return element("input batch", h, i);
  RunContext ctx = RunContext::inference(exec);
  Sequential& net = *model.net;
  for (std::size_t l = 0; l < net.size(); ++l) {
    h = net.layer(l).forward(ctx, h);
    round_to_format(h, net.output_format(l));  // as Sequential::forward: autocast's float16 overflows here
    const int64_t i = first_nonfinite(h);
    if (i < 0) continue;
    std::ostringstream os;
    os << "layer " << l << " (" << net.layer(l).describe() << ") " << element("output", h, i);
    std::string bad_weight;
    for (Param* p : net.layer(l).params())
      if (int64_t j = first_nonfinite(p->value); j >= 0 && bad_weight.empty())
        bad_weight = std::to_string(l) + "." + net.layer(l).kind() + "." + p->name + "[" + std::to_string(j) + "]";
    os << (bad_weight.empty() ? "; its weights are finite" : "; its weight " + bad_weight + " is not finite");
    return os.str();
  }
  return "";
}

}  // namespace driftlab
