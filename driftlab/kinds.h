// The capability table: every layer kind (engine/layers/visit.h, quant/visit.h) against every
// visitor that does something per kind, from the visitors' own support() declarations.
// `driftlab model kinds` prints it; docs/ARCHITECTURE.md holds it (report/kinds.h writes the
// Markdown; tests/test_layer_kinds.cpp fails while the docs' copy is stale).
#pragma once
#include <string>
#include <vector>

#include "engine/layers/visit.h"

namespace driftlab {

struct KindTable {
  struct Column {
    std::string name;  // "cuda", "onnx export", ...
    std::string what;  // what the column says, and which visitor answers it
  };
  struct Row {
    std::string kind;    // conv2d, qconv2d, ...
    std::string family;  // "engine" (engine/layers) or "int8" (quant/)
    std::vector<Support> cells;  // one per column
  };
  std::vector<Column> columns;
  std::vector<Row> rows;
};

KindTable layer_kinds();

}  // namespace driftlab
