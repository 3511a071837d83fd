// The bad-input catalogue's machinery (tests/cli/test_bad_input.cpp says what a row asserts):
// writing valid inputs and breaking them, the Row, and check_row, which runs one row through the
// built driftlab binary and asserts its exit code, message, and outputs. Shared by the catalogue
// of the data/model/CLI families (test_bad_input.cpp) and that of the commands added since
// (test_bad_input_commands.cpp).
#pragma once
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/npy.h"
#include "kernels/cuda/device.h"
#include "models/model_file.h"
#include "models/models.h"
#include "models/weights_npy.h"
#include "tests/cli/cli_util.h"

namespace bad_input {

namespace fs = std::filesystem;
using driftlab::cli_test::CliRun;
using driftlab::cli_test::run_driftlab;
using nlohmann::json;

// ---------- writing valid inputs, then breaking them ----------

inline std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void write_all(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline void be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// IDX (engine/data/idx.h): 0, 0, type 0x08, ndim, big-endian dims, data.
inline std::string idx_bytes(const std::vector<uint32_t>& dims, uint8_t type = 0x08) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) be32(s, d);
  uint64_t n = 1;
  for (uint32_t d : dims) n *= d;
  for (uint64_t i = 0; i < n; ++i) s.push_back(static_cast<char>(dims.size() == 1 ? i % 10 : (i * 7) & 0xff));
  return s;
}

constexpr uint32_t kIdxItems = 8;  // images per split: lenet1 trains on them in milliseconds
const char* const kIdxStems[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                 "t10k-labels-idx1-ubyte"};

// A valid Fashion-MNIST-shaped folder of raw IDX files.
inline void write_idx_dir(const fs::path& dir) {
  for (const char* stem : kIdxStems) {
    const bool images = std::strstr(stem, "images") != nullptr;
    write_all(dir / stem, images ? idx_bytes({kIdxItems, 28, 28}) : idx_bytes({kIdxItems}));
  }
}

inline std::string gzip(const std::string& raw) {
  uLongf cap = compressBound(static_cast<uLong>(raw.size())) + 64;
  std::string out(cap, '\0');
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // +16: gzip wrapper
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = static_cast<uInt>(cap);
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A valid CIFAR-10 binary folder: 2 records per file (label, then 3072 pixel bytes).
inline std::string cifar_records(int n) {
  std::string s;
  for (int r = 0; r < n; ++r) {
    s.push_back(static_cast<char>(r % 10));
    for (int j = 0; j < 3072; ++j) s.push_back(static_cast<char>((j + r) & 0xff));
  }
  return s;
}
inline void write_cifar_dir(const fs::path& dir) {
  for (int b = 1; b <= 5; ++b) write_all(dir / ("data_batch_" + std::to_string(b) + ".bin"), cifar_records(2));
  write_all(dir / "test_batch.bin", cifar_records(2));
}

inline driftlab::Model small_model(const std::string& name = "lenet1", const std::string& policy = "torch") {
  driftlab::ModelArgs args;
  if (name == "lstm-imdb") args = {12, 8};  // a 10-word vocabulary (+ padding, OOV), 8 tokens
  return driftlab::build_model(name, driftlab::Policy::parse(policy), 1, args);
}

// A valid model file at p (lenet1 under torch unless told).
inline void write_model(const fs::path& p, const std::string& name = "lenet1", const json& meta = json::object()) {
  fs::create_directories(p.parent_path());
  driftlab::Model m = small_model(name);
  driftlab::save_model(p.string(), m, meta);
}

// A model file's parts (models/model_file.h: magic, u32 version, u64 header length, JSON, data, CRC).
struct ModelParts {
  uint32_t version = 0;
  json header;
  std::string data;
};

inline uint64_t le(const std::string& s, std::size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}
inline void put_le(std::string& s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline ModelParts split_model(const std::string& s) {
  ModelParts p;
  p.version = static_cast<uint32_t>(le(s, 8, 4));
  const uint64_t hlen = le(s, 12, 8);
  p.header = json::parse(s.substr(20, hlen));
  p.data = s.substr(20 + hlen, s.size() - 4 - 20 - hlen);
  return p;
}

// Reassembles a model file with a correct CRC: a header edit is then seen by the checks after
// the CRC, not refused as corruption.
inline std::string join_model(uint32_t version, const std::string& header_text, const std::string& data) {
  std::string s = "DRIFTLAB";
  put_le(s, version, 4);
  put_le(s, header_text.size(), 8);
  s += header_text + data;
  put_le(s, crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())), 4);
  return s;
}

