// A labelled dataset in memory: what every reader (IDX, CIFAR-10, IMDb, the synthetic
// generator) returns and what training, evaluation, drift and attacks consume. Its own
// header so that code which only passes datasets around does not pull in a file reader.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace driftlab {

struct Dataset {
  // float32, sample-major: [N,1,28,28] (IDX, pixel/255), [N,28,28] (seq-*: rows as steps),
  // [N,3,32,32] (CIFAR-10, pixel/255), [N,L] (IMDb token ids, exact as floats).
  Tensor images;
  std::vector<int32_t> labels;  // N labels in 0..num_classes-1
  int num_classes = 0;
  std::string name;             // "<dataset>/<split>", e.g. "fashion-mnist/test"
};

}  // namespace driftlab
