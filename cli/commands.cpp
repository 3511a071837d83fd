#include "cli/commands.h"

namespace driftlab {
namespace cli {

void register_commands(CLI::App& app) {
  register_convert(app);
  register_policy(app);
  register_model(app);
  register_train(app);
  register_eval(app);
  register_quantize(app);
  register_weights(app);
  register_drift(app);
  register_attack(app);
  register_robustness(app);
  register_explain(app);
  register_case(app);
  register_device(app);
  register_study(app);
}

}  // namespace cli
}  // namespace driftlab
