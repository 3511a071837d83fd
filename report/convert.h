// The exchange-format results (driftlab/convert.h) as files and text: a conversion's convert.json
// and convert.csv, its table as `driftlab convert` prints it, the int8 exporter's notes, and the
// robustness variation R(m, c) as a Markdown table and as JSON.
#pragma once
#include <string>
#include <vector>

#include "driftlab/convert.h"

namespace driftlab {
namespace report {

// The int8 exporter's notes, indented under an export or a conversion ("" when there are none).
std::string quant_notes_text(const std::vector<std::string>& notes);

// convert.json: every measurement (the timings' medians and every run), the adversarial section
// when there is one, and the build's commit; keys in alphabetical order.
std::string conversion_json(const ConversionResult& r);
// convert.csv: a header and one row of convert.json's non-array values in the same order, strings
// as they are, numbers and the adversarial object as JSON. Nothing is quoted, so the adversarial
// object's commas spread it over several cells and that row has more cells than the header.
std::string conversion_csv(const ConversionResult& r);
// Writes DIR/convert.json and DIR/convert.csv.
void write_conversion_files(const std::string& dir, const ConversionResult& r);

// The header line, the Markdown table (accuracy, load and inference time, file size) and the
// error lines `driftlab convert` prints, numbers to 4 significant digits.
std::string conversion_table(const ConversionResult& r);

// The header line and the Markdown table of R(m, c): a row per (weights, conversion), S_orig /
// S_conv per attack, R.
std::string robustness_variation_table(const ConversionRobustness& t);
// {"rows": [{weights, conversion, model, attacks: {name: {success_before, success_after,
// variation}}, R}], "commit"}, one space of indentation.
std::string robustness_variation_json(const ConversionRobustness& t);
// Writes it to path atomically (engine/io/container.h write_file_atomic).
void write_robustness_variation_json(const std::string& path, const ConversionRobustness& t);

}  // namespace report
}  // namespace driftlab
