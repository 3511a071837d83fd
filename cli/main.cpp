// The driftlab command. Library errors (driftlab::Error) become one line on stderr,
// "driftlab: error: <message>", and exit code 1, as do filesystem errors (they name the path);
// command-line usage errors exit 2.
#include <CLI/CLI.hpp>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "kernels/cpu/cpu_isa.h"

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
  // CLI11 says only "A subcommand is required" for a misspelt command: name it and the known ones.
  CLI::App* cmd = &app;
  for (int i = 1; i < argc && argv[i][0] != '-' && cmd->get_require_subcommand_min() > 0; ++i) {
    std::vector<CLI::App*> subs = cmd->get_subcommands([](CLI::App*) { return true; });
    auto it = std::find_if(subs.begin(), subs.end(), [&](CLI::App* s) { return s->check_name(argv[i]); });
    if (it == subs.end()) {
      std::string path = "driftlab", known;
      for (int j = 1; j < i; ++j) path += std::string(" ") + argv[j];
      for (CLI::App* s : subs) known += (known.empty() ? "" : ", ") + s->get_name();
      std::fprintf(stderr, "driftlab: unknown command '%s' for '%s' (known: %s)\n", argv[i], path.c_str(),
                   known.c_str());
      return 2;
    }
    cmd = *it;
  }
  try {
    // A DRIFTLAB_MAX_CPU_ISA the kernels could not honour stops the command before it starts.
    driftlab::cpu_isa_cap();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const driftlab::cli::ExitStatus& e) {
    return e.code;
  } catch (const driftlab::Error& e) {
    std::fprintf(stderr, "driftlab: error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A folder that cannot be made or read (a file in its place, no permission): the message
    // names the path and the system's reason; it is the user's to fix, not an internal error.
    std::fprintf(stderr, "driftlab: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "driftlab: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
