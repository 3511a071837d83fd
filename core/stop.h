// A cooperative stop for long library calls (an attack, a quantization's calibration, a drift or
// robustness measurement): the caller that can be interrupted (the Python module, where Ctrl-C
// must end a call whose loops run without the GIL) opens a StopScope on its thread with a check;
// the library polls it (poll_stop) before every CPU kernel a layer picks (kernels/cpu/registry.h
// ExecContext::pick: every forward, backward and optimiser step, whoever loops over the layers)
// and before every CUDA layer, and the first poll that finds the check true throws StopRequested
// out of the call. Training and studies have their own stop (train/run.h
// TrainRunHooks::stop_requested, study::StudyRunOptions::stop), which ends them at a checkpoint
// instead.
//
// StopRequested is no std::exception, so that no handler that turns a failure into a message (a
// study's failed cell, a measurement's "n/a" row) takes an interrupt for one; it leaves the call
// before the call's files are written (every writer here writes its files at the end, atomically).
#pragma once
#include <functional>

namespace driftlab {

struct StopRequested {
  const char* where;  // the op whose poll saw it ("conv2d", "gemm", "cuda forward", ...)
};

// The calling thread's stop check while it lives (scopes nest: the innermost one is asked). The
// check runs at most every `interval_ms` milliseconds of polls (it may take a lock: Python's GIL).
class StopScope {
 public:
  explicit StopScope(std::function<bool()> check, int interval_ms = 20);
  ~StopScope();
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;

 private:
  friend void poll_stop(const char* where);
  std::function<bool()> check_;
  int interval_ms_;
  long long next_ns_ = 0;  // steady clock: the next poll that asks
  StopScope* outer_;
};

// Throws StopRequested{where} when the calling thread's scope says stop; without a scope, one
// thread-local load.
void poll_stop(const char* where);

}  // namespace driftlab
