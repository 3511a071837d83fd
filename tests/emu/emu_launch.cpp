// CUDA emulation (tests/emu): the launch of shim/kernels/cuda/emu_launch.h. Each thread of a
// block is a ucontext fiber on a stack of its own (stacks are kept between launches); the
// scheduler resumes every unfinished fiber of the block in thread order, round after round,
// and a fiber gives control back at __syncthreads() or when the kernel body returns. A launch
// whose first block never synchronised runs its other blocks' threads as plain calls (context
// switches cost a system call each with glibc's swapcontext).
#include <ucontext.h>

#include <memory>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/emu_launch.h"

DlEmuIndex threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace {

constexpr std::size_t kStack = 256 * 1024;  // per thread; kernels keep small locals

struct Fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  bool done = true;
};

ucontext_t g_scheduler;
std::vector<Fiber> g_fibers;
Fiber* g_current = nullptr;
const std::function<void()>* g_body = nullptr;
bool g_synced = false;  // a thread of the current launch reached __syncthreads

void fiber_main() {
  (*g_body)();
  g_current->done = true;
  swapcontext(&g_current->ctx, &g_scheduler);  // never resumed
}

}  // namespace

void __syncthreads() {
  g_synced = true;
  driftlab::check(g_current != nullptr,
                  "emulation: __syncthreads in a launch whose first block ran without one (its other "
                  "blocks run their threads as plain calls; a kernel must synchronise in every block or in none)");
  swapcontext(&g_current->ctx, &g_scheduler);
}

namespace {

void set_thread(unsigned t, const dim3& block) {
  threadIdx.x = t % block.x, threadIdx.y = (t / block.x) % block.y, threadIdx.z = t / (block.x * block.y);
}

// Runs one block's threads as fibers, round-robin until all have ended.
void run_block_fibers(unsigned threads, const dim3& block) {
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = g_fibers[t];
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
    f.done = false;
  }
  for (bool alive = true; alive;) {
    alive = false;
    for (unsigned t = 0; t < threads; ++t) {
      Fiber& f = g_fibers[t];
      if (f.done) continue;
      set_thread(t, block);
      g_current = &f;
      swapcontext(&g_scheduler, &f.ctx);
      if (!f.done) alive = true;
    }
  }
  g_current = nullptr;
}

}  // namespace

// The first block runs as fibers. If none of its threads synchronised, the kernel is one that
// never does (a barrier must be reached by every thread of a block), and the other blocks run
// their threads as plain calls, in thread order: the same result without a context switch.
void dl_emu_run(dim3 grid, dim3 block, const std::function<void()>& body) {
  const unsigned threads = block.x * block.y * block.z;
  driftlab::check(threads >= 1 && threads <= 1024, "emulation: a block of ", threads, " threads");
  gridDim = grid;
  blockDim = block;
  g_body = &body;
  while (g_fibers.size() < threads) {
    g_fibers.emplace_back();
    g_fibers.back().stack.reset(new char[kStack]);
  }
  g_synced = false;
  bool first = true, fibers = true;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx.x = bx, blockIdx.y = by, blockIdx.z = bz;
        if (fibers) {
          run_block_fibers(threads, block);
          if (first && !g_synced) fibers = false;
          first = false;
          continue;
        }
        for (unsigned t = 0; t < threads; ++t) {
          set_thread(t, block);
          body();
        }
      }
}
