// Internal to convert/: reading an ONNX graph's attributes and tensors, shared by the zoo match
// (onnx_import.cpp) and the graph importer (onnx_graph_import.cpp). Protobuf types stay inside convert/.
#pragma once
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace driftlab {
namespace convert {
namespace detail {

using onnx::AttributeProto;
using onnx::NodeProto;

inline std::string attr_str(const AttributeProto& a) {
  std::ostringstream os;
  os << a.name() << "=";
  switch (a.type()) {
    case AttributeProto::INT: os << a.i(); break;
    case AttributeProto::FLOAT: os << a.f(); break;
    case AttributeProto::STRING: os << "'" << a.s() << "'"; break;
    case AttributeProto::INTS:
      os << "[";
      for (int i = 0; i < a.ints_size(); ++i) os << (i ? "," : "") << a.ints(i);
      os << "]";
      break;
    case AttributeProto::FLOATS:
      os << "[";
      for (int i = 0; i < a.floats_size(); ++i) os << (i ? "," : "") << a.floats(i);
      os << "]";
      break;
    case AttributeProto::STRINGS:
      os << "[";
      for (int i = 0; i < a.strings_size(); ++i) os << (i ? "," : "") << "'" << a.strings(i) << "'";
      os << "]";
      break;
    case AttributeProto::TENSOR: os << "<tensor>"; break;
    default: os << "<" << AttributeProto::AttributeType_Name(a.type()) << ">";
  }
  return os.str();
}

// "node 'Conv_0' (Conv; kernel_shape=[5,5], pads=[0,0,0,0])"
inline std::string node_str(const NodeProto& n) {
  std::ostringstream os;
  os << "node '" << n.name() << "' (" << n.op_type();
  for (int i = 0; i < n.attribute_size(); ++i) os << (i ? ", " : "; ") << attr_str(n.attribute(i));
  os << ")";
  return os.str();
}

inline const AttributeProto* find_attr(const NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
inline int64_t attr_i(const NodeProto& n, const char* name, int64_t def) {
  const AttributeProto* a = find_attr(n, name);
  return a ? a->i() : def;
}
inline float attr_f(const NodeProto& n, const char* name, float def) {
  const AttributeProto* a = find_attr(n, name);
  return a ? a->f() : def;
}
// The shortest decimal that rounds to float f, as a double: ONNX stores float attributes in
// float32, so the exporter's epsilon 1e-5 and momentum 0.9 arrive as 9.99999975e-06 and
// 0.899999976; read this way they are 1e-5 and 0.9 again, the values PyTorch computes with in
// double (a float64 step then equals PyTorch's; measured: 2.5e-7 of a running statistic apart
// otherwise). Any float is the rounding of at most 9 significant digits.
inline double float_as_decimal(float f) {
  if (!std::isfinite(f)) return f;
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
    const double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == f) return d;
  }
  return f;
}
inline double attr_decimal(const NodeProto& n, const char* name, double def) {
  const AttributeProto* a = find_attr(n, name);
  return a ? float_as_decimal(a->f()) : def;
}
inline std::vector<int64_t> attr_ints(const NodeProto& n, const char* name, std::vector<int64_t> def) {
  const AttributeProto* a = find_attr(n, name);
  if (!a) return def;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
inline std::string attr_s(const NodeProto& n, const char* name, const std::string& def) {
  const AttributeProto* a = find_attr(n, name);
  return a ? a->s() : def;
}

// A message on one line (ONNX's checker writes the node it names over several).
inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  std::string out;
  for (char c : s)
    if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// A file's bytes; `what` names the reader in the error ("import onnx: cannot open F").
inline std::string read_file_bytes(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  check(static_cast<bool>(f), what, ": cannot open ", path);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// An ONNX model from a file's bytes that ONNX's checker accepts; errors name the file.
inline onnx::ModelProto parse_checked_model(const std::string& bytes, const std::string& file) {
  onnx::ModelProto m;
  check(m.ParseFromString(bytes), "import onnx: ", file, ": not an ONNX model (the protobuf does not parse; ",
        bytes.size(), " bytes)");
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    fail("import onnx: ", file, ": ONNX's checker refuses it: ", one_line(e.what()));
  }
  return m;
}

// The opset of the default ONNX domain the model imports (0 when none).
inline int64_t default_opset(const onnx::ModelProto& m) {
  int64_t opset = 0;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  return opset;
}

// A float32 initializer, Constant or .pb tensor as a Tensor; its dims checked against the data it
// holds before anything is allocated; errors name the file and the tensor.
inline Tensor tensor_to_float(const std::string& file, const onnx::TensorProto& t) {
  check(t.data_type() == onnx::TensorProto::FLOAT, "import onnx: ", file, ": tensor '", t.name(), "' is ",
        onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t.data_type())), ", float32 wanted");
  check(t.data_location() != onnx::TensorProto::EXTERNAL, "import onnx: ", file, ": tensor '", t.name(),
        "' is stored in an external file (not read: keep the weights inside the .onnx file)");
  Shape dims(t.dims().begin(), t.dims().end());
  // the size the dims claim, checked against the data held before anything is allocated
  const std::size_t held = t.raw_data().empty() ? static_cast<std::size_t>(t.float_data_size()) : t.raw_data().size() / 4;
  std::size_t claimed = 1;
  for (int64_t d : dims) {
    check(d >= 0 && (d == 0 || claimed <= held / static_cast<std::size_t>(d) + 1), "import onnx: ", file, ": tensor '",
          t.name(), "' has dims ", shape_str(dims), " for ", held, " values");
    claimed *= static_cast<std::size_t>(d);
  }
  check(claimed == held && (t.raw_data().size() % 4) == 0, "import onnx: ", file, ": tensor '", t.name(), "' has ",
        t.raw_data().empty() ? held : t.raw_data().size(), t.raw_data().empty() ? " values" : " bytes of raw data",
        " for shape ", shape_str(dims));
  Tensor out(dims, DType::f32);
  const std::size_t n_el = static_cast<std::size_t>(out.numel());
  if (!t.raw_data().empty()) {
    check(t.raw_data().size() == n_el * 4, "import onnx: ", file, ": tensor '", t.name(), "' has ",
          t.raw_data().size(), " bytes of raw data for shape ", shape_str(dims));
    std::memcpy(out.data<float>(), t.raw_data().data(), n_el * 4);
  } else {
    check(static_cast<std::size_t>(t.float_data_size()) == n_el, "import onnx: ", file, ": tensor '", t.name(),
          "' has ", t.float_data_size(), " values for shape ", shape_str(dims));
    for (std::size_t i = 0; i < n_el; ++i) out.data<float>()[i] = t.float_data(static_cast<int>(i));
  }
  return out;
}

}  // namespace detail
}  // namespace convert
}  // namespace driftlab
