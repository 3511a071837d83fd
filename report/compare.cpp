#include "report/compare.h"

#include <filesystem>

#include "engine/io/container.h"
#include "engine/policy.h"

namespace driftlab {
namespace report {

std::vector<std::pair<std::string, std::string>> cpu_kernels(const std::string& policy) {
  const Policy p = Policy::parse(policy);
  std::vector<std::pair<std::string, std::string>> out;
  const std::string suffix = "_backend";
  for (const KnobInfo& k : knob_table())
    if (k.name.size() > suffix.size() && k.name.compare(k.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.emplace_back(k.name, p.get(k.name));
  return out;
}

nlohmann::json compare_json(const CompareResult& r) {
  nlohmann::json all = nlohmann::json::array();
  for (const CompareRow& row : r.rows) {
    nlohmann::json kernels = nlohmann::json::object();
    for (const auto& [k, v] : cpu_kernels(row.policy)) kernels[k] = v;
    all.push_back({{"policy", row.policy}, {"train_loss", row.train_loss}, {"train_acc", row.train_acc},
                   {"test_loss", row.test_loss}, {"test_acc", row.test_acc},
                   {"seconds_per_epoch", row.seconds_per_epoch}, {"model_bytes", row.model_bytes},
                   {"seed", r.seed}, {"device", r.device}, {"model", r.model}, {"kernels", kernels}});
  }
  return all;
}

void write_compare(const CompareResult& r) {
  std::filesystem::create_directories(r.out);
  write_file_atomic((std::filesystem::path(r.out) / "compare.json").string(), compare_json(r).dump(2) + "\n");
}

}  // namespace report
}  // namespace driftlab
