// The ONNX graph importer on inputs the fuzzer found (tests/data/fuzz-regressions/
// fuzz_onnx_graph_import/): each is refused with a driftlab::Error naming what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "convert/onnx_graph_import.h"

namespace driftlab {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// fuzz_onnx_graph_import's first finding (2026-11-29): a node name of invalid UTF-8 reached the
// graph spec, whose JSON writer threw an exception that was no driftlab::Error (the fuzz build
// aborted on it; this test, run on the code before the fix, fails). Names are now checked when a
// node is read, and the spec's messages show JSON values without throwing.
TEST(OnnxGraphImportFuzzRegressions, ANodeNameOfInvalidUtf8IsRefusedByName) {
  const std::string path =
      std::string(DRIFTLAB_SOURCE_DIR) + "/tests/data/fuzz-regressions/fuzz_onnx_graph_import/invalid_utf8_name.onnx";
  const std::string bytes = file_bytes(path);
  ASSERT_FALSE(bytes.empty()) << path;
  try {
    convert::import_onnx_graph_bytes(bytes, "invalid_utf8_name.onnx");
    FAIL() << "imported";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("is not valid UTF-8")) << e.what();
  }
}

}  // namespace
}  // namespace driftlab