// Writes a valid model to p, then rewrites its header through edit (CRC recomputed).
inline void write_model_edited(const fs::path& p, const std::function<void(json&)>& edit, const std::string& name = "lenet1") {
  write_model(p, name);
  ModelParts m = split_model(read_all(p));
  edit(m.header);
  write_all(p, join_model(m.version, m.header.dump(), m.data));
}

// Writes a valid model to p, then sets the first float of its first tensor to v (CRC recomputed).
inline void write_model_with_weight(const fs::path& p, float v) {
  write_model(p);
  ModelParts m = split_model(read_all(p));
  std::memcpy(&m.data[0], &v, sizeof v);
  write_all(p, join_model(m.version, m.header.dump(), m.data));
}

// An .npy input for lenet1 ([n,1,28,28] float32, values in [0,1)) with optional poison at index 5.
inline void write_input(const fs::path& p, driftlab::Shape shape = {2, 1, 28, 28}, float poison = 0.25f) {
  fs::create_directories(p.parent_path());
  driftlab::Tensor x(shape, driftlab::DType::f32);
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = static_cast<float>(i % 17) / 17.0f;
  if (x.numel() > 5) d[5] = poison;
  driftlab::write_npy(p.string(), x);
}

// An .npy file whose header dict is `dict` (padded as numpy pads) followed by `data_bytes` bytes.
inline std::string npy_with_dict(const std::string& dict, std::size_t data_bytes, char major = 1) {
  std::string body = dict;
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  while ((6 + 2 + len_bytes + body.size() + 1) % 64) body += ' ';
  body += '\n';
  std::string s = "\x93NUMPY";
  s += major;
  s += '\0';
  put_le(s, body.size(), static_cast<int>(len_bytes));
  return s + body + std::string(data_bytes, '\0');
}
constexpr std::size_t kInputBytes = 2 * 28 * 28 * 4;  // [2,1,28,28] float32

// lenet1's weights exported as .npy files (the torch layout) into dir.
inline void write_weights_dir(const fs::path& dir) {
  driftlab::Model m = small_model();
  driftlab::export_weights_npy(m, dir.string(), driftlab::NpyLayout::framework);
}

// ---------- the table ----------

struct Row {
  std::string name;
  std::function<void(const fs::path&)> make;  // writes the bad input (and any valid files) into the folder
  std::string args;                           // the command line; {d} is the row's folder
  int code;                                   // 1: driftlab::Error; 2: usage error (CLI11)
  std::string kind;                           // code 1: the message's prefix ("npy", "model file", ...); 2: "usage"
  std::vector<std::string> names;             // regexes the error line must match; {d}: the folder
  std::vector<std::string> absent = {};       // paths under {d} that must not exist afterwards
  std::vector<std::string> kept = {};         // paths under {d} holding a sentinel that must be unchanged
  bool without_cuda_only = false;             // asserts what a machine without a CUDA device says
  bool cap_memory = false;                    // run under a 4 GiB address-space cap (see run_capped)
};

inline void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

