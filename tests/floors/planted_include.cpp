// A planted floor violation for ctest floors_compile_* (CMakeLists.txt): this file includes a
// header of driftlab_models. Compiled as part of driftlab_quant's floor (which links driftlab_models)
// it builds; compiled as part of driftlab_attacks' (which does not) it must fail with
// "models/model_file.h: No such file or directory", because each library's include root holds
// only its own folder. Not part of any test executable.
#include "models/model_file.h"

namespace driftlab {
int floors_planted_include() { return kModelFileVersion > 0 ? 0 : 1; }
}  // namespace driftlab
