// The conversion report's CSV (report/convert.h): one header cell per value cell, whatever the
// cells hold. A policy string has commas and the adversarial record is JSON; written raw they
// split into several cells and shift every column after them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/convert.h"

namespace driftlab {
namespace {

// RFC 4180 reader for one line: quoted cells may hold commas and doubled quotes.
std::vector<std::string> csv_line(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (ch == '"') {
      quoted = !quoted;
    } else if (ch == ',' && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += ch;
    }
  }
  return cells;
}

TEST(ConvertReport, CsvCellsLineUpWithTheHeader) {
  ConversionResult r;
  r.model = "lenet5";
  r.policy = "torch,conv_kernel_flip=true";
  r.conversion = "onnx";
  r.inputs = "fashion-mnist/test";
  ConversionAdversarial a;
  a.from = "runs/attack \"fgsm\", eps 0.1";
  a.n = 200;
  r.adversarial = a;
  const std::string csv = report::conversion_csv(r);
  const std::size_t nl = csv.find('\n');
  ASSERT_NE(nl, std::string::npos);
  const std::vector<std::string> header = csv_line(csv.substr(0, nl));
  const std::vector<std::string> row = csv_line(csv.substr(nl + 1, csv.size() - nl - 2));
  ASSERT_EQ(header.size(), row.size()) << csv;
  bool saw_policy = false, saw_adversarial = false;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "policy") {
      saw_policy = true;
      EXPECT_EQ(row[i], "torch,conv_kernel_flip=true");
    }
    if (header[i] == "model") {
      EXPECT_EQ(row[i], "lenet5");
    }
    if (header[i] == "adversarial") {
      saw_adversarial = true;
      EXPECT_NE(row[i].find("\"from\":\"runs/attack \\\"fgsm\\\", eps 0.1\""), std::string::npos) << row[i];
    }
  }
  EXPECT_TRUE(saw_policy && saw_adversarial) << csv;
}

}  // namespace
}  // namespace driftlab
