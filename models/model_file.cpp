#include "models/model_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "engine/train/nonfinite.h"
#include "models/models.h"

namespace driftlab {

namespace {
// The model file's container (engine/io/container.h).
const ContainerFormat kModelFormat{"model file", {'D', 'R', 'I', 'F', 'T', 'L', 'A', 'B'}, "(not a driftlab model)",
                                   "a model file has at least 24 bytes", kOldestModelFileVersion, kModelFileVersion,
                                   kMaxModelHeaderBytes, " (not a seekable regular file)", false, true};
}  // namespace


void save_model(const std::string& path, Model& model, const nlohmann::json& metadata) {
  nlohmann::json h;
  h["format"] = "driftlab-model";
  h["model"] = model.name;
  h["policy"] = model.policy.to_string();
  h["policy_full"] = model.policy.to_full_string();
  h["dtype"] = dtype_name(model.dtype());
  h["input_shape"] = model.input_shape;
  h["num_classes"] = model.num_classes;
  if (model.num_ids > 0) h["num_ids"] = model.num_ids;  // token models: the embedding rows
  if (!model.graph.empty()) h["graph"] = nlohmann::json::parse(model.graph);  // graph models: the spec
  h["metadata"] = metadata;
  ContainerParts parts;  // the tensors' bytes are written from their own memory
  nlohmann::json tensors = nlohmann::json::array();
  auto tensors_of = model.net->named_params();
  for (auto& nb : model.net->named_buffers()) tensors_of.push_back(nb);
  for (auto& np : tensors_of) tensors.push_back(parts.add_tensor(np.first, np.second->value));
  h["tensors"] = tensors;
  parts.header = h.dump();
  write_container_atomic(path, kModelFormat, kModelFileVersion, parts);
}

namespace {
using nlohmann::json;

void read_at(std::istream& in, uint64_t at, void* dst, uint64_t n, const std::string& path) {
  container_read_at(in, at, dst, n, path, kModelFormat);
}

// A header value for a message: short, and safe to print whatever the bytes were.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Type-checked access to the header: json::get would cast a float where an integer belongs
// (undefined behaviour past int64) and throw its own exception type on a string.
struct Header {
  const std::string& path;

  const json& member(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key))
      fail("model file: ", path, ": header at offset 20 is missing a field: ", where, key);
    return obj.at(key);
  }
  std::string string(const json& obj, const char* key, const std::string& where = "") const {
    const json& v = member(obj, key, where);
    check(v.is_string(), "model file: ", path, ": header field ", where, key, " is ", shown(v), ", not a string");
    return v.get<std::string>();
  }
  // An integer >= 0 (JSON integers only: 3.0 is not a count).
  uint64_t count(const json& v, const std::string& what) const {
    check(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), "model file: ", path,
          ": header field ", what, " is ", shown(v), ", not an integer >= 0");
    return v.get<uint64_t>();
  }
  int64_t count64(const json& v, const std::string& what) const {
    const uint64_t c = count(v, what);
    check(c <= static_cast<uint64_t>(INT64_MAX), "model file: ", path, ": header field ", what, " = ", c,
          " is over 2^63-1");
    return static_cast<int64_t>(c);
  }
  Shape shape(const json& v, const std::string& what) const {
    check(v.is_array(), "model file: ", path, ": header field ", what, " is ", shown(v), ", not a shape");
    Shape s;
    for (std::size_t i = 0; i < v.size(); ++i) s.push_back(count64(v[i], what + "[" + std::to_string(i) + "]"));
    return s;
  }
  // input_mean / input_std are applied to every input by eval and predict.
  void check_norm(const json& meta) const {
    if (meta.contains("input_mean")) {
      const json& m = meta.at("input_mean");
      check(m.is_number() && std::isfinite(m.get<double>()), "model file: ", path, ": metadata input_mean is ",
            shown(m), ", not a finite number");
    }
    if (meta.contains("input_std")) {
      const json& s = meta.at("input_std");
      check(s.is_number() && std::isfinite(s.get<double>()) && s.get<double>() > 0, "model file: ", path,
            ": metadata input_std is ", shown(s), ", not a finite number > 0");
    }
  }
};

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t offset, nbytes;
};

uint64_t param_bytes(Model& m) {
  uint64_t n = 0;
  for (auto& np : m.net->named_params()) n += np.second->value.nbytes();
  for (auto& nb : m.net->named_buffers()) n += nb.second->value.nbytes();
  return n;
}

