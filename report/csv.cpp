#include "report/csv.h"

namespace driftlab {
namespace report {

std::string csv_cell(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace report
}  // namespace driftlab
