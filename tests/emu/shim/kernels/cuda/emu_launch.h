// CUDA emulation (tests/emu): the execution model the rewritten launches call. A launch runs
// every block of the grid in turn (z, y, x order); the threads of a block are fibers that run
// round-robin, each until its next __syncthreads() or its end, so a block's shared memory
// (`__shared__` becomes `static`: one copy, blocks never overlap) is written by every thread
// before any passes the barrier, as on a GPU. threadIdx/blockIdx/blockDim/gridDim are set for
// the running fiber. Implemented in tests/emu/emu_launch.cpp (ucontext fibers).
#pragma once
#include <functional>

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct DlEmuIndex {
  unsigned x = 0, y = 0, z = 0;
};
extern DlEmuIndex threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

void __syncthreads();
void dl_emu_run(dim3 grid, dim3 block, const std::function<void()>& body);

template <typename Stream, typename F>
void dl_emu_launch(dim3 grid, dim3 block, long long /*shared bytes*/, Stream /*stream: one, in order*/, F&& body) {
  dl_emu_run(grid, block, std::function<void()>(std::forward<F>(body)));
}
