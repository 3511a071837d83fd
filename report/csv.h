// One CSV cell (RFC 4180), for every CSV driftlab writes: quoted, its quotes doubled, when it holds
// a comma, a quote or a line break; a policy ("torch,conv_kernel_flip=true") and a JSON record do.
#pragma once
#include <string>

namespace driftlab {
namespace report {

std::string csv_cell(const std::string& v);

}  // namespace report
}  // namespace driftlab
