// DRIFTLAB_MAX_CPU_ISA (kernels/cpu/cpu_isa.h): oneDNN's names for the levels, the features each
// level admits, the cap read from the environment by the driftlab command (`driftlab device`
// lists what its kernels may use), and the refusals: an unknown name, and a cap below what the
// build's -march compiled for.
#include <gtest/gtest.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/cpu/cpu_isa.h"
#include "tests/cli/cli_util.h"

namespace driftlab {
namespace {

using cli_test::run_driftlab_env;

constexpr CpuIsa kLevels[] = {CpuIsa::avx2, CpuIsa::avx512_core, CpuIsa::avx512_core_vnni, CpuIsa::all};

// What the CPU has, asked here without cpu_isa.cpp's mapping.
bool hardware_has(CpuFeature f) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  unsigned a = 0, b = 0, c = 0, d = 0;
  switch (f) {
    case CpuFeature::avx2: return __builtin_cpu_supports("avx2");
    case CpuFeature::f16c: return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    case CpuFeature::avx512f: return __builtin_cpu_supports("avx512f");
    case CpuFeature::avx512bw: return __builtin_cpu_supports("avx512bw");
    case CpuFeature::avx512vl: return __builtin_cpu_supports("avx512vl");
    case CpuFeature::avx512vnni: return __builtin_cpu_supports("avx512vnni");
  }
#endif
  (void)f;
  return false;
}

TEST(CpuIsa, OneDnnNamesAnyCaseAndUnknownNamesRefused) {
  EXPECT_EQ(parse_cpu_isa("avx2"), CpuIsa::avx2);
  EXPECT_EQ(parse_cpu_isa("AVX512_CORE"), CpuIsa::avx512_core);  // ONEDNN_MAX_CPU_ISA's spelling
  EXPECT_EQ(parse_cpu_isa("avx512_core_vnni"), CpuIsa::avx512_core_vnni);
  EXPECT_EQ(parse_cpu_isa("All"), CpuIsa::all);
  for (const char* bad : {"avx512", "", "sse41", "avx512_core_amx"}) {
    try {
      parse_cpu_isa(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("DRIFTLAB_MAX_CPU_ISA='") + bad + "': unknown instruction set"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("known: avx2, avx512_core, avx512_core_vnni, all"), std::string::npos);
    }
  }
}

// The levels as Intel's CPUs have them: Haswell AVX2 + F16C; Skylake-SP AVX-512 F/BW/VL; Cascade
// Lake adds VNNI.
TEST(CpuIsa, EachLevelAdmitsWhatItsCpuHas) {  // want[level][feature], kCpuFeatures' order
  const bool want[4][6] = {{true, true, false, false, false, false},
                           {true, true, true, true, true, false},
                           {true, true, true, true, true, true},
                           {true, true, true, true, true, true}};
  for (int l = 0; l < 4; ++l)
    for (int f = 0; f < 6; ++f)
      EXPECT_EQ(cpu_isa_admits(kLevels[l], kCpuFeatures[f]), want[l][f])
          << cpu_isa_name(kLevels[l]) << " " << cpu_feature_name(kCpuFeatures[f]);
}

// What `driftlab device` lists under a cap: the CPU's features that the cap admits, for every cap
// this build can honour; every cap below the build's own level is refused, naming the variable,
// the build's level and the CMake option that makes a build for the lower one.
TEST(CpuIsa, DriftlabDeviceListsTheCappedFeaturesAndRefusesCapsBelowTheBuild) {
  const CpuIsa built = compiled_cpu_isa();
  int honoured = 0;
  for (CpuIsa cap : kLevels) {
    const std::string name = cpu_isa_name(cap);
    const auto r = run_driftlab_env("DRIFTLAB_MAX_CPU_ISA=" + name, "device");
    if (static_cast<int>(cap) < static_cast<int>(built)) {
      EXPECT_EQ(r.code, 1) << name << ": " << r.out;
      EXPECT_NE(r.out.find("DRIFTLAB_MAX_CPU_ISA=" + name + ": this build's code is compiled for " +
                           cpu_isa_name(built)),
                std::string::npos)
          << r.out;
      EXPECT_NE(r.out.find("-DDRIFTLAB_MARCH="), std::string::npos) << r.out;
      continue;
    }
    ++honoured;
    std::string want;
    for (CpuFeature f : kCpuFeatures)
      if (hardware_has(f) && cpu_isa_admits(cap, f)) want += std::string(want.empty() ? "" : " ") + cpu_feature_name(f);
    if (want.empty()) want = "none of avx2..avx512vnni";
    EXPECT_EQ(r.code, 0) << name << ": " << r.out;
    EXPECT_NE(r.out.find("cpu: " + want + " (DRIFTLAB_MAX_CPU_ISA " + name + ";"), std::string::npos)
        << name << ": " << r.out;
  }
  EXPECT_GE(honoured, 1);  // `all` always
  const auto bad = run_driftlab_env("DRIFTLAB_MAX_CPU_ISA=avx512", "device");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("driftlab: error: DRIFTLAB_MAX_CPU_ISA='avx512': unknown instruction set"), std::string::npos)
      << bad.out;
}

}  // namespace
}  // namespace driftlab
