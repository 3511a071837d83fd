// The subcommands of the driftlab command, one file per command or family (cli/cmd_<name>.cpp; e.g.
// cmd_convert.cpp registers export, import, localise, convert and convert-report): each registers its
// options and a callback that runs it (callbacks throw driftlab::Error; main maps them to exit
// codes). To add a command: 1) cli/cmd_<name>.cpp with register_<name>, wiring options and printing
// only (what it computes lives in the library face, driftlab/); 2) its declaration here; 3) its call
// in register_commands (cli/commands.cpp), in the order `driftlab --help` lists them.
#pragma once
#include <CLI/CLI.hpp>

namespace driftlab {
namespace cli {

void register_commands(CLI::App& app);

void register_convert(CLI::App& app);     // export, import, convert, convert-report (cmd_convert.cpp)
void register_policy(CLI::App& app);      // policy show / diff (cmd_policy.cpp)
void register_model(CLI::App& app);       // model show / list / kinds (cmd_model.cpp)
void register_train(CLI::App& app);       // train, compare (cmd_train.cpp)
void register_eval(CLI::App& app);        // eval, predict (cmd_eval.cpp)
void register_quantize(CLI::App& app);    // quantize (cmd_quantize.cpp)
void register_weights(CLI::App& app);     // weights export / import (cmd_weights.cpp)
void register_drift(CLI::App& app);       // drift, attribute (cmd_drift.cpp)
void register_attack(CLI::App& app);      // attack (cmd_attack.cpp)
void register_robustness(CLI::App& app);  // robustness (cmd_robustness.cpp)
void register_explain(CLI::App& app);     // explain (cmd_policy.cpp)
void register_device(CLI::App& app);      // device (cmd_device.cpp)
void register_study(CLI::App& app);       // study plan / kinds (cmd_study.cpp)
void register_case(CLI::App& app);        // case list / run (cmd_case.cpp)

// Thrown by a command that ends with a status of its own (train interrupted by SIGINT: 130,
// SIGTERM: 143) after printing what happened; main returns the code.
struct ExitStatus {
  int code;
};

}  // namespace cli
}  // namespace driftlab
