// Subcommands of the driftlab command: each registers its options and a callback that
// runs it (callbacks throw driftlab::Error; main maps them to exit codes).
#pragma once
#include <CLI/CLI.hpp>

namespace driftlab {
namespace cli {

void register_commands(CLI::App& app);

}  // namespace cli
}  // namespace driftlab
