// driftlab weights export / import: parameters as .npy files in a framework's layout.
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

#include "core/ops/common.h"
#include "engine/io/npy.h"
#include "models/model_file.h"
#include "models/models.h"
#include "models/weights_npy.h"
#include "quant/model_io.h"

namespace driftlab {
namespace cli {
namespace {

namespace fs = std::filesystem;

void weights_export(const std::string& weights, const std::string& dir, NpyLayout layout) {
  LoadedModel lm = quant::load_any_model(weights);
  for (const NpyFile& f : export_weights_npy(lm.model, dir, layout))
    std::cout << f.path << " " << shape_str(f.shape) << "\n";
}

void weights_import(const std::string& model_name, const std::string& spec, const std::string& dir,
                    const std::string& out, NpyLayout layout) {
  Model m = build_model(model_name, Policy::parse(spec), 1);
  import_weights_npy(m, dir, layout);
  // The files passed their shape checks; a NaN or infinity in them would be a model that
  // trains and predicts NaN, so it is refused here naming the file and the index in it.
  for (const auto& np : m.net->named_params()) {
    const std::string path = (fs::path(dir) / (np.first + ".npy")).string();
    const Tensor t = read_npy(path);
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64) continue;
    if (const int64_t bad = first_nonfinite(t); bad >= 0)
      fail("weights import: ", path, " holds ", value_at(t, bad), " at index ", bad, " (flat, C order, shape ",
           shape_str(t.shape()), "); nothing written to ", out);
    // Finite in the file, but not in the model's dtype: a float64 beyond float32's range.
    if (const int64_t bad = first_nonfinite(np.second->value); bad >= 0)
      fail("weights import: ", path, " holds a value beyond the range of the model's ", dtype_name(m.dtype()),
           " (", np.first, "[", bad, "] would be ", value_at(np.second->value, bad), "); nothing written to ", out);
  }
  save_model(out, m, {{"imported_from", dir}});
  std::cout << "wrote " << out << "\n";
}

}  // namespace

void register_weights(CLI::App& app) {
  // weights
  auto* wt = app.add_subcommand("weights", "exchange weights with Python as .npy files");
  wt->require_subcommand(1);
  auto xw = std::make_shared<std::string>(), xdir = std::make_shared<std::string>();
  auto xdl = std::make_shared<bool>(false);
  auto* wex = wt->add_subcommand("export", "write each parameter as DIR/<name>.npy");
  wex->add_option("--weights", *xw)->required();
  wex->add_option("--out", *xdir)->required();
  wex->add_flag("--driftlab-layout", *xdl, "OIHW/(out,in) instead of the policy's framework layout");
  wex->callback([xw, xdir, xdl] {
    weights_export(*xw, *xdir, *xdl ? NpyLayout::driftlab : NpyLayout::framework);
  });
  auto im = std::make_shared<std::string>(), ip = std::make_shared<std::string>("torch"),
       idir = std::make_shared<std::string>(), iout = std::make_shared<std::string>();
  auto idl = std::make_shared<bool>(false);
  auto* wim = wt->add_subcommand("import", "build a model file from DIR/<name>.npy files");
  wim->add_option("--model", *im)->required();
  wim->add_option("--policy", *ip)->capture_default_str();
  wim->add_option("--from", *idir)->required();
  wim->add_option("--out", *iout)->required();
  wim->add_flag("--driftlab-layout", *idl, "the files are OIHW/(out,in) rather than the policy's framework layout");
  wim->callback([im, ip, idir, iout, idl] {
    weights_import(*im, *ip, *idir, *iout, *idl ? NpyLayout::driftlab : NpyLayout::framework);
  });
}

}  // namespace cli
}  // namespace driftlab
