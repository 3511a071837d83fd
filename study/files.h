// Reading the files of a study folder (results.json, timings.json, error.txt, study.json): the
// one place that says what a missing or unreadable file is.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace driftlab {
namespace study {

// The file's bytes, "" when it cannot be read (a cell's error.txt may not exist).
std::string read_text(const std::string& path);
// The file as JSON, null when it does not exist; throws "PATH: not JSON (...)" when it is not.
nlohmann::json read_json_if_any(const std::string& path);

}  // namespace study
}  // namespace driftlab
