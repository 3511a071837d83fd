#include "driftlab/policy.h"

#include <sstream>

#include "core/error.h"

namespace driftlab {

std::vector<std::string> split_policies(const std::string& policies) {
  char sep = policies.find(';') != std::string::npos || policies.find('=') != std::string::npos ? ';' : ',';
  std::vector<std::string> names;
  std::stringstream ss(policies);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) names.push_back(item);
  check(!names.empty(), "policies: '", policies, "' names no policy");
  return names;
}

const std::string& preset_copies(const KnobInfo& knob, const std::string& preset) {
  return preset == "tensorflow" ? knob.tensorflow : (preset == "theano" ? knob.theano : knob.torch);
}

}  // namespace driftlab
