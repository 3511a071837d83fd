// driftlab eval and driftlab predict: test accuracy, prediction time, logits of given inputs.
#include "cli/commands.h"
#include "cli/common.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/data/transform.h"
#include "engine/io/npy.h"
#include "engine/train/runner.h"
#include "quant/model_io.h"
#include "quant/report.h"

namespace driftlab {
namespace cli {
namespace {

void eval_cmd(const std::string& weights, const DataOptions& d, int64_t batch, int threads, const DeviceOptions& dev) {
  set_threads(threads);
  const Device device = dev.parsed();
  LoadedModel lm = quant::load_any_model(weights);
  Dataset test = load_split_for(lm, *d.loader, d, Split::test);
  check_data_fits(lm, weights, test);
  EvalResult r = open_runner(lm.model, device)->evaluate(test, batch);
  std::cout << "test accuracy " << fmt(r.accuracy, 4) << " loss " << fmt(r.loss, 4) << " on " << r.n << " images ("
            << lm.model.name << ", " << lm.model.policy.to_string() << ", " << dev.device << ")\n";
}

void predict_cmd(const std::string& weights, const DataOptions& d, const std::vector<int64_t>& sizes,
                 const std::string& input, const std::string& output, int threads, const DeviceOptions& dev,
                 int64_t max_batch) {
  set_threads(threads);
  const Device device = dev.parsed();  // rejects an unknown --device before any work
  check(max_batch >= 0, "predict: --max-batch ", max_batch, " must be >= 0");
  check(device == Device::cuda || max_batch == 0,
        "predict: --max-batch is for --device cuda (the CPU runs each size as one batch)");
  LoadedModel lm = quant::load_any_model(weights);
  if (!input.empty()) {
    Tensor x = read_npy(input);
    check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "predict: ", input, " holds ", dtype_name(x.dtype()),
          "; the model takes float32 or float64 inputs");
    check(x.rank() >= 1 && x.dim(0) >= 1, "predict: ", input, " has shape ", shape_str(x.shape()),
          ": no inputs to predict");
    if (const int64_t bad = first_nonfinite(x); bad >= 0)
      fail("predict: ", input, " holds ", value_at(x, bad), " at index ", bad, " (flat, C order); the inputs must be finite");
    Shape want{x.rank() ? x.dim(0) : 0};
    want.insert(want.end(), lm.model.input_shape.begin(), lm.model.input_shape.end());
    check(x.shape() == want, "predict: ", input, " has shape ", shape_str(x.shape()), ", model ", lm.model.name,
          " takes ", shape_str(want));
    normalise_for(lm, x);
    Tensor y = open_runner(lm.model, device)->logits(x, max_batch);
    check(!output.empty(), "predict: --input needs --output FILE.npy");
    write_npy(output, y);
    std::cout << "wrote logits " << shape_str(y.shape()) << " to " << output << "\n";
    return;
  }
  Dataset test = load_split_for(lm, *d.loader, d, Split::test);
  check_data_fits(lm, weights, test);
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  std::unique_ptr<Runner> runner = open_runner(lm.model, device);
  if (device == Device::cuda)
    std::cout << "prediction time (" << lm.model.name << ", " << lm.model.policy.to_string() << ", "
              << runner->describe()
              << (max_batch > 0 ? ", at most " + std::to_string(max_batch) + " inputs at a time" : std::string(", one batch"))
              << ")\n";
  else
    std::cout << "prediction time, one batch, best of 3 (" << lm.model.name << ", " << lm.model.policy.to_string()
              << ", " << omp_get_max_threads() << " threads, cpu)\n";
  for (int64_t n : sizes) {
    check(n >= 1 && n <= test.images.dim(0), "predict: size ", n, " is outside 1..", test.images.dim(0),
          " (the test set of ", test.name, ")");
    const PredictTime t = runner->time_prediction(gather_batch(test, idx, 0, n, lm.model.dtype()), max_batch);
    const double s = t.host_to_host_s;
    std::cout << "  " << std::setw(6) << n << " inputs: " << fmt(s, 6) << " s (" << fmt(n / s, 0) << " img/s)";
    if (device == Device::cuda) std::cout << " host to host";
    if (t.device_forward_s >= 0)
      std::cout << "; " << fmt(t.device_forward_s, 6) << " s (" << fmt(n / t.device_forward_s, 0)
                << " img/s) forward on device-resident input";
    std::cout << "\n";
  }
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
  auto pw = std::make_shared<std::string>(), pin = std::make_shared<std::string>(), pout = std::make_shared<std::string>();
  auto pd = std::make_shared<DataOptions>();
  auto psizes = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{1000, 10000});
  auto pt = std::make_shared<int>(0);
  auto* pr = app.add_subcommand("predict", "prediction time for N inputs in one batch, or logits of an .npy input");
  pr->add_option("--weights", *pw, "model file (.dlm)")->required();
  pr->add_option("--sizes", *psizes, "batch sizes to time")->delimiter(',')->capture_default_str();
  pr->add_option("--input", *pin, "an .npy array (N,C,H,W) to predict instead of timing");
  pr->add_option("--output", *pout, "where --input's logits go (.npy)");
  add_threads_option(pr, *pt);
  add_data_options(pr, *pd);
  auto pdev = std::make_shared<DeviceOptions>();
  auto pmax = std::make_shared<int64_t>(0);
  add_device_options(pr, *pdev);
  pr->add_option("--max-batch", *pmax, "cuda: run at most N inputs at a time and join the logits (0: all at once)");
  pr->callback([pw, pd, psizes, pin, pout, pt, pdev, pmax] {
    predict_cmd(*pw, *pd, *psizes, *pin, *pout, *pt, *pdev, *pmax);
  });
}

}  // namespace cli
}  // namespace driftlab
