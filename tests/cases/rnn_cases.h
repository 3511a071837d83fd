// The recurrent kernels' case tables: the cells (what the knobs resolve to: core/ops/rnn.h's
// RnnParams fields) and the shapes that tests/ops/test_rnn.cpp (the fast CPU kernel against the
// reference), tests/cuda/test_rnn_cuda.cpp (the CUDA kernels and cuDNN against the reference, on
// a GPU and under the CUDA emulation) and bench/bm_rnn.cpp read. Every consumer runs every cell
// it reads at every shape it reads; rnn_case_params makes a cell's params at a shape.
//
// To add a case: 1) a cell: append a row to kRnnCases, named for the framework behaviour it
// copies; a shape: append a row to kRnnShapes, named for what it exercises; 2) if a consumer
// cannot afford it, narrow `uses` with a comment why. Nothing else: every consumer picks it up.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "core/ops/rnn.h"
#include "tests/cases/case_uses.h"

namespace driftlab {

// One cell configuration. `inclusive` matters to hard-sigmoid gates only.
struct RnnCase {
  const char* name;
  RnnCell cell;
  ActKind gate;
  bool two_biases, reset_after, z_keeps_old;
  bool peepholes = false;
  bool inclusive = true;  // hard sigmoid: Keras's inclusive gradient edges, else torch's exclusive ones
  bool divide = false;    // hard sigmoid: PyTorch's form, clip(x + 3, 0, 6) / 6, else 0.2x + 0.5
  unsigned uses = kAllUses;
};

// The cells of the presets plus the edge rule, bias and update variants cuDNN splits on:
// {name, cell, gate, two_biases, reset_after, z_keeps_old, peepholes, inclusive, divide}. Every consumer.
inline constexpr RnnCase kRnnCases[] = {
    {"lstm_torch", RnnCell::lstm, ActKind::sigmoid, true, true, true, false, false},
    {"lstm_keras", RnnCell::lstm, ActKind::hard_sigmoid, false, true, true, false, true},
    {"lstm_sigmoid_1bias", RnnCell::lstm, ActKind::sigmoid, false, true, true, false, false},
    {"lstm_hard_exclusive", RnnCell::lstm, ActKind::hard_sigmoid, true, true, true, false, false},
    {"gru_torch", RnnCell::gru, ActKind::sigmoid, true, true, true, false, false},
    {"gru_keras", RnnCell::gru, ActKind::hard_sigmoid, false, false, true, false, true},
    {"gru_lasagne", RnnCell::gru, ActKind::sigmoid, false, true, false, false, false},
    {"gru_after_1bias", RnnCell::gru, ActKind::sigmoid, false, true, true, false, false},
    {"gru_before_2bias", RnnCell::gru, ActKind::sigmoid, true, false, true, false, false},
    {"lstm_peepholes", RnnCell::lstm, ActKind::sigmoid, false, true, true, true, false},
    {"lstm_peepholes_hard", RnnCell::lstm, ActKind::hard_sigmoid, true, true, true, true, true},
    // the torch preset's cells with a hard-sigmoid recurrent activation (hard_sigmoid_kind=relu6_div6)
    {"lstm_torch_hard", RnnCell::lstm, ActKind::hard_sigmoid, true, true, true, false, false, true},
    {"gru_torch_hard", RnnCell::gru, ActKind::hard_sigmoid, true, true, true, false, false, true},
};

struct RnnShape {
  int64_t batch, steps, input, hidden;  // N, T, F, H
};

// The small shape of the mask tests (tests/rnn_test_util.h's rnn_test_mask is its mask): every
// unit block and row block of the fast kernel partial.
constexpr RnnShape kRnnSmall{5, 7, 6, 9};
// Fills the fast kernel's tiles: 13 rows (blocks of 6 and a remainder on each thread), 70 units
// (four full 16-unit blocks and a partial one; two 64-unit backward panels).
constexpr RnnShape kRnnTiles{13, 5, 19, 70};
// Rows of three backward chunks (32, 32 and 11 of the fast kernel's fixed 32-row chunks, split
// unevenly among 3 threads), 37 inputs (dx: three vectors, the last partial) and 21 units (LSTM
// gates 84: a full and a partial 64-column panel of the weight-gradient tiles).
constexpr RnnShape kRnnChunks{75, 4, 37, 21};
// The benchmark shape: the zoo's LSTM/GRU classifiers on sequential Fashion-MNIST (batch 128,
// 28 steps of 28 features, 128 units).
constexpr RnnShape kRnnIssue6{128, 28, 28, 128};

struct RnnShapeCase {
  const char* name;
  RnnShape s;
  unsigned uses = kAllUses;
};

inline constexpr RnnShapeCase kRnnShapes[] = {
    // Tests only: shaped to break the kernels' blocking, too small for a timing to mean anything.
    {"small", kRnnSmall, kTests},
    {"tiles", kRnnTiles, kTests},
    {"chunks", kRnnChunks, kTests},
    // Benchmark only: the reference takes 0.17-0.25 s a forward here (docs/BENCHMARKS.md), and
    // the tests would run it for every cell, mask and dtype; tiles and chunks run the same
    // kernel paths.
    {"issue6_b128", kRnnIssue6, kBench},
};

// The params of a cell at a shape (hard sigmoid 0.2x+0.5, or PyTorch's (x+3)/6 in its divide form).
inline RnnParams rnn_case_params(const RnnCase& c, const RnnShape& s, bool dh_last = false) {
  RnnParams p;
  p.cell = c.cell;
  p.batch = s.batch, p.steps = s.steps, p.input = s.input, p.hidden = s.hidden;
  p.gate_act.kind = c.gate;
  p.gate_act.hs_slope = c.divide ? 1.0 / 6.0 : 0.2;
  p.gate_act.hs_offset = 0.5;
  p.gate_act.hs_divide = c.divide;
  p.gate_act.hs_grad_edges_inclusive = c.inclusive;
  p.two_biases = c.two_biases;
  p.gru_reset_after = c.reset_after;
  p.gru_z_keeps_old = c.z_keeps_old;
  p.peepholes = c.peepholes;
  p.dh_last_step = dh_last;
  return p;
}

// The gtest parameter name of a cell.
inline std::string rnn_case_name(const RnnCase& c) { return case_test_name(c.name); }

// gtest prints a parameter with PrintTo when it finds one (by argument lookup): the row's name.
inline void PrintTo(const RnnCase& c, std::ostream* os) { *os << c.name; }
inline void PrintTo(const RnnShapeCase& c, std::ostream* os) { *os << c.name; }

}  // namespace driftlab
