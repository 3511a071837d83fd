#include "models/reparam.h"

#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/rnn_layer.h"
#include "engine/layers/weight_layout.h"
#include "models/models.h"

namespace driftlab {

void transfer_weights(const Model& src, Model& dst, bool convert) {
  check(src.name == dst.name && src.net->size() == dst.net->size(), "convert: cannot transfer weights of ", src.name,
        " into ", dst.name);
  const bool flip = convert && src.policy.conv_kernel_flip != dst.policy.conv_kernel_flip;
  const Shape* pending_flatten = nullptr;  // a flatten whose order change the next dense absorbs
  for (std::size_t i = 0; i < src.net->size(); ++i) {
    Layer& ls = src.net->layer(i);
    Layer& ld = dst.net->layer(i);
    check(ls.kind() == ld.kind(), "convert: layer ", i, " is ", ls.kind(), " in the source but ", ld.kind(),
          " in the destination");
    // Recurrent layers: the canonical layout already absorbs gate order and packing, so raw and
    // converted transfers agree; only the bias count can differ (two summed into one, or the
    // second zeroed), which RnnLayer's torch-layout setter does, and the LSTM peepholes (zero
    // in a destination with them when the source has none; refused the other way).
    if (auto* rs = dynamic_cast<RnnLayer*>(&ls)) {
      auto& rd = dynamic_cast<RnnLayer&>(ld);
      rd.set_torch_weights(rs->torch_weights());
      rd.set_peephole_weights(rs->peephole_weights());
      continue;
    }
    auto ps = ls.params(), pd = ld.params();
    check(ps.size() == pd.size(), "convert: layer ", i, " (", ls.kind(), ") has ", ps.size(),
          " parameters in the source but ", pd.size(), " in the destination");
    for (std::size_t j = 0; j < ps.size(); ++j) {
      Tensor v = ps[j]->value.to(dst.dtype());
      if (flip && ls.kind() == "conv2d" && !ps[j]->is_bias) v = rotate_180(v);
      if (pending_flatten && ls.kind() == "dense" && !ps[j]->is_bias)
        v = permute_columns(v, *pending_flatten, src.policy.flatten_order, dst.policy.flatten_order);
      check_shape("convert", pd[j]->name.c_str(), v, pd[j]->value.shape());
      pd[j]->value = v;
    }
    // Running mean and variance carry over (buffers 0 and 1 of a BatchNorm); the zero-debias
    // state of TF-style averaging is training state and starts afresh in the destination.
    auto bs = ls.buffers(), bd = ld.buffers();
    if (ls.kind() == "batchnorm") {
      check(src.policy.bn_running_var == dst.policy.bn_running_var ||
                (src.policy.bn_running_var != BnRunningVar::lasagne_inv_std &&
                 dst.policy.bn_running_var != BnRunningVar::lasagne_inv_std),
            "convert: running inverse-std (lasagne_inv_std) and running variance are not interchangeable yet");
      for (std::size_t j = 0; j < 2; ++j) bd[j]->value = bs[j]->value.to(dst.dtype());
    }
    if (ls.kind() == "dense") pending_flatten = nullptr;
    if (auto* f = dynamic_cast<FlattenLayer*>(&ls))
      if (convert && src.policy.flatten_order != dst.policy.flatten_order && f->input_shape().size() == 3)
        pending_flatten = &f->input_shape();
  }
}

Model rebuild_under(const Model& src, const Policy& policy, bool convert) {
  Model m = build_model(src.name, policy, 0, model_args(src));
  transfer_weights(src, m, convert);
  return m;
}

}  // namespace driftlab
