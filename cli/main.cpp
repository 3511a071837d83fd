// The driftlab command. Library errors (driftlab::Error) become one line on stderr,
// "driftlab: error: <message>", and exit code 1; command-line usage errors exit 2.
#include <CLI/CLI.hpp>
#include <malloc.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "engine/core/error.h"

int main(int argc, char** argv) {
  // Training allocates and frees the same large activation buffers every step. Above glibc's
  // mmap threshold each of them is a fresh mmap whose pages fault in again (about 10% of a
  // LeNet step); keeping them on the heap reuses the pages. Process-level tuning, no effect
  // on any result.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
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
