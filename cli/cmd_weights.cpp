// driftlab weights export / import: parameters as .npy files in a framework's layout
// (driftlab/weights.h); here the options and the lines printed.
#include "cli/commands.h"
#include "cli/common.h"

#include <iostream>
#include <memory>

#include "driftlab/weights.h"

namespace driftlab {
namespace cli {

void register_weights(CLI::App& app) {
  // weights
  auto* wt = app.add_subcommand("weights", "exchange weights with Python as .npy files");
  wt->require_subcommand(1);
  auto ex = std::make_shared<WeightsExportRequest>();
  auto* wex = wt->add_subcommand("export", "write each parameter as DIR/<name>.npy");
  wex->add_option("--weights", ex->weights)->required();
  wex->add_option("--out", ex->out)->required();
  wex->add_flag("--driftlab-layout", ex->driftlab_layout, "OIHW/(out,in) instead of the policy's framework layout");
  wex->callback([ex] {
    for (const NpyFile& f : export_weights(*ex)) std::cout << f.path << " " << shape_str(f.shape) << "\n";
  });
  auto im = std::make_shared<WeightsImportRequest>();
  auto* wim = wt->add_subcommand("import", "build a model file from DIR/<name>.npy files");
  wim->add_option("--model", im->model)->required();
  wim->add_option("--policy", im->policy)->capture_default_str();
  wim->add_option("--from", im->from)->required();
  wim->add_option("--out", im->out)->required();
  wim->add_flag("--driftlab-layout", im->driftlab_layout,
                "the files are OIHW/(out,in) rather than the policy's framework layout");
  wim->callback([im] {
    import_weights(*im);
    std::cout << "wrote " << im->out << "\n";
  });
}

}  // namespace cli
}  // namespace driftlab
