#include "report/quantize.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/io/container.h"

namespace driftlab {
namespace report {

namespace {

// v with prec digits after the point (the command's number format).
std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

// An SQNR in dB with 2 decimals, "inf" for an exact point (JSON has no infinity).
std::string sqnr_str(double v) { return std::isfinite(v) ? fixed(v, 2) : std::string("inf"); }

}  // namespace

std::string quantize_json(const QuantizeReport& r) {
  nlohmann::json rep = {
      {"model", r.model},
      {"fp32_policy", r.fp32_policy},
      {"int8_policy", r.int8_policy},
      {"scheme", r.scheme},
      {"mode", r.mode},
      {"calibration", r.calibration},
      {"test_set", r.test_set},
      {"file_bytes", {{"fp32", r.fp32_bytes}, {"int8", r.int8_bytes},
                      {"ratio", double(r.int8_bytes) / double(r.fp32_bytes)}}},
      {"accuracy", {{"fp32", r.fp32.accuracy}, {"int8", r.int8.accuracy}, {"n", r.fp32.n}}},
      {"disagreement_with_fp32", {{"count", r.disagree}, {"rate", double(r.disagree) / double(r.compared)}}},
      {"inference_s", {{"inputs", r.inputs}, {"threads", r.threads}, {"fp32", r.fp32_s}, {"int8", r.int8_s},
                       {"speedup", r.fp32_s / r.int8_s}}}};
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : r.sqnr) layers.push_back({{"point", l.point}, {"sqnr_db", sqnr_str(l.sqnr_db)}, {"n", l.n}});
  rep["sqnr"] = layers;
  return rep.dump(2) + "\n";
}

std::string quantize_csv(const QuantizeReport& r) {
  std::ostringstream cs;
  cs << "quantity,fp32,int8\nfile_bytes," << r.fp32_bytes << "," << r.int8_bytes << "\naccuracy," << r.fp32.accuracy
     << "," << r.int8.accuracy << "\ninference_s," << r.fp32_s << "," << r.int8_s << "\ndisagreement,," << r.disagree
     << "\n";
  for (const auto& l : r.sqnr) cs << "sqnr_db:" << l.point << ",," << sqnr_str(l.sqnr_db) << "\n";
  return cs.str();
}

std::string quantize_markdown(const QuantizeReport& r) {
  std::ostringstream md;
  md << "| quantity | fp32 | int8 (" << r.scheme << ") |\n|---|---|---|\n"
     << "| file bytes | " << r.fp32_bytes << " | " << r.int8_bytes << " |\n"
     << "| test accuracy (" << r.test_set << ", " << r.fp32.n << ") | " << fixed(r.fp32.accuracy, 4) << " | "
     << fixed(r.int8.accuracy, 4) << " |\n| inference of " << r.inputs << " inputs, " << r.threads << " threads (s) | "
     << fixed(r.fp32_s, 5) << " | " << fixed(r.int8_s, 5) << " |\n"
     << "| predictions that differ from fp32 | | " << r.disagree << " ("
     << fixed(100.0 * r.disagree / static_cast<std::size_t>(r.compared), 2) << "%) |\n\n"
     << "| point | SQNR (dB) |\n|---|---|\n";
  for (const auto& l : r.sqnr) md << "| " << l.point << " | " << sqnr_str(l.sqnr_db) << " |\n";
  return md.str();
}

std::string quantize_report_format(const std::string& path) {
  for (const char* ext : {"md", "csv", "json"}) {
    const std::string e = std::string(".") + ext;
    if (path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) return ext;
  }
  fail("quantize: --report ", path, " must end in .json, .csv or .md");
}

std::string write_quantize_report(const std::string& path, const QuantizeReport& r) {
  const std::string md = quantize_markdown(r);
  const std::string format = quantize_report_format(path);
  write_file_atomic(path, format == "md" ? md : format == "csv" ? quantize_csv(r) : quantize_json(r));
  return md;
}

}  // namespace report
}  // namespace driftlab
