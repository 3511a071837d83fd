// driftlab model show / list: a model's layers under a policy, and the zoo.
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

#include "driftlab/kinds.h"
#include "models/models.h"
#include "report/kinds.h"

namespace driftlab {
namespace cli {
namespace {

void model_show(const std::string& name, const std::string& spec) {
  Policy p = Policy::parse(spec);
  Model m = build_model(name, p, 1);
  std::cout << "model " << name << " under policy " << p.to_string() << "\n";
  std::cout << std::left << std::setw(4) << "#" << std::setw(54) << "layer" << std::setw(16) << "output"
            << "params\n";
  std::cout << std::setw(4) << "" << std::setw(54) << "input" << std::setw(16) << shape_str(m.input_shape) << "\n";
  for (std::size_t i = 0; i < m.net->size(); ++i) {
    Layer& l = m.net->layer(i);
    int64_t n = 0;
    for (Param* prm : l.params()) n += prm->value.numel();
    std::cout << std::setw(4) << i << std::setw(54) << l.describe() << std::setw(16) << shape_str(l.output_shape())
              << n << "\n";
  }
  std::cout << "trainable parameters: " << m.num_params() << "\n";
}

}  // namespace

void register_model(CLI::App& app) {
  // model
  auto* mod = app.add_subcommand("model", "inspect models");
  mod->require_subcommand(1);
  auto* mshow = mod->add_subcommand("show", "layers, output shapes and trainable-parameter count");
  auto mname = std::make_shared<std::string>(), mpol = std::make_shared<std::string>("torch");
  mshow->add_option("name", *mname, "see `driftlab model list`")->required();
  mshow->add_option("--policy", *mpol)->capture_default_str();
  mshow->callback([mname, mpol] { model_show(*mname, *mpol); });
  auto* mlist = mod->add_subcommand("list", "the models driftlab can build");
  mlist->callback([] {
    for (const auto& m : model_table()) std::cout << std::left << std::setw(10) << m.name << m.description << "\n";
  });
  auto* mkinds = mod->add_subcommand("kinds", "every layer kind against what handles it: CPU, CUDA, ONNX and TF.js "
                                              "export, ONNX import, int8 static and dynamic, re-parameterisation, "
                                              "the straight-through mirror");
  auto markdown = std::make_shared<bool>(false);
  mkinds->add_flag("--markdown", *markdown, "the Markdown block of docs/ARCHITECTURE.md");
  mkinds->callback([markdown] {
    const KindTable t = layer_kinds();
    std::cout << (*markdown ? report::kinds_markdown(t) : report::kinds_text(t));
  });
}

}  // namespace cli
}  // namespace driftlab
