#include "driftlab/quantize.h"

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/io/npy.h"
#include "quant/dynamic.h"
#include "quant/model_io.h"
#include "train/run.h"

namespace driftlab {

QuantizeResult quantize(const QuantizeRequest& r, DatasetLoader& loader) {
  check(!r.out.empty(), "quantize: --out Q.dlm is required");
  QuantizeResult q;
  q.fp32 = open_model(r.weights);
  LoadedModel& lm = q.fp32.loaded;
  check(!q.fp32.int8(), "quantize: ", r.weights, " is already an int8 model");
  // The policy: the model's, with the toolchain's quant group, then the knobs, then the observer.
  Policy policy = lm.model.policy;
  policy.set("quant_scheme", r.scheme);
  if (!r.knobs.empty()) policy = Policy::parse(policy.to_string() + "," + r.knobs);
  if (!r.observer.empty()) policy.set("quant_observer", r.observer);
  check(r.mode == "auto" || r.mode == "static" || r.mode == "dynamic", "quantize: --mode ", r.mode,
        " (allowed: auto, static, dynamic)");
  q.dynamic = r.mode == "dynamic" || (r.mode == "auto" && quant::needs_dynamic(lm.model));
  check(!(r.mode == "static" && quant::needs_dynamic(lm.model)), "quantize: ", lm.model.name, " has LSTM/GRU layers, "
        "which have no static int8 form here; use --mode dynamic (weights-only, PyTorch quantize_dynamic)");
  q.model = lm.model.name;
  q.policy = policy.to_string();
  if (q.dynamic) {
    check(r.calib_data.empty(), "quantize: --calib-data is for static quantization; dynamic quantization "
          "chooses each input's scale at run time");
    q.int8.model = quant::quantize_dynamic(lm.model, policy);
    nlohmann::json quantized = {{"scheme", r.scheme}, {"mode", "dynamic"}, {"from", r.weights}};
    quant::save_quantized_model(r.out, q.int8.model, lm.metadata, quantized);
    return q;
  }
  // Calibration samples: the given file, or the first N training samples in file order.
  Tensor calib;
  if (!r.calib_data.empty()) {
    calib = read_npy(r.calib_data);
    check(calib.dtype() == DType::f32, "quantize: ", r.calib_data, " holds ", dtype_name(calib.dtype()),
          ", calibration data must be float32");
    normalise_for(lm, calib);
    q.calibration = r.calib_data;
  } else {
    check(r.calib > 0, "quantize: --calib ", r.calib, " must be positive");
    calib = first_training_samples(lm, loader, r.data, r.calib, &q.calibration);
  }
  q.calibration_samples = calib.dim(0);
  quant::PtqOptions po;
  po.calib_batch = r.calib_batch;
  q.int8 = quant::quantize_model(lm.model, policy, calib, po);
  nlohmann::json quantized = {{"scheme", r.scheme},
                              {"observer", policy.get("quant_observer")},
                              {"calibration", q.calibration},
                              {"calibration_samples", calib.dim(0)},
                              {"calibration_batch", r.calib_batch},
                              {"from", r.weights}};
  quant::save_quantized_model(r.out, q.int8.model, lm.metadata, quantized);
  return q;
}

QuantizeReport quantize_report(const QuantizeRequest& r, QuantizeResult& q, DatasetLoader& loader, int64_t inputs) {
  const Dataset test = load_data(q.fp32, loader, r.data, Split::test);
  Model& fp = q.fp32.model();
  SavedModel qm = open_model(r.out);  // what was written is what is reported
  std::unique_ptr<Runner> run_fp = open_runner(fp, Device::cpu), run_q = open_runner(qm.model(), Device::cpu);
  QuantizeReport rep;
  rep.fp32 = run_fp->evaluate(test, 256);
  rep.int8 = run_q->evaluate(test, 256);
  rep.inputs = std::min<int64_t>(inputs, test.images.dim(0));
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const Tensor x = gather_batch(test, idx, 0, rep.inputs, DType::f32);
  rep.sqnr = q.dynamic ? quant::layer_sqnr_dynamic(fp, qm.model(), x) : quant::layer_sqnr(fp, q.int8, x);
  const Tensor all = gather_batch(test, idx, 0, test.images.dim(0), DType::f32);
  const std::vector<int32_t> pf = quant::predictions(run_fp->logits(all)), pq = quant::predictions(run_q->logits(all));
  for (std::size_t i = 0; i < pf.size(); ++i) rep.disagree += pf[i] != pq[i];
  rep.compared = static_cast<int64_t>(pf.size());
  const PredictTime tf = run_fp->time_prediction(x), tq = run_q->time_prediction(x);
  rep.fp32_s = tf.host_to_host_s;
  rep.int8_s = tq.host_to_host_s;
  rep.threads = omp_get_max_threads();
  rep.fp32_bytes = std::filesystem::file_size(r.weights);
  rep.int8_bytes = std::filesystem::file_size(r.out);
  rep.model = fp.name;
  rep.fp32_policy = fp.policy.to_string();
  rep.int8_policy = q.policy;
  rep.scheme = r.scheme;
  rep.mode = q.dynamic ? "dynamic" : "static";
  rep.calibration = q.dynamic ? std::string("none (dynamic: per-call input scales)") : q.calibration;
  rep.test_set = test.name;
  return rep;
}

}  // namespace driftlab
