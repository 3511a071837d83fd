// Eigen, for every file that uses it (the Eigen kernels, the LSTM/GRU layer's orthogonal
// initialiser). GCC 12 warns inside its own AVX-512 intrinsics (_mm512_undefined_*, GCC bug
// 105593) when Eigen inlines them under -march=native; the warnings are false and are silenced
// for Eigen's headers only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Dense>
#pragma GCC diagnostic pop
