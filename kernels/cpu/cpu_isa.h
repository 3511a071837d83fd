// Which instruction sets the CPU kernels chosen at run time may use: the CPU's own, capped by the
// environment variable DRIFTLAB_MAX_CPU_ISA, as ONEDNN_MAX_CPU_ISA caps oneDNN's JIT code and
// ATEN_CPU_CAPABILITY PyTorch's kernels. With the three set alike, one machine runs the code paths
// another CPU would (docs/BENCHMARKS.md, "Cascade Lake's code paths on a Zen 5").
//
// Two kinds of choice decide a kernel's instructions. Code compiled with the build's -march
// (DRIFTLAB_MARCH, default native) uses what that target has, whatever the CPU; a few kernels
// (int8 tiles, rounding) test the CPU when first called. The cap governs the second kind, and a cap
// below what the build compiled for is refused by name: configure a build for the lower target.
#pragma once
#include <string>

namespace driftlab {

// oneDNN's names for the same levels (cpu_isa_t). `all`: whatever the CPU has.
enum class CpuIsa { avx2, avx512_core, avx512_core_vnni, all };

// The features the run-time choices test.
enum class CpuFeature { avx2, f16c, avx512f, avx512bw, avx512vl, avx512vnni };
inline constexpr CpuFeature kCpuFeatures[] = {CpuFeature::avx2,     CpuFeature::f16c,     CpuFeature::avx512f,
                                              CpuFeature::avx512bw, CpuFeature::avx512vl, CpuFeature::avx512vnni};

const char* cpu_isa_name(CpuIsa isa);
const char* cpu_feature_name(CpuFeature f);

// "avx2" -> CpuIsa::avx2, case-insensitive as oneDNN's; an unknown name throws Error naming it and
// the known ones.
CpuIsa parse_cpu_isa(const std::string& name);

// Whether a cap admits a feature: avx2 and f16c from avx2 on, AVX-512 F/BW/VL from avx512_core,
// VNNI from avx512_core_vnni. (No run-time choice tests anything past VNNI: `all` differs from
// avx512_core_vnni in what a build may compile with -march, VBMI's byte permutes in the int8
// convolution's packing for one.)
bool cpu_isa_admits(CpuIsa cap, CpuFeature f);

// The lowest cap this build's compiled code fits under: all where -march enabled an AVX-512
// extension past VNNI (VBMI, VBMI2, BF16, ...), avx512_core_vnni, avx512_core, else avx2.
CpuIsa compiled_cpu_isa();

// The cap in force: DRIFTLAB_MAX_CPU_ISA, read once (all when unset or empty). Throws Error naming
// the variable for an unknown value or one below compiled_cpu_isa().
CpuIsa cpu_isa_cap();

// The CPU has f and the cap admits it.
bool cpu_supports(CpuFeature f);

}  // namespace driftlab
