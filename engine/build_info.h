// The git commit this binary was built from (engine/build_info.cmake writes it at every build):
// "1a2b3c4d5e6f", "1a2b3c4d5e6f-dirty" when tracked files had changes, "unknown" outside git.
// Every report stamps it beside the Policy string, model, dataset, seed and device.
#pragma once

namespace driftlab {

const char* build_commit();

}  // namespace driftlab
