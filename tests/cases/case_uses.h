// What every case table (tests/cases/<op>_cases.h) shares: which consumers read a row, the
// filter that hands a consumer its rows, a lookup by name, and the gtest-safe form of a row's
// name. A row is read by every consumer unless its `uses` narrows it, with a comment saying why
// (a benchmark shape the reference cannot afford in a test, a shape too big for the CUDA
// emulation, an awkward shape no model has and whose timing would say nothing).
//
// No gtest here: the benchmarks include the tables too.
//
// To add a consumer: 1) add a bit to CaseUse (and to kAllUses); 2) have it read
// cases_for(table, bit); 3) say in each table which rows it cannot afford.
#pragma once
#include <cctype>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"

namespace driftlab {

enum CaseUse : unsigned {
  kCpuTest = 1u << 0,   // tests/ops/test_<op>.cpp: the fast CPU kernels against the reference
  kCudaTest = 1u << 1,  // tests/cuda/test_<op>_cuda.cpp: on a GPU, and under ctest's cuda_emulation
  kBench = 1u << 2,     // bench/bm_<op>.cpp (conv2d: bench/bm_cuda.cpp's BM_CudaConv2d as well)
  kTests = kCpuTest | kCudaTest,
  kAllUses = kTests | kBench,
};

// The rows of `table` that consumer `use` reads, in table order.
template <typename Row, std::size_t N>
std::vector<Row> cases_for(const Row (&table)[N], unsigned use) {
  std::vector<Row> out;
  for (const Row& r : table)
    if (r.uses & use) out.push_back(r);
  return out;
}

// The row called `name`; throws naming the table's rows when there is none (a test that picks
// one row for a special check must not silently pick another).
template <typename Row, std::size_t N>
const Row& case_named(const Row (&table)[N], const char* name) {
  std::string known;
  for (const Row& r : table) {
    if (std::strcmp(r.name, name) == 0) return r;
    known += known.empty() ? r.name : std::string(", ") + r.name;
  }
  fail("case table: no row named '", name, "' (rows: ", known, ")");
}

// gtest parameter names allow only [A-Za-z0-9_]: every other character becomes '_' (gemm's
// benchmark-style names such as lenet5_fc1_b32/forward).
inline std::string case_test_name(const char* name) {
  std::string s(name);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
  return s;
}

}  // namespace driftlab
