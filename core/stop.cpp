#include "stop.h"

#include <chrono>

namespace driftlab {
namespace {
thread_local StopScope* t_scope = nullptr;

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

StopScope::StopScope(std::function<bool()> check, int interval_ms)
    : check_(std::move(check)), interval_ms_(interval_ms), outer_(t_scope) {
  t_scope = this;
}

StopScope::~StopScope() { t_scope = outer_; }

void poll_stop(const char* where) {
  StopScope* s = t_scope;
  if (!s) return;
  const long long t = now_ns();
  if (t < s->next_ns_) return;
  s->next_ns_ = t + static_cast<long long>(s->interval_ms_) * 1000000;
  if (s->check_()) throw StopRequested{where};
}

}  // namespace driftlab
