// Subcommands of the driftlab command: each registers its options and a callback that
// runs it (callbacks throw driftlab::Error; main maps them to exit codes).
#pragma once
#include <CLI/CLI.hpp>

namespace driftlab {
namespace cli {

void register_commands(CLI::App& app);
// export (cli/convert_cmd.cpp); register_commands calls it.
void register_convert_commands(CLI::App& app);

// Thrown by a command that ends with a status of its own (train interrupted by SIGINT: 130,
// SIGTERM: 143) after printing what happened; main returns the code.
struct ExitStatus {
  int code;
};

}  // namespace cli
}  // namespace driftlab
