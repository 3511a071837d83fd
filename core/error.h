// The one error type of the library. Messages carry the op, the argument names and
// their values, e.g. "conv2d: pad_l=4 > kernel_w/2=1 (input [1,3,32,32], kernel [8,3,3,3])".
// Library code throws; only cli/main.cpp catches and maps to an exit code.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace driftlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, T&& first, Rest&&... rest) {
  os << std::forward<T>(first);
  append(os, std::forward<Rest>(rest)...);
}
}  // namespace detail

// fail("conv2d: pad_l=", p, " > ...") builds the message from its pieces and throws.
template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  detail::append(os, std::forward<Args>(args)...);
  throw Error(os.str());
}

// check(cond, pieces...) throws Error(pieces...) when cond is false.
template <typename... Args>
void check(bool cond, Args&&... args) {
  if (!cond) fail(std::forward<Args>(args)...);
}

}  // namespace driftlab
