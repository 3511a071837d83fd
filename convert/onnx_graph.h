// Internal to convert/: the ONNX graph builder the float and the int8 exporters share (unique
// value names, typed initializers, nodes with attributes). Protobuf types stay inside convert/.
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "convert/onnx_export.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/ops/conv2d.h"

namespace driftlab {
namespace convert {
namespace detail {

class Graph {
 public:
  explicit Graph(onnx::GraphProto* g) : g_(g) {}

  std::string fresh(const std::string& base) { return base + "_" + std::to_string(counter_++); }

  // An initializer from raw little-endian element bytes (float32, int8, uint8, int32: what the host
  // stores).
  std::string raw(const std::string& name, onnx::TensorProto_DataType type, const std::vector<int64_t>& dims,
                  const void* data, std::size_t bytes) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(data), bytes));
    return name;
  }
  std::string floats(const std::string& name, const Shape& dims, const float* data) {
    return raw(name, onnx::TensorProto::FLOAT, dims, data, static_cast<std::size_t>(shape_numel(dims)) * 4);
  }
  std::string floats(const std::string& name, const Tensor& t, const Shape& dims) {
    check(t.dtype() == DType::f32 && shape_numel(dims) == t.numel(), "export onnx: ", name, " has ", t.numel(),
          " elements, ", shape_str(dims), " wanted");
    return floats(name, dims, t.data<float>());
  }
  std::string scalar(const std::string& name, float v) { return floats(name, Shape{}, &v); }
  // An int8/uint8/int32 tensor as stored (its own dtype), with `dims` (same element count).
  std::string integers(const std::string& name, const Tensor& t, const Shape& dims) {
    check(shape_numel(dims) == t.numel(), "export onnx: ", name, " has ", t.numel(), " elements, ", shape_str(dims),
          " wanted");
    return raw(name, onnx_type(t.dtype(), name), dims, t.raw(), t.nbytes());
  }
  // A zero point: a scalar (dims {}) or a vector of `n` equal values, of an integer dtype.
  std::string zero_points(const std::string& name, DType dt, int32_t v, int64_t n = -1) {
    const int64_t count = n < 0 ? 1 : n;
    std::string bytes;
    for (int64_t i = 0; i < count; ++i) {
      if (dt == DType::i32) {
        bytes.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        check(dt == DType::i8 || dt == DType::u8, "export onnx: zero point ", name, " of dtype ", dtype_name(dt));
        const char b = static_cast<char>(static_cast<uint8_t>(dt == DType::i8 ? static_cast<int8_t>(v) : v));
        bytes.push_back(b);
      }
    }
    return raw(name, onnx_type(dt, name), n < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{n}, bytes.data(),
               bytes.size());
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return name;
  }

  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                        const std::string& name) {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return n;
  }
  // The common case: one output, named after the node.
  std::string op(const std::string& op, const std::vector<std::string>& in, const std::string& name,
                 onnx::NodeProto** out = nullptr) {
    const std::string y = fresh(name);
    onnx::NodeProto* n = node(op, in, {y}, y);
    if (out) *out = n;
    return y;
  }

  // A graph output: `name` with a symbolic batch axis and the per-sample dims.
  void output(const std::string& name, onnx::TensorProto_DataType type, const Shape& per_sample);

  static onnx::TensorProto_DataType onnx_type(DType dt, const std::string& what) {
    switch (dt) {
      case DType::f32: return onnx::TensorProto::FLOAT;
      case DType::i8: return onnx::TensorProto::INT8;
      case DType::u8: return onnx::TensorProto::UINT8;
      case DType::i32: return onnx::TensorProto::INT32;
      default: fail("export onnx: ", what, " has dtype ", dtype_name(dt), ", which has no ONNX initializer here");
    }
  }

 private:
  onnx::GraphProto* g_;
  int counter_ = 0;
};

inline void attr_ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void attr_int(onnx::NodeProto* n, const char* name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr_float(onnx::NodeProto* n, const char* name, float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void attr_floats(onnx::NodeProto* n, const char* name, const std::vector<float>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
inline void attr_strings(onnx::NodeProto* n, const char* name, const std::vector<std::string>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const auto& x : v) a->add_strings(x);
}

// A Conv / QLinearConv node's geometry: kernel, strides, dilations, the given [t, l, b, r] pads, the
// group count (1 for every int8 convolution: quant/ refuses groups).
inline void attr_conv(onnx::NodeProto* n, const Conv2dParams& p, const std::vector<int64_t>& pads) {
  attr_ints(n, "kernel_shape", {p.r, p.s});
  attr_ints(n, "strides", {p.stride_h, p.stride_w});
  attr_ints(n, "dilations", {p.dil_h, p.dil_w});
  attr_ints(n, "pads", pads);
  attr_int(n, "group", p.groups);
}

// A graph input or output with a symbolic batch axis and the per-sample dims.
inline void set_shape(onnx::ValueInfoProto* v, const Shape& per_sample, onnx::TensorProto_DataType type) {
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  auto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("batch");
  for (int64_t d : per_sample) s->add_dim()->set_dim_value(d);
}

inline void Graph::output(const std::string& name, onnx::TensorProto_DataType type, const Shape& per_sample) {
  onnx::ValueInfoProto* v = g_->add_output();
  v->set_name(name);
  set_shape(v, per_sample, type);
}

// The int8 half (convert/onnx_quant_export.cpp): whether `m` is a quantized model (quant/'s layer
// sequence, QuantizeLayer first), and its graph from the float input value `x` to the float logits
// (the returned value name); `r` gets a line per layer and the notes.
bool is_int8_model(Model& m);
std::string emit_int8(Graph& g, Model& m, const std::string& x, const OnnxExportOptions& o, OnnxExport& r);

}  // namespace detail
}  // namespace convert
}  // namespace driftlab
