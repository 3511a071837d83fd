// The report of `driftlab quantize --report` (driftlab/quantize.h QuantizeReport) as JSON, CSV
// and Markdown: file sizes, test accuracy, inference time, predictions that differ from fp32's,
// and each activation point's SQNR. The command prints the Markdown whatever file it writes.
#pragma once
#include <string>

#include "driftlab/quantize.h"

namespace driftlab {
namespace report {

std::string quantize_json(const QuantizeReport& r);
std::string quantize_csv(const QuantizeReport& r);
std::string quantize_markdown(const QuantizeReport& r);
// Writes the report to path (atomically) in the format its extension names (.json, .csv or .md;
// any other throws) and returns the Markdown.
std::string write_quantize_report(const std::string& path, const QuantizeReport& r);
// The report's format from its path: "md", "csv" or "json"; throws naming --report otherwise.
std::string quantize_report_format(const std::string& path);

}  // namespace report
}  // namespace driftlab
