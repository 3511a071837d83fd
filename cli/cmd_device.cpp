// driftlab device: the CPU features the kernels' run-time choices may use (under
// DRIFTLAB_MAX_CPU_ISA), then the CUDA devices, or why there are none.
#include "cli/commands.h"
#include "cli/common.h"

#include <iostream>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cuda/device.h"

namespace driftlab {
namespace cli {

void register_device(CLI::App& app) {
  // device
  auto* dev = app.add_subcommand("device", "the CPU features the kernels use; CUDA devices (or why there are none)");
  dev->callback([] {
    std::string used;
    for (CpuFeature f : kCpuFeatures)
      if (cpu_supports(f)) used += std::string(used.empty() ? "" : " ") + cpu_feature_name(f);
    std::cout << "cpu: " << (used.empty() ? "none of avx2..avx512vnni" : used) << " (DRIFTLAB_MAX_CPU_ISA "
              << cpu_isa_name(cpu_isa_cap()) << "; this build's code compiled for " << cpu_isa_name(compiled_cpu_isa())
              << ")\n";
    std::string why;
    int n = cuda::device_count(&why);
    if (n == 0) {
      std::cout << "no CUDA device: " << why << "\n";
      return;
    }
    for (int i = 0; i < n; ++i) {
      cuda::DeviceInfo d = cuda::device_info(i);
      std::cout << "cuda:" << i << " " << d.name << " sm_" << d.cc_major << d.cc_minor << ", " << d.sm_count
                << " SMs, " << d.total_memory / (1 << 20) << " MiB (" << d.free_memory / (1 << 20)
                << " free), driver " << d.driver_version << ", runtime " << d.runtime_version << "\n";
    }
  });
}

}  // namespace cli
}  // namespace driftlab
