// Running the driftlab command from tests: exit code and merged stdout/stderr, and a fresh
// temporary folder per test.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace driftlab::cli_test {

struct CliRun {
  int code;
  std::string out;
};

// Runs `driftlab ARGS` (stderr merged into stdout) with `env` ("NAME=value ...", may be empty)
// added to its environment; the code is 128+signal if it was killed.
inline CliRun run_driftlab_env(const std::string& env, const std::string& args) {
  const std::string cmd = env + (env.empty() ? "" : " ") + std::string(DRIFTLAB_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// A big-endian uint32 (the IDX header's integers).
inline void write_be(std::ofstream& f, uint32_t v) {
  for (int i = 3; i >= 0; --i) f.put(static_cast<char>(v >> (8 * i)));
}

// n IDX images of 28x28 with a pattern per class, labels i % 10: DIR/PREFIX-images-idx3-ubyte and
// DIR/PREFIX-labels-idx1-ubyte.
inline void write_idx(const std::filesystem::path& dir, const std::string& prefix, uint32_t n) {
  std::ofstream img(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary),
      lab(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary);
  write_be(img, 0x803), write_be(img, n), write_be(img, 28), write_be(img, 28);
  write_be(lab, 0x801), write_be(lab, n);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t p = 0; p < 784; ++p) img.put(static_cast<char>((p * (i % 10 + 1) + i) & 0xff));
    lab.put(static_cast<char>(i % 10));
  }
}

// Runs `driftlab ARGS` (stderr merged into stdout); the code is 128+signal if it was killed.
inline CliRun run_driftlab(const std::string& args) { return run_driftlab_env("", args); }

// An empty folder /tmp/driftlab_cli_<name>_<pid>.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("driftlab_cli_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace driftlab::cli_test
