#include "models/model_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "models/models.h"

namespace driftlab {

namespace {
constexpr char kMagic[8] = {'D', 'R', 'I', 'F', 'T', 'L', 'A', 'B'};

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const std::string& s, std::size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[off + i]);
  return v;
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(fd >= 0, "write: cannot create ", tmp, ": ", std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      int e = errno;
      ::close(fd);
      std::remove(tmp.c_str());
      fail("write: ", tmp, " at offset ", done, ": ", std::strerror(e));
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    fail("write: cannot flush ", tmp, ": ", std::strerror(e));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    fail("write: cannot rename ", tmp, " to ", path, ": ", std::strerror(e));
  }
}

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
  h["metadata"] = metadata;
  std::string data;
  nlohmann::json tensors = nlohmann::json::array();
  auto tensors_of = model.net->named_params();
  for (auto& nb : model.net->named_buffers()) tensors_of.push_back(nb);
  for (auto& np : tensors_of) {
    const Tensor& t = np.second->value;
    tensors.push_back({{"name", np.first},
                       {"dtype", dtype_name(t.dtype())},
                       {"shape", t.shape()},
                       {"offset", data.size()},
                       {"nbytes", t.nbytes()}});
    data.append(static_cast<const char*>(t.raw()), t.nbytes());
  }
  h["tensors"] = tensors;
  std::string header = h.dump();
  std::string out(kMagic, 8);
  put_u32(out, kModelFileVersion);
  put_u64(out, header.size());
  out += header;
  out += data;
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size()));
  put_u32(out, static_cast<uint32_t>(crc));
  write_file_atomic(path, out);
}

LoadedModel load_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "model file: cannot open ", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  const std::size_t size = s.size();
  check(size >= 24, "model file: ", path, ": truncated at offset ", size, " (a model file has at least 24 bytes)");
  check(std::memcmp(s.data(), kMagic, 8) == 0, "model file: ", path, ": bad magic at offset 0 (not a driftlab model)");
  uint32_t version = static_cast<uint32_t>(get_le(s, 8, 4));
  check(version >= kOldestModelFileVersion && version <= kModelFileVersion, "model file: ", path, ": version ", version,
        " at offset 8 is not supported (this build reads versions ", kOldestModelFileVersion, " to ", kModelFileVersion,
        ")");
  uint64_t hlen = get_le(s, 12, 8);
  check(hlen <= size - 24, "model file: ", path, ": header length ", hlen, " at offset 12 exceeds the ", size - 24,
        " bytes left");
  uint32_t stored_crc = static_cast<uint32_t>(get_le(s, size - 4, 4));
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(size - 4));
  check(stored_crc == static_cast<uint32_t>(crc), "model file: ", path, ": CRC mismatch at offset ", size - 4,
        " (file is corrupt or truncated)");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(s.substr(20, hlen));
  } catch (const std::exception& e) {
    fail("model file: ", path, ": header JSON at offset 20 is invalid: ", e.what());
  }
  const std::size_t data_start = 20 + hlen, data_len = size - 4 - data_start;
  LoadedModel out;
  try {
    Policy policy = Policy::parse(h.at("policy").get<std::string>());
    // Token models are rebuilt at the vocabulary and length they were trained with.
    ModelArgs args;
    args.num_ids = h.value("num_ids", int64_t{0});
    if (args.num_ids > 0) args.steps = h.at("input_shape").get<Shape>().at(0);
    out.model = build_model(h.at("model").get<std::string>(), policy, 0, args);
    out.metadata = h.value("metadata", nlohmann::json::object());
    check(h.at("dtype").get<std::string>() == dtype_name(out.model.dtype()), "model file: ", path, ": dtype ",
          h.at("dtype").get<std::string>(), " does not match the policy's ", dtype_name(out.model.dtype()));
    auto params = out.model.net->named_params();
    for (auto& nb : out.model.net->named_buffers()) params.push_back(nb);
    const auto& tensors = h.at("tensors");
    check(tensors.size() == params.size(), "model file: ", path, ": ", tensors.size(), " tensors, but model ",
          out.model.name, " has ", params.size(), " parameters");
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& t = tensors[i];
      Tensor& v = params[i].second->value;
      std::string name = t.at("name").get<std::string>();
      check(name == params[i].first, "model file: ", path, ": tensor ", i, " is '", name, "', expected '",
            params[i].first, "'");
      // Version 1 stored every tensor in the model's dtype; version 2 names each tensor's.
      const std::string dt = version >= 2 ? t.at("dtype").get<std::string>() : h.at("dtype").get<std::string>();
      DType file_dtype;
      try {
        file_dtype = dtype_from_name(dt);
      } catch (const Error& e) {
        fail("model file: ", path, ": tensor '", name, "': ", e.what());
      }
      check(file_dtype == v.dtype(), "model file: ", path, ": tensor '", name, "' is ", dt, ", parameter ",
            params[i].first, " of ", out.model.name, " is ", dtype_name(v.dtype()));
      Shape shape = t.at("shape").get<Shape>();
      check(shape == v.shape(), "model file: ", path, ": tensor '", name, "' has shape ", shape_str(shape),
            ", expected ", shape_str(v.shape()));
      uint64_t off = t.at("offset").get<uint64_t>(), nb = t.at("nbytes").get<uint64_t>();
      check(nb == v.nbytes() && off <= data_len && nb <= data_len - off, "model file: ", path, ": tensor '", name,
            "' at offset ", data_start + off, " (", nb, " bytes) overruns the data section (", data_len, " bytes)");
      std::memcpy(v.raw(), s.data() + data_start + off, nb);
    }
  } catch (const nlohmann::json::exception& e) {
    fail("model file: ", path, ": header at offset 20 is missing a field: ", e.what());
  }
  return out;
}

}  // namespace driftlab
