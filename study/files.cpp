#include "study/files.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace driftlab {
namespace study {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

nlohmann::json read_json_if_any(const std::string& path) {
  std::ifstream f(path);
  if (!f.good()) return nullptr;
  try {
    return nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    fail(path, ": not JSON (", e.what(), ")");
  }
}

}  // namespace study
}  // namespace driftlab