// The bytes of every parameter and buffer of a token model with num_ids embedding rows, found
// without building it at that size: two builds with a few rows give the bytes per row (the
// embedding's width times its dtype), and nothing else in the model depends on num_ids. The
// exact shapes are compared tensor by tensor after the real build.
uint64_t token_model_bytes(const std::string& name, const Policy& policy, uint64_t num_ids, const std::string& path) {
  constexpr int64_t kProbeIds = 3;
  ModelArgs probe_a, probe_b;
  probe_a.num_ids = kProbeIds, probe_a.steps = 1;
  probe_b.num_ids = kProbeIds + 1, probe_b.steps = 1;
  Model a = build_model(name, policy, 0, probe_a);
  Model b = build_model(name, policy, 0, probe_b);
  const uint64_t at_probe = param_bytes(a), row = param_bytes(b) - at_probe;
  const uint64_t base = at_probe - kProbeIds * row;
  uint64_t rows_bytes = 0, total = 0;
  if (__builtin_mul_overflow(num_ids, row, &rows_bytes) || __builtin_add_overflow(base, rows_bytes, &total))
    fail("model file: ", path, ": num_ids=", num_ids, " rows of ", row,
         " bytes overflow 2^64 bytes; refused before building ", name);
  return total;
}
}  // namespace


// Runs f, which parses or builds what header field `field` names; a driftlab error from it is
// rethrown naming the file and the field (the bare message would not say where it came from).
template <typename F>
auto from_header(const std::string& path, const char* field, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    fail("model file: ", path, ": header field ", field, ": ", e.what());
  }
}

LoadedModel load_model(const std::string& path) {
  std::error_code ec;
  check(!std::filesystem::is_directory(path, ec), "model file: ", path, ": is a directory, not a model file");
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "model file: cannot open ", path);
  return load_model(f, path);
}

LoadedModel load_model(std::istream& in, const std::string& path) {
  return load_model(in, path, [&path](const std::string& name, const Policy& policy, const ModelArgs& args,
                                      const json& meta) {
    check(!meta.contains("quantized"), "model file: ", path, " holds an int8 model (written by driftlab quantize): ",
          "it loads through quant/model_io.h (every driftlab command does)");
    return build_model(name, policy, 0, args);
  });
}

