// driftlab eval and driftlab predict: test accuracy, prediction time, logits of given inputs
// (driftlab/evaluate.h); here the options and the lines printed.
#include "cli/commands.h"
#include "cli/common.h"

#include <iomanip>
#include <iostream>
#include <memory>

#include "driftlab/evaluate.h"
#include "engine/io/npy.h"

namespace driftlab {
namespace cli {
namespace {

void eval_cmd(const std::string& weights, const DataOptions& d, int64_t batch, int threads, const DeviceOptions& dev) {
  set_threads(threads);
  EvalRequest r;
  r.weights = weights;
  r.data = d;
  r.batch = batch;
  r.device = dev.device;
  const Evaluation e = evaluate(r, *d.loader);
  std::cout << "test accuracy " << fmt(e.test.accuracy, 4) << " loss " << fmt(e.test.loss, 4) << " on " << e.test.n
            << " images (" << e.model << ", " << e.policy << ", " << dev.device << ")\n";
}

void predict_cmd(const PredictRequest& r, const std::string& output, int threads, const DataOptions& d) {
  set_threads(threads);
  if (!r.input.empty()) {
    const Tensor y = predict_logits(r);
    check(!output.empty(), "predict: --input needs --output FILE.npy");
    write_npy(output, y);
    std::cout << "wrote logits " << shape_str(y.shape()) << " to " << output << "\n";
    return;
  }
  PredictTimingHooks hooks;
  hooks.on_start = [](const PredictTiming& t) {
    if (t.device == Device::cuda)
      std::cout << "prediction time (" << t.model << ", " << t.policy << ", " << t.runner
                << (t.max_batch > 0 ? ", at most " + std::to_string(t.max_batch) + " inputs at a time"
                                    : std::string(", one batch"))
                << ")\n";
    else
      std::cout << "prediction time, one batch, best of 3 (" << t.model << ", " << t.policy << ", " << t.threads
                << " threads, cpu)\n";
  };
  const bool cuda = r.device == "cuda";
  hooks.on_row = [cuda](const PredictTimingRow& row) {
    const int64_t n = row.inputs;
    const double s = row.time.host_to_host_s;
    std::cout << "  " << std::setw(6) << n << " inputs: " << fmt(s, 6) << " s (" << fmt(n / s, 0) << " img/s)";
    if (cuda) std::cout << " host to host";
    if (row.time.device_forward_s >= 0)
      std::cout << "; " << fmt(row.time.device_forward_s, 6) << " s (" << fmt(n / row.time.device_forward_s, 0)
                << " img/s) forward on device-resident input";
    std::cout << "\n";
  };
  time_predictions(r, *d.loader, hooks);
  print_tensor_memory_peak();
}

}  // namespace

void register_eval(CLI::App& app) {
  // eval
  auto ew = std::make_shared<std::string>();
  auto ed = std::make_shared<DataOptions>();
  auto eb = std::make_shared<int64_t>(1000);
  auto et = std::make_shared<int>(0);
  auto* ev = app.add_subcommand("eval", "test accuracy of a saved model");
  ev->add_option("--weights", *ew, "model file (.dlm)")->required();
  ev->add_option("--batch", *eb)->capture_default_str();
  add_threads_option(ev, *et);
  add_data_options(ev, *ed);
  auto edev = std::make_shared<DeviceOptions>();
  add_device_options(ev, *edev);
  ev->callback([ew, ed, eb, et, edev] { eval_cmd(*ew, *ed, *eb, *et, *edev); });

  // predict
  auto pr_req = std::make_shared<PredictRequest>();
  auto pout = std::make_shared<std::string>();
  auto pd = std::make_shared<DataOptions>();
  auto pt = std::make_shared<int>(0);
  auto* pr = app.add_subcommand("predict", "prediction time for N inputs in one batch, or logits of an .npy input");
  pr->add_option("--weights", pr_req->weights, "model file (.dlm)")->required();
  pr->add_option("--sizes", pr_req->sizes, "batch sizes to time")->delimiter(',')->capture_default_str();
  pr->add_option("--input", pr_req->input, "an .npy array (N,C,H,W) to predict instead of timing");
  pr->add_option("--output", *pout, "where --input's logits go (.npy)");
  add_threads_option(pr, *pt);
  add_data_options(pr, *pd);
  auto pdev = std::make_shared<DeviceOptions>();
  add_device_options(pr, *pdev);
  pr->add_option("--max-batch", pr_req->max_batch, "cuda: run at most N inputs at a time and join the logits (0: all at once)");
  pr->callback([pr_req, pd, pout, pt, pdev] {
    PredictRequest r = *pr_req;
    r.data = *pd;
    r.device = pdev->device;
    predict_cmd(r, *pout, *pt, *pd);
  });
}

}  // namespace cli
}  // namespace driftlab
