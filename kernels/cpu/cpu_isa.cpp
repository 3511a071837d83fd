#include "kernels/cpu/cpu_isa.h"

#include <cctype>
#include <cstdlib>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/error.h"

namespace driftlab {

namespace {
constexpr CpuIsa kIsas[] = {CpuIsa::avx2, CpuIsa::avx512_core, CpuIsa::avx512_core_vnni, CpuIsa::all};

CpuIsa least_level(CpuFeature f) {
  switch (f) {
    case CpuFeature::avx2:
    case CpuFeature::f16c: return CpuIsa::avx2;
    case CpuFeature::avx512f:
    case CpuFeature::avx512bw:
    case CpuFeature::avx512vl: return CpuIsa::avx512_core;
    case CpuFeature::avx512vnni: return CpuIsa::avx512_core_vnni;
  }
  return CpuIsa::all;
}

bool cpu_has(CpuFeature f) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (f) {
    case CpuFeature::avx2: return __builtin_cpu_supports("avx2");
    case CpuFeature::f16c: {
      // CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c"); its
      // registers are AVX's, which the avx2 test finds enabled by the OS.
      unsigned a = 0, b = 0, c = 0, d = 0;
      return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0 && __builtin_cpu_supports("avx2");
    }
    case CpuFeature::avx512f: return __builtin_cpu_supports("avx512f");
    case CpuFeature::avx512bw: return __builtin_cpu_supports("avx512bw");
    case CpuFeature::avx512vl: return __builtin_cpu_supports("avx512vl");
    case CpuFeature::avx512vnni: return __builtin_cpu_supports("avx512vnni");
  }
#else
  (void)f;
#endif
  return false;
}
}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512_core: return "avx512_core";
    case CpuIsa::avx512_core_vnni: return "avx512_core_vnni";
    case CpuIsa::all: return "all";
  }
  return "?";
}

const char* cpu_feature_name(CpuFeature f) {
  switch (f) {
    case CpuFeature::avx2: return "avx2";
    case CpuFeature::f16c: return "f16c";
    case CpuFeature::avx512f: return "avx512f";
    case CpuFeature::avx512bw: return "avx512bw";
    case CpuFeature::avx512vl: return "avx512vl";
    case CpuFeature::avx512vnni: return "avx512vnni";
  }
  return "?";
}

CpuIsa parse_cpu_isa(const std::string& name) {
  std::string low;
  for (char c : name) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string known;
  for (CpuIsa isa : kIsas) {
    if (low == cpu_isa_name(isa)) return isa;
    known += (known.empty() ? "" : ", ") + std::string(cpu_isa_name(isa));
  }
  fail("DRIFTLAB_MAX_CPU_ISA='", name, "': unknown instruction set (known: ", known, ")");
}

bool cpu_isa_admits(CpuIsa cap, CpuFeature f) { return static_cast<int>(least_level(f)) <= static_cast<int>(cap); }

CpuIsa compiled_cpu_isa() {
#if defined(__AVX512VBMI__) || defined(__AVX512VBMI2__) || defined(__AVX512IFMA__) || defined(__AVX512BITALG__) || \
    defined(__AVX512VPOPCNTDQ__) || defined(__AVX512BF16__) || defined(__AVX512FP16__) || defined(__AVXVNNI__)
  return CpuIsa::all;
#elif defined(__AVX512VNNI__)
  return CpuIsa::avx512_core_vnni;
#elif defined(__AVX512F__)
  return CpuIsa::avx512_core;
#else
  return CpuIsa::avx2;
#endif
}

CpuIsa cpu_isa_cap() {
  static const CpuIsa cap = [] {
    const char* env = std::getenv("DRIFTLAB_MAX_CPU_ISA");
    if (!env || !*env) return CpuIsa::all;
    const CpuIsa want = parse_cpu_isa(env), built = compiled_cpu_isa();
    check(static_cast<int>(want) >= static_cast<int>(built), "DRIFTLAB_MAX_CPU_ISA=", env,
          ": this build's code is compiled for ", cpu_isa_name(built),
          " (its -march, CMake's DRIFTLAB_MARCH); a lower cap needs a build configured for that CPU, e.g. "
          "-DDRIFTLAB_MARCH=",
          want == CpuIsa::avx2 ? "haswell" : want == CpuIsa::avx512_core ? "skylake-avx512" : "cascadelake");
    return want;
  }();
  return cap;
}

bool cpu_supports(CpuFeature f) { return cpu_has(f) && cpu_isa_admits(cpu_isa_cap(), f); }

}  // namespace driftlab
