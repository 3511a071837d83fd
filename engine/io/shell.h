// Running an outside program through the shell: the conversion measurements (node + ONNX
// Runtime, driftlab/convert.cpp) and the robustness chart (python3 + matplotlib,
// report/robustness.cpp).
#pragma once
#include <string>

namespace driftlab {

// s as one single-quoted shell word (a ' inside becomes '\'').
std::string shell_quoted(const std::string& s);

// Runs a shell command; returns what it printed on stdout (append 2>&1 for stderr) and sets *rc
// to pclose's status. A command that cannot be started is an error naming it.
std::string run_capture(const std::string& cmd, int* rc);

}  // namespace driftlab
