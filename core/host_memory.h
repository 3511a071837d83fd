// Host memory for tensor storage: large blocks are kept when freed and handed out again for the
// next request of the same size class, the way a framework's caching allocator works.
//
// Why: a training step allocates the same activations, gradients and workspaces every step. Served
// by fresh pages, each step pays a page fault per 4 KiB touched (about 6 us each inside this VM)
// and the kernel's page clearing: ResNet-20's first four steps at batch 128 took 950, 320, 260 and
// 230 ms against 150 ms for every later one, with 190,000 minor faults (2026-11-27, Zen 3 VM), and
// glibc's heap kept growing for three steps because its free blocks did not fit the next step's
// requests. Here a freed block of >= 64 KiB waits in a free list of its size class (and may be lent
// to a request of a class down to half its own when that class has none free); blocks of
// >= 2 MiB are 2 MiB-aligned and advised as transparent huge pages, so their first touch costs
// one fault per 2 MiB instead of 512.
//
// Contents: a block handed out again holds whatever its last user wrote. Tensor::empty() is for
// outputs a kernel overwrites completely, and the zero-filled constructor clears every byte, so no
// result depends on the cache. Builds with AddressSanitizer bypass the cache (malloc/free), so
// that a use after free is still reported.
#pragma once
#include <cstddef>
#include <cstdint>

namespace driftlab {
namespace host_memory {

// 64-byte aligned, at least `bytes` long (bytes > 0); nullptr when the system has no memory left
// even after the cache was returned to it.
void* allocate(std::size_t bytes);
// Gives back a block from allocate(bytes) with the same `bytes`.
void release(void* p, std::size_t bytes);
// Returns every cached block to the system.
void trim();
// The same when the free lists hold more than `keep` bytes (else nothing): between two phases that
// need blocks of other sizes (training steps and a 1,000-input evaluation), so that one phase's
// cached blocks do not stay resident beside the other's.
void trim_above(std::size_t keep);

struct Stats {
  std::size_t cached_bytes = 0;  // held in the free lists now
  std::size_t cap_bytes = 0;     // the most the free lists hold; a block beyond goes back to the system
  uint64_t hits = 0;             // requests served from a free list
  uint64_t misses = 0;           // requests of a cached size class that needed new memory
  uint64_t lends = 0;            // requests served by a cached block of a larger class (at most 2x)
  bool caching = false;          // false in sanitizer builds
  // Tensor storage handed out and not yet released (each block counted at its size class, a lent
  // one at its own larger class, a small one at its 64-byte rounding), and the most there was at
  // once since the start or reset_peak(): the engine's own memory high-water mark, beside the
  // process's RSS.
  std::size_t in_use_bytes = 0;
  std::size_t peak_bytes = 0;
};
Stats stats();
// Starts a new high-water mark at what is in use now.
void reset_peak();

// The size class a request of `bytes` is served from: the request itself below 64 KiB (not
// cached: malloc), rounded up to 64 KiB below 2 MiB, to 2 MiB above.
std::size_t size_class(std::size_t bytes);

}  // namespace host_memory
}  // namespace driftlab