LoadedModel load_model(std::istream& in, const std::string& path, const ModelBuilder& build) {
  const ContainerHeader c = read_container(in, path, kModelFormat);
  const json& h = c.header;
  const uint32_t version = c.version;
  const uint64_t data_start = c.data_start(), data_len = c.data_len();
  const Header hd{path};

  // Everything the header claims is checked against the file before the model is built, so a
  // small file cannot make us allocate what it does not hold.
  check(h.is_object(), "model file: ", path, ": header at offset 20 is ", shown(h), ", not a JSON object");
  const std::string model_name = hd.string(h, "model"), model_dtype = hd.string(h, "dtype");
  const std::string policy_spec = hd.string(h, "policy");
  const json& tensors = hd.member(h, "tensors", "");
  check(tensors.is_array(), "model file: ", path, ": header field tensors is ", shown(tensors), ", not an array");
  std::vector<TensorEntry> entries;
  uint64_t next = 0;  // tensors lie back to back in header order, from the start of the data
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const json& t = tensors[i];
    const std::string where = "tensors[" + std::to_string(i) + "].";
    TensorEntry e;
    e.name = hd.string(t, "name", where);
    // Version 1 stored every tensor in the model's dtype; version 2 names each tensor's.
    const std::string dt = version >= 2 ? hd.string(t, "dtype", where) : model_dtype;
    try {
      e.dtype = dtype_from_name(dt);
    } catch (const Error& err) {
      fail("model file: ", path, ": tensor '", e.name, "': ", err.what());
    }
    e.shape = hd.shape(hd.member(t, "shape", where), where + "shape");
    e.offset = hd.count(hd.member(t, "offset", where), where + "offset");
    e.nbytes = hd.count(hd.member(t, "nbytes", where), where + "nbytes");
    const uint64_t numel = static_cast<uint64_t>(shape_numel(e.shape));
    uint64_t want = 0;
    check(!__builtin_mul_overflow(numel, dtype_size(e.dtype), &want) && want == e.nbytes, "model file: ", path,
          ": tensor '", e.name, "' of shape ", shape_str(e.shape), " and dtype ", dt, " declares ", e.nbytes,
          " bytes, its shape holds ", numel, " elements of ", dtype_size(e.dtype), " bytes");
    check(e.offset == next, "model file: ", path, ": tensor '", e.name, "' at data offset ", e.offset,
          ", expected ", next, " (tensors are stored back to back in header order)");
    check(e.nbytes <= data_len - next, "model file: ", path, ": tensor '", e.name, "' at offset ",
          data_start + e.offset, " (", e.nbytes, " bytes) overruns the data section (", data_len, " bytes)");
    next += e.nbytes;
    entries.push_back(std::move(e));
  }
  check(next == data_len, "model file: ", path, ": ", data_len - next, " bytes after the last tensor at offset ",
        data_start + next, " (the header's tensors hold ", next, " of the ", data_len, " data bytes)");
  // save_model(path, m, {}) writes null: no metadata.
  const json meta = h.contains("metadata") && !h.at("metadata").is_null() ? h.at("metadata") : json::object();
  check(meta.is_object(), "model file: ", path, ": header field metadata is ", shown(meta), ", not an object");
  hd.check_norm(meta);

  LoadedModel out;
  const Policy policy = from_header(path, "policy", [&] { return Policy::parse(policy_spec); });
  // Token models are rebuilt at the vocabulary and length they were trained with; the bytes
  // that asks for must be the bytes the file holds, before anything that size is allocated.
  ModelArgs args;
  if (h.contains("num_ids")) args.num_ids = hd.count64(h.at("num_ids"), "num_ids");
  if (args.num_ids > 0) {
    const Shape in_shape = hd.shape(hd.member(h, "input_shape", ""), "input_shape");
    check(!in_shape.empty(), "model file: ", path, ": header field input_shape is [], a token model needs [steps]");
    args.steps = in_shape[0];
    const uint64_t need = from_header(path, "model", [&] {
      return token_model_bytes(model_name, policy, static_cast<uint64_t>(args.num_ids), path);
    });
    check(need == data_len, "model file: ", path, ": num_ids=", args.num_ids, " makes ", model_name, " hold ", need,
          " bytes of tensors, the file holds ", data_len, "; refused before building it");
  }
  // A graph model's spec, whose parameters must fit the data the file holds (checked as the graph
  // is built, before each is allocated).
  if (h.contains("graph")) {
    check(h.at("graph").is_object(), "model file: ", path, ": header field graph is ", shown(h.at("graph")),
          ", not an object");
    args.graph = h.at("graph").dump();
    args.max_param_bytes = data_len;
  }
  out.model = from_header(path, "model", [&] { return build(model_name, policy, args, meta); });
  out.metadata = meta;
  check(model_dtype == dtype_name(out.model.dtype()), "model file: ", path, ": dtype ", model_dtype,
        " does not match the policy's ", dtype_name(out.model.dtype()));
  auto params = out.model.net->named_params();
  for (auto& nb : out.model.net->named_buffers()) params.push_back(nb);
  check(entries.size() == params.size(), "model file: ", path, ": ", entries.size(), " tensors, but model ",
        out.model.name, " has ", params.size(), " parameters");
  for (std::size_t i = 0; i < params.size(); ++i) {
    const TensorEntry& e = entries[i];
    Tensor& v = params[i].second->value;
    check(e.name == params[i].first, "model file: ", path, ": tensor ", i, " is '", e.name, "', expected '",
          params[i].first, "'");
    check(e.dtype == v.dtype(), "model file: ", path, ": tensor '", e.name, "' is ", dtype_name(e.dtype),
          ", parameter ", params[i].first, " of ", out.model.name, " is ", dtype_name(v.dtype()));
    check(e.shape == v.shape(), "model file: ", path, ": tensor '", e.name, "' has shape ", shape_str(e.shape),
          ", expected ", shape_str(v.shape()));
    read_at(in, data_start + e.offset, v.raw(), e.nbytes, path);
    // A non-finite weight or statistic: the file was written from a run that had diverged, or was
    // corrupted past its CRC; refused here rather than found as NaN logits later.
    if (const int64_t bad = is_float(v.dtype()) ? first_nonfinite(v) : -1; bad >= 0)
      fail("model file: ", path, ": tensor '", e.name, "' element ", bad, " (at offset ",
           data_start + e.offset + static_cast<uint64_t>(bad) * dtype_size(v.dtype()), ") is ",
           std::isnan(v.at(bad)) ? "nan" : "infinite", "; a model file holds finite values");
  }
  return out;
}

}  // namespace driftlab
