#include "engine/io/shell.h"

#include <cstdio>

#include "core/error.h"

namespace driftlab {

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string run_capture(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  check(p != nullptr, "could not run ", cmd);
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  *rc = pclose(p);
  return out;
}

}  // namespace driftlab
