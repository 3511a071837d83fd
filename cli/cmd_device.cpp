// driftlab device: the CUDA devices, or why there are none.
#include "cli/commands.h"
#include "cli/common.h"

#include <iostream>

#include "kernels/cuda/device.h"

namespace driftlab {
namespace cli {

void register_device(CLI::App& app) {
  // device
  auto* dev = app.add_subcommand("device", "list CUDA devices (or say why there are none)");
  dev->callback([] {
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
