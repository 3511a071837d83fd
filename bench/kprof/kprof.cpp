// kprof: a per-kernel GPU time profile of any CUDA process, driftlab's or PyTorch's, without
// Nsight (the lent GPU machines have none). The CUDA driver loads this library into the process
// when CUDA_INJECTION64_PATH names it, and calls InitializeInjection() at cuInit; CUPTI's
// activity API then records every kernel, memcpy and memset with its device start and end, and
// at exit the records are summed by kernel name and written as a Markdown table:
//
//   CUDA_INJECTION64_PATH=build-gpu/libdl_kprof.so DRIFTLAB_KPROF_OUT=prof.md
//     DRIFTLAB_KPROF_TITLE="driftlab LeNet-5 training step, B-64" ./bm_cuda --benchmark_filter=...
//   (one command line; scripts/gpu-profile.sh runs it per case)
//
// Columns: calls, total device time, share of all kernel time, mean per call. Above the table:
// the number of kernels and copies, the summed kernel time, the time the device was busy with
// anything (the union of the intervals) and the span from the first record's start to the last
// one's end; busy / span is the share of the wall time the GPU worked, so a launch-bound
// workload shows a low one. DRIFTLAB_KPROF_STEPS=N divides the totals by N (per step).
// A window: with DRIFTLAB_KPROF_WINDOW=1 only what runs between cudaProfilerStart() and
// cudaProfilerStop() counts (torch.cuda.profiler.start()/stop() in PyTorch; the caller
// synchronizes the device before each), so warm-up, checks and set-up stay out.
// Kernel names are demangled and cut before their parameter list (templates kept, cut at 100
// characters) so that one kernel's instantiations stay apart.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Totals {
  uint64_t calls = 0, ns = 0;
};

std::mutex mu;
std::map<std::string, Totals> kernels, copies;
std::vector<std::pair<uint64_t, uint64_t>> intervals;  // every record's [start, end)
bool failed = false;
bool recording = true;  // false outside the window when DRIFTLAB_KPROF_WINDOW is set

constexpr size_t kBufferBytes = 8u << 20;

std::string short_name(const char* mangled) {
  if (mangled == nullptr) return "(unnamed)";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  // "(anonymous namespace)" is a name, not a parameter list.
  for (size_t at; (at = s.find("(anonymous namespace)")) != std::string::npos;) s.replace(at, 21, "{anon}");
  // Cut the parameter list: the '(' at template depth 0.
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  if (s.size() > 100) s = s.substr(0, 97) + "...";
  for (char& c : s)
    if (c == '|') c = '/';  // a Markdown cell
  return s;
}

const char* copy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy host to device";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy device to host";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy device to device";
    default: return "memcpy (other)";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (!recording) continue;
    // One record: its row's totals and its interval, whatever its kind.
    auto add = [](Totals& t, uint64_t start, uint64_t end) {
      t.calls += 1;
      t.ns += end - start;
      intervals.emplace_back(start, end);
    };
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
      add(kernels[short_name(k->name)], k->start, k->end);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      add(copies[copy_kind(m->copyKind)], m->start, m->end);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
      add(copies["memset"], m->start, m->end);
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped) failed = true;
  std::free(buffer);
}

// cuProfilerStart on its way out: what ran before is delivered and dropped, the window opens.
// cuProfilerStop on its way in: what ran inside is delivered, the window closes.
void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart && info->callbackSite == CUPTI_API_EXIT) {
    cuptiActivityFlushAll(1);
    std::lock_guard<std::mutex> lock(mu);
    kernels.clear(), copies.clear(), intervals.clear();
    recording = true;
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop && info->callbackSite == CUPTI_API_ENTER) {
    cuptiActivityFlushAll(1);
    std::lock_guard<std::mutex> lock(mu);
    recording = false;
  }
}

void write_report() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(mu);
  const char* path = std::getenv("DRIFTLAB_KPROF_OUT");
  FILE* f = path ? std::fopen(path, "a") : stderr;
  if (!f) {
    std::fprintf(stderr, "kprof: cannot write %s\n", path);
    return;
  }
  const char* title = std::getenv("DRIFTLAB_KPROF_TITLE");
  const char* steps_env = std::getenv("DRIFTLAB_KPROF_STEPS");
  const double steps = steps_env ? std::max(1.0, std::atof(steps_env)) : 1.0;
  uint64_t kernel_ns = 0, kernel_calls = 0, copy_ns = 0, copy_calls = 0;
  for (auto& kv : kernels) kernel_ns += kv.second.ns, kernel_calls += kv.second.calls;
  for (auto& kv : copies) copy_ns += kv.second.ns, copy_calls += kv.second.calls;
  std::sort(intervals.begin(), intervals.end());
  uint64_t busy = 0, cur_s = 0, cur_e = 0;
  for (auto& iv : intervals) {
    if (iv.first > cur_e) {
      busy += cur_e - cur_s;
      cur_s = iv.first;
      cur_e = iv.second;
    } else {
      cur_e = std::max(cur_e, iv.second);
    }
  }
  busy += cur_e - cur_s;
  const uint64_t span = intervals.empty() ? 0 : std::max_element(intervals.begin(), intervals.end(), [](auto& a, auto& b) {
                                                   return a.second < b.second;
                                                 })->second - intervals.front().first;
  std::fprintf(f, "\n### %s\n\n", title ? title : "kprof");
  std::fprintf(f,
               "%s%.0f step(s): %.1f kernels and %.1f copies/memsets per step; kernel time %.1f us, copies %.1f us, "
               "device busy %.1f us of a %.1f us span per step (%.1f%%)\n\n",
               failed ? "**records were dropped: totals are low.** " : "", steps, kernel_calls / steps,
               copy_calls / steps, kernel_ns / steps / 1e3, copy_ns / steps / 1e3, busy / steps / 1e3,
               span / steps / 1e3, span ? 100.0 * busy / span : 0.0);
  std::vector<std::pair<std::string, Totals>> rows(kernels.begin(), kernels.end());
  for (auto& kv : copies) rows.emplace_back("[" + kv.first + "]", kv.second);
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.ns > b.second.ns; });
  std::fprintf(f, "| kernel | calls/step | us/step | share of kernel+copy time | us/call |\n| --- | ---: | ---: | ---: | ---: |\n");
  const double all = static_cast<double>(kernel_ns + copy_ns);
  for (auto& r : rows)
    std::fprintf(f, "| %s | %.1f | %.1f | %.1f%% | %.2f |\n", r.first.c_str(), r.second.calls / steps,
                 r.second.ns / steps / 1e3, all > 0 ? 100.0 * r.second.ns / all : 0.0,
                 r.second.ns / 1e3 / std::max<uint64_t>(1, r.second.calls));
  if (f != stderr) std::fclose(f);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kprof: CUPTI refused its callbacks; no profile\n");
    return 0;
  }
  if (std::getenv("DRIFTLAB_KPROF_WINDOW")) {
    CUpti_SubscriberHandle sub;
    if (cuptiSubscribe(&sub, on_api, nullptr) != CUPTI_SUCCESS ||
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart) != CUPTI_SUCCESS ||
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop) != CUPTI_SUCCESS) {
      std::fprintf(stderr, "kprof: CUPTI refused the profiler-start/stop callbacks; no window\n");
      return 0;
    }
    recording = false;
  }
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  std::atexit(write_report);
  return 1;
}
