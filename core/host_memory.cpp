#include "core/host_memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define DRIFTLAB_HOST_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DRIFTLAB_HOST_CACHE 0
#endif
#endif
#ifndef DRIFTLAB_HOST_CACHE
#define DRIFTLAB_HOST_CACHE 1
#endif

namespace driftlab {
namespace host_memory {
namespace {

constexpr std::size_t kSmall = std::size_t{64} << 10;  // below: malloc, not cached
constexpr std::size_t kHuge = std::size_t{2} << 20;    // from here: 2 MiB classes, huge pages
// What the free lists may hold: above, a freed block goes back to the system. Between two
// ResNet-20 training steps at batch 128 they hold 46 MB (measured 2026-11-27; the layers keep their
// saved activations); a batch-1000 evaluation or a larger model frees more at once, and the cap
// bounds what an idle process keeps.
constexpr std::size_t kCap = std::size_t{2} << 30;

struct Cache {
  std::mutex mu;
  std::unordered_map<std::size_t, std::vector<void*>> free;  // size class -> blocks
  std::unordered_map<void*, std::size_t> lent;  // blocks handed out for a smaller class -> their class
  std::size_t cached = 0;
  uint64_t hits = 0, misses = 0, lends = 0;
};

// The storage in use and its high-water mark (lock-free: small blocks never take the cache's lock).
std::atomic<std::size_t> g_in_use{0}, g_peak{0};

void note_allocated(std::size_t n) {
  const std::size_t now = g_in_use.fetch_add(n, std::memory_order_relaxed) + n;
  std::size_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void note_released(std::size_t n) { g_in_use.fetch_sub(n, std::memory_order_relaxed); }

std::size_t small_bytes(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors freed during exit still find it
  return *c;
}

// A fresh block of size class `cls` (>= kSmall) from the system.
void* map_block(std::size_t cls) {
  if (cls < kHuge) {
    void* p = mmap(nullptr, cls, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // 2 MiB-aligned: map one huge page more and unmap the ends around an aligned start.
  const std::size_t len = cls + kHuge;
  void* raw = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = base + len, stop = start + cls;
  if (end > stop) munmap(reinterpret_cast<void*>(stop), end - stop);
  void* p = reinterpret_cast<void*>(start);
#ifdef MADV_HUGEPAGE
  madvise(p, cls, MADV_HUGEPAGE);  // advice only: where THP is off, 4 KiB pages as before
#endif
  return p;
}

void unmap_all(std::unordered_map<std::size_t, std::vector<void*>>& lists) {
  for (auto& kv : lists)
    for (void* p : kv.second) munmap(p, kv.first);
  lists.clear();
}

}  // namespace

std::size_t size_class(std::size_t bytes) {
  if (bytes < kSmall) return bytes;
  const std::size_t step = bytes < kHuge ? kSmall : kHuge;
  return (bytes + step - 1) / step * step;
}

namespace {
// A block and the size class it really has (a larger one than asked for when it was lent).
struct Block {
  void* p = nullptr;
  std::size_t cls = 0;
};

Block allocate_block(std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  if (!DRIFTLAB_HOST_CACHE || cls < kSmall) return {std::aligned_alloc(64, small_bytes(bytes)), small_bytes(bytes)};
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(cls);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.cached -= cls;
      ++c.hits;
      return {p, cls};
    }
    // No block of its class: the smallest cached block of at most twice the class is lent instead
    // of new memory (a pass whose tensors shrink layer by layer, VGG-16's, otherwise maps every
    // class anew while the larger freed blocks wait), and goes back to its own class when released.
    std::vector<void*>* best = nullptr;
    std::size_t best_cls = 0;
    for (auto& kv : c.free)
      if (kv.first > cls && kv.first <= 2 * cls && !kv.second.empty() && (!best || kv.first < best_cls)) {
        best = &kv.second;
        best_cls = kv.first;
      }
    if (best) {
      void* p = best->back();
      best->pop_back();
      c.cached -= best_cls;
      c.lent[p] = best_cls;
      ++c.lends;
      return {p, best_cls};
    }
    ++c.misses;
  }
  if (void* p = map_block(cls)) return {p, cls};
  trim();  // the system is short: give the cache back and try once more
  return {map_block(cls), cls};
}
}  // namespace

void* allocate(std::size_t bytes) {
  const Block b = allocate_block(bytes);
  if (b.p) note_allocated(b.cls);
  return b.p;
}

void release(void* p, std::size_t bytes) {
  if (!p) return;
  std::size_t cls = size_class(bytes);
  if (!DRIFTLAB_HOST_CACHE || cls < kSmall) {
    note_released(small_bytes(bytes));
    std::free(p);
    return;
  }
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto lent = c.lent.find(p);
    if (lent != c.lent.end()) {  // a larger block lent for this request: its own class
      cls = lent->second;
      c.lent.erase(lent);
    }
    note_released(cls);
    if (c.cached + cls <= kCap) {
      c.free[cls].push_back(p);
      c.cached += cls;
      return;
    }
  }
  munmap(p, cls);
}

void trim() {
  Cache& c = cache();
  std::unordered_map<std::size_t, std::vector<void*>> lists;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    lists.swap(c.free);
    c.cached = 0;
  }
  unmap_all(lists);
}

void trim_above(std::size_t keep) {
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.cached <= keep) return;
  }
  trim();
}

Stats stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  Stats s;
  s.cached_bytes = c.cached;
  s.cap_bytes = kCap;
  s.hits = c.hits;
  s.misses = c.misses;
  s.lends = c.lends;
  s.caching = DRIFTLAB_HOST_CACHE != 0;
  s.in_use_bytes = g_in_use.load(std::memory_order_relaxed);
  s.peak_bytes = g_peak.load(std::memory_order_relaxed);
  return s;
}

void reset_peak() { g_peak.store(g_in_use.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace host_memory
}  // namespace driftlab
