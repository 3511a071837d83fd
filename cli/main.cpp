// The driftlab command. Library errors (driftlab::Error) become one line on stderr,
// "driftlab: error: <message>", and exit code 1; command-line usage errors exit 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "engine/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"driftlab: one engine, every framework's semantics as a switchable knob"};
  app.require_subcommand(1);
  driftlab::cli::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const driftlab::Error& e) {
    std::fprintf(stderr, "driftlab: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "driftlab: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
