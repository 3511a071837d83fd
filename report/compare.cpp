#include "report/compare.h"

#include <filesystem>

#include "engine/io/container.h"

namespace driftlab {
namespace report {

nlohmann::json compare_json(const CompareResult& r) {
  nlohmann::json all = nlohmann::json::array();
  for (const CompareRow& row : r.rows)
    all.push_back({{"policy", row.policy}, {"train_loss", row.train_loss}, {"train_acc", row.train_acc},
                   {"test_loss", row.test_loss}, {"test_acc", row.test_acc},
                   {"seconds_per_epoch", row.seconds_per_epoch}, {"model_bytes", row.model_bytes},
                   {"seed", r.seed}, {"device", r.device}, {"model", r.model}});
  return all;
}

void write_compare(const CompareResult& r) {
  std::filesystem::create_directories(r.out);
  write_file_atomic((std::filesystem::path(r.out) / "compare.json").string(), compare_json(r).dump(2) + "\n");
}

}  // namespace report
}  // namespace driftlab