// `train` on the row's IDX folder into {d}/run (which must not appear), lenet1, 1 epoch of
// batches of 4 on 1 thread unless `args` sets those options (CLI11 refuses an option given twice).
inline std::string train_idx(const std::string& args = "") {
  std::string cmd = "train --no-progress --dataset fashion-mnist --data-dir {d}/data --out {d}/run";
  for (const char* opt : {"--model lenet1", "--epochs 1", "--batch 4", "--threads 1"}) {
    const std::string name = std::string(opt).substr(0, std::string(opt).find(' '));
    if ((" " + args + " ").find(" " + name + " ") == std::string::npos) cmd += std::string(" ") + opt;
  }
  return cmd + (args.empty() ? "" : " " + args);
}
const std::string kTrainIdx = train_idx();
const std::string kEvalIdx = "eval --dataset fashion-mnist --data-dir {d}/data --threads 1";
const std::string kPredict = "predict --threads 1 --weights {d}/m.dlm --input {d}/x.npy --output {d}/y.npy";
const std::string kTrainCifar = "train --model resnet20 --epochs 1 --batch 2 --threads 1 --no-progress "
                                "--dataset cifar10 --data-dir {d}/data --out {d}/run";

inline void nothing(const fs::path&) {}
inline void valid_idx(const fs::path& d) { write_idx_dir(d / "data"); }
inline void valid_model(const fs::path& d) { write_model(d / "m.dlm"); }

// Valid IDX data with one file replaced.
inline std::function<void(const fs::path&)> idx_with(const std::string& file, std::function<std::string()> bytes) {
  return [file, bytes](const fs::path& d) {
    write_idx_dir(d / "data");
    write_all(d / "data" / file, bytes());
  };
}
// Valid CIFAR-10 data with one file replaced.
inline std::function<void(const fs::path&)> cifar_with(const std::string& file, std::function<std::string()> bytes) {
  return [file, bytes](const fs::path& d) {
    write_cifar_dir(d / "data");
    write_all(d / "data" / file, bytes());
  };
}
// A valid model and a bad .npy input.
inline std::function<void(const fs::path&)> input_bytes(std::function<std::string()> bytes) {
  return [bytes](const fs::path& d) {
    write_model(d / "m.dlm");
    write_all(d / "x.npy", bytes());
  };
}
// A valid model file cut to n bytes (n < 0: size + n).
inline std::function<void(const fs::path&)> model_cut(long n) {
  return [n](const fs::path& d) {
    write_model(d / "m.dlm");
    std::string s = read_all(d / "m.dlm");
    s.resize(static_cast<std::size_t>(n >= 0 ? n : static_cast<long>(s.size()) + n));
    write_all(d / "m.dlm", s);
  };
}
// A valid model file with bytes at `at` (at < 0: from the end) replaced.
inline std::function<void(const fs::path&)> model_patch(long at, std::string with) {
  return [at, with](const fs::path& d) {
    write_model(d / "m.dlm");
    std::string s = read_all(d / "m.dlm");
    s.replace(static_cast<std::size_t>(at >= 0 ? at : static_cast<long>(s.size()) + at), with.size(), with);
    write_all(d / "m.dlm", s);
  };
}
inline std::function<void(const fs::path&)> model_edit(std::function<void(json&)> edit, std::string name = "lenet1") {
  return [edit, name](const fs::path& d) { write_model_edited(d / "m.dlm", edit, name); };
}
// Exported weights with one file replaced by `t`, and a sentinel where the import would write.
inline std::function<void(const fs::path&)> weights_with(const std::string& file, std::function<driftlab::Tensor()> t) {
  return [file, t](const fs::path& d) {
    write_weights_dir(d / "w");
    if (t) driftlab::write_npy((d / "w" / file).string(), t());
    else fs::remove(d / "w" / file);
  };
}

