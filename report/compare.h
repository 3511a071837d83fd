// A comparison of training runs (driftlab/train.h compare) as JSON: OUT/compare.json, one object
// per run with its last epoch's training numbers, its test numbers, time and model size.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "driftlab/train.h"

namespace driftlab {
namespace report {

// The CPU kernels a policy runs: each *_backend knob and its value, in the knob table's order (a
// run's time is these kernels', not the framework's the policy copies).
std::vector<std::pair<std::string, std::string>> cpu_kernels(const std::string& policy);

// [{policy, train_loss, train_acc, test_loss, test_acc, seconds_per_epoch, model_bytes, seed,
// device, model, kernels: {knob: value}}] in the order of the runs.
nlohmann::json compare_json(const CompareResult& r);
// Writes compare_json(r) to r.out/compare.json (atomically; the folder made if needed).
void write_compare(const CompareResult& r);

}  // namespace report
}  // namespace driftlab