inline driftlab::Tensor filled(driftlab::Shape s, float v, int64_t at = -1, float poison = 0) {
  driftlab::Tensor t(s, driftlab::DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  if (at >= 0) p[at] = poison;
  return t;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// ---------- running a row ----------

inline std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

inline std::string regex_escape(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

inline bool have_cuda_device() {
  std::string why;
  return driftlab::cuda::device_count(&why) > 0;
}

// Text that only a crash, an abort or an uncaught exception prints.
const char* const kCrashText[] = {"internal error", "terminate called", "what():", "Aborted", "Segmentation fault",
                                  "core dumped", "AddressSanitizer", "runtime error:", "Traceback"};

// Runs driftlab with its address space capped at 4 GiB (the cap is inherited, then lifted
// again here): a row whose header claims gigabytes must fail on the header, and where the code
// still allocates first, it fails on that allocation instead of filling the shared machine's
// memory. lenet1 and the small token model need well under 1 GiB.
inline CliRun run_capped(const std::string& args) {
  rlimit old{};
  getrlimit(RLIMIT_AS, &old);
  rlimit cap = old;
  cap.rlim_cur = std::min<rlim_t>(old.rlim_max, rlim_t{4} << 30);
  setrlimit(RLIMIT_AS, &cap);
  CliRun r = run_driftlab(args);
  setrlimit(RLIMIT_AS, &old);
  return r;
}

// Runs one row and asserts everything the catalogue promises (a gtest failure per broken promise).
inline void check_row(const Row& row) {
  if (row.without_cuda_only && have_cuda_device()) GTEST_SKIP() << "a CUDA device is present: this row is for machines without one";

  const fs::path d = driftlab::cli_test::fresh_dir("bad_" + row.name);
  row.make(d);
  const std::string sentinel = "sentinel of " + row.name + "\n";
  for (const std::string& k : row.kept) write_all(d / k, sentinel);

  const std::string args = replace_all(row.args, "{d}", d.string());
  const CliRun r = row.cap_memory ? run_capped(args) : run_driftlab(args);
  const std::string context = "driftlab " + args + "\n--- output ---\n" + r.out;

  EXPECT_EQ(r.code, row.code) << context;
  EXPECT_TRUE(r.code > 0 && r.code < 128) << "exit " << r.code << "\n" << context;
  for (const char* crash : kCrashText) EXPECT_EQ(r.out.find(crash), std::string::npos) << crash << "\n" << context;

  // The text the regexes are matched against: the error line (exit 1) or CLI11's message (exit 2).
  std::string message = r.out;
  if (row.code == 1) {
    const std::string tag = "driftlab: error: ";
    const std::size_t at = r.out.rfind(tag);
    ASSERT_NE(at, std::string::npos) << context;
    // One error line; stdout, buffered in a pipe, may come after it.
    EXPECT_EQ(r.out.find(tag), at) << "more than one error line\n" << context;
    EXPECT_TRUE(at == 0 || r.out[at - 1] == '\n') << context;
    const std::size_t eol = r.out.find('\n', at);
    ASSERT_NE(eol, std::string::npos) << context;
    message = r.out.substr(at + tag.size(), eol - at - tag.size());
    const std::string kind = replace_all(row.kind, "{d}", d.string());  // a spec's error names its file
    EXPECT_EQ(message.rfind(kind + ":", 0), 0u) << "error kind '" << kind << "' expected\n" << context;
  }
  for (const std::string& n : row.names) {
    const std::string pattern = replace_all(n, "\\{d\\}", regex_escape(d.string()));
    EXPECT_TRUE(std::regex_search(message, std::regex(pattern))) << "message lacks /" << pattern << "/\n" << context;
  }

  for (const std::string& a : row.absent) EXPECT_FALSE(fs::exists(d / a)) << a << " was written\n" << context;
  for (const std::string& k : row.kept) EXPECT_EQ(read_all(d / k), sentinel) << k << " was changed\n" << context;
  for (const auto& e : fs::recursive_directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path() << "\n"
                                                                            << context;
  if (::testing::Test::HasFailure()) {
    std::cout << "kept for inspection: " << d << "\n";
  } else {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
}


}  // namespace bad_input
