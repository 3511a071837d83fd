// The model file (models/model_file.h), format version 2 with a dtype per tensor: a file written
// by the last version-1 writer (commit 7417a2b, tests/data/model_v1) still loads and predicts the
// logits that writer's build computed, bit for bit; version 2 round-trips and names every
// tensor's dtype; a tensor whose dtype is not its parameter's, an unknown dtype and a version
// from the future are refused naming the file and the tensor or offset. Hardening
// (docs/RELIABILITY.md, "Reader fixes"): the header is checked against the file before the model is
// built (a huge num_ids, bytes after the last tensor), input_std must be finite and positive, and
// the CRC covers files over 4 GiB.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/io/npy.h"
#include "engine/train/cpu_runner.h"
#include "models/model_file.h"
#include "models/models.h"
#include "models/reparam.h"
#include "tests/scratch_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

std::string fixture(const std::string& name) {
  return std::string(DRIFTLAB_SOURCE_DIR) + "/tests/data/model_v1/" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

uint64_t le(const std::string& s, std::size_t off, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[off + static_cast<std::size_t>(i)]);
  return v;
}

// The file with its JSON header replaced by edit(header), the length and the CRC rewritten (so
// that only the edit can be what the reader refuses).
// extra_data is appended to the tensor data.
std::string with_header(const std::string& bytes, const std::function<void(nlohmann::json&)>& edit,
                        const std::string& extra_data = "") {
  const uint64_t hlen = le(bytes, 12, 8);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(20, hlen));
  edit(h);
  const std::string header = h.dump();
  std::string out = bytes.substr(0, 12);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  out += header;
  out += bytes.substr(20 + hlen, bytes.size() - 4 - 20 - hlen);
  out += extra_data;
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size()));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return out;
}

void write_bytes(const std::string& path, const std::string& b) { std::ofstream(path, std::ios::binary) << b; }

TEST(ModelFile, Version1FromTheLastVersion1WriterLoadsAndPredictsTheSameBits) {
  const std::string bytes = read_bytes(fixture("lenet1_tensorflow_v1.dlm"));
  ASSERT_EQ(le(bytes, 8, 4), 1u) << "the fixture must stay a version-1 file";
  LoadedModel lm = load_model(fixture("lenet1_tensorflow_v1.dlm"));
  EXPECT_EQ(lm.model.name, "lenet1");
  EXPECT_EQ(lm.model.policy.to_string(), "tensorflow");
  const Tensor x = read_npy(fixture("input.npy")), want = read_npy(fixture("logits_v1.npy"));
  ThreadCountGuard one(1);  // the fixture's logits were computed with --threads 1
  // ... and with the kernels the tensorflow preset selected then (Eigen's, the blocks unfused;
  // since 2026-11-30 it runs oneDNN's and the fused blocks): the weights as read, under those.
  Model as_then = rebuild_under(
      lm.model, Policy::parse("tensorflow,conv_backend=eigen,gemm_backend=eigen,conv_block_backend=reference"), false);
  CpuRunner runner(as_then);
  const Tensor got = runner.logits(x);
  // The fixture was computed by an AVX-512 build, and Eigen's GEMM sums each dot product in
  // blocks of its SIMD width, which the build's -march decides (Eigen vectorises for AVX-512 where
  // __AVX512F__ is defined), not the CPU it runs on: built with AVX-512 the logits must be the same bits.
  // Built narrower (AVX2: 8 lanes, not 16: an AVX2 CPU's -march=native, or -DDRIFTLAB_MARCH=haswell
  // on any CPU, scripts/isa-check.sh) the same weights give another summation order, an ulp-level
  // difference; a weight the v1 reader misplaced or misread would move a logit by O(1), so there
  // the check is 1e-5 of the largest logit (seen on Zen 3: 3e-7; a haswell build on a Zen 5: 1.8e-7).
#if defined(__AVX512F__)
  constexpr bool kAvx512Build = true;
#else
  constexpr bool kAvx512Build = false;
#endif
  if (kAvx512Build) {
    EXPECT_TRUE(bitwise_equal(got, want));
  } else {
    ASSERT_EQ(got.shape(), want.shape());
    double largest = 0, worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      largest = std::max(largest, std::fabs(double(want.data<float>()[i])));
      worst = std::max(worst, std::fabs(double(got.data<float>()[i]) - double(want.data<float>()[i])));
    }
    std::printf("no AVX-512: largest |logit| %.6g, largest difference %.3g\n", largest, worst);
    EXPECT_LE(worst, 1e-5 * largest);
  }
}

TEST(ModelFile, Version2RoundTripNamesEachTensorsDtype) {
  ScratchDir tmp;
  for (const char* spec : {"torch", "tensorflow,dtype=float64"}) {
    SCOPED_TRACE(spec);
    Model m = build_model("resnet20", Policy::parse(spec), 3);
    const std::string path = tmp.path("m.dlm");
    save_model(path, m, {{"note", "x"}});
    const std::string bytes = read_bytes(path);
    EXPECT_EQ(le(bytes, 8, 4), kModelFileVersion);
    const nlohmann::json h = nlohmann::json::parse(bytes.substr(20, le(bytes, 12, 8)));
    for (const auto& t : h.at("tensors")) EXPECT_EQ(t.at("dtype"), dtype_name(m.dtype())) << t.at("name");
    LoadedModel back = load_model(path);
    auto a = m.net->named_params(), b = back.model.net->named_params();
    auto ab = m.net->named_buffers(), bb = back.model.net->named_buffers();
    a.insert(a.end(), ab.begin(), ab.end());
    b.insert(b.end(), bb.begin(), bb.end());
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i].second->value, b[i].second->value));
    EXPECT_EQ(back.metadata.at("note"), "x");
  }
}

TEST(ModelFile, DtypesAndVersionsItCannotReadAreRefusedByName) {
  ScratchDir tmp;
  Model m = build_model("lenet1", Policy::torch(), 1);
  save_model(tmp.path("ok.dlm"), m, {});
  const std::string bytes = read_bytes(tmp.path("ok.dlm"));
  struct Bad {
    const char* file;
    std::function<void(nlohmann::json&)> edit;
    std::vector<std::string> message;
  };
  const std::vector<Bad> bad = {
      // int32 has float32's size, so the byte counts agree and the parameter's dtype refuses it.
      {"int32.dlm", [](nlohmann::json& h) { h["tensors"][0]["dtype"] = "int32"; },
       {"int32.dlm", "tensor '0.conv2d.weight' is int32", "is float32"}},
      // int8 changes the tensor's byte count: refused from the header alone, before building.
      {"int8.dlm", [](nlohmann::json& h) { h["tensors"][0]["dtype"] = "int8"; },
       {"int8.dlm", "tensor '0.conv2d.weight' of shape [4,1,5,5] and dtype int8 declares 400 bytes"}},
      {"bf16.dlm", [](nlohmann::json& h) { h["tensors"][2]["dtype"] = "bfloat16"; },
       {"bf16.dlm", "tensor '3.conv2d.weight'", "unknown dtype 'bfloat16'"}},
      {"nodtype.dlm", [](nlohmann::json& h) { h["tensors"][1].erase("dtype"); }, {"nodtype.dlm", "missing a field"}},
  };
  for (const Bad& b : bad) {
    write_bytes(tmp.path(b.file), with_header(bytes, b.edit));
    const std::string path = tmp.path(b.file);
    ::testing::AssertionResult r = ::testing::AssertionFailure();
    try {
      load_model(path);
      r << "nothing thrown";
    } catch (const Error& e) {
      r = ::testing::AssertionSuccess();
      for (const std::string& part : b.message)
        if (std::string(e.what()).find(part) == std::string::npos)
          r = ::testing::AssertionFailure() << "\"" << e.what() << "\" lacks \"" << part << "\"";
    }
    EXPECT_TRUE(r) << b.file;
  }
  // A version from the future: the version word is not covered by a header edit; rewrite it and the CRC.
  std::string future = bytes.substr(0, bytes.size() - 4);
  future[8] = 3;
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(future.data()), static_cast<uInt>(future.size()));
  for (int i = 0; i < 4; ++i) future.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  write_bytes(tmp.path("v3.dlm"), future);
  EXPECT_TRUE(throws_error_with([&] { load_model(tmp.path("v3.dlm")); },
                                {"v3.dlm", "version 3 at offset 8 is not supported", "versions 1 to 2"}));
}

// A small file with a valid CRC whose header asks for a huge embedding (num_ids 2^20 rows of 128
// floats: 512 MiB) must be refused from the header and the file size, before the model is
// built: the old reader built (allocated and initialised) the embedding first and only then
// compared its shape with the tensor list. The message names num_ids and the bytes the file holds.
TEST(ModelFile, HugeEmbeddingIsRefusedBeforeTheModelIsBuilt) {
  ScratchDir tmp;
  Model m = build_model("lstm-imdb", Policy::torch(), 1, ModelArgs{50, 8});
  save_model(tmp.path("ok.dlm"), m, {});
  const std::string bytes = read_bytes(tmp.path("ok.dlm"));
  write_bytes(tmp.path("huge.dlm"), with_header(bytes, [](nlohmann::json& h) { h["num_ids"] = int64_t{1} << 20; }));
  EXPECT_TRUE(throws_error_with([&] { load_model(tmp.path("huge.dlm")); },
                                {"huge.dlm", "num_ids=1048576", "before building"}));
  EXPECT_NO_THROW(load_model(tmp.path("ok.dlm")));
}

// The file holds exactly the tensors its header lists: bytes after the last tensor (with the
// CRC rewritten to match) are refused naming their offset; the old reader ignored them.
TEST(ModelFile, BytesAfterTheLastTensorAreRefused) {
  ScratchDir tmp;
  Model m = build_model("lenet1", Policy::torch(), 1);
  save_model(tmp.path("ok.dlm"), m, {});
  const std::string bytes = read_bytes(tmp.path("ok.dlm"));
  write_bytes(tmp.path("extra.dlm"), with_header(bytes, [](nlohmann::json&) {}, std::string(4, '\0')));
  EXPECT_TRUE(throws_error_with([&] { load_model(tmp.path("extra.dlm")); }, {"extra.dlm", "4 bytes after"}));
}

// input_mean / input_std come from the file and are applied to every input: a standard deviation
// that is zero, negative, not finite or not a number is refused at load, naming the field.
TEST(ModelFile, InputStdMustBeFinitePositive) {
  ScratchDir tmp;
  Model m = build_model("lenet1", Policy::torch(), 1);
  const std::vector<std::pair<const char*, nlohmann::json>> bad = {
      {"input_std", 0.0}, {"input_std", -0.5}, {"input_std", "0.3"},
      {"input_std", nullptr},  // what a NaN or an infinity becomes in JSON
      {"input_mean", "x"}, {"input_mean", nullptr}};
  for (const auto& [field, value] : bad) {
    SCOPED_TRACE(std::string(field) + "=" + value.dump());
    nlohmann::json meta = {{"input_mean", 0.25}, {"input_std", 0.5}};
    meta[field] = value;
    save_model(tmp.path("m.dlm"), m, meta);
    EXPECT_TRUE(throws_error_with([&] { load_model(tmp.path("m.dlm")); }, {"m.dlm", field}));
  }
  save_model(tmp.path("m.dlm"), m, {{"input_mean", 0.25}, {"input_std", 0.5}});
  EXPECT_EQ(load_model(tmp.path("m.dlm")).metadata.at("input_std"), 0.5);
}

// The CRC covers every byte of a file over 4 GiB: zlib's crc32() takes a 32-bit length, and
// the old writer and reader passed it the size cast to that, covering only size mod 4 GiB
// bytes. 4 GiB + 16 bytes of zeros from an anonymous mapping (never written, so they cost no
// memory); the reference is zlib's crc32_z, which takes a size_t length.
TEST(ModelFile, CrcCoversMoreThan4GiB) {
  const uint64_t n = (uint64_t{1} << 32) + 16;
  void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const auto* b = static_cast<const Bytef*>(p);
  const uint32_t want = static_cast<uint32_t>(crc32_z(0L, b, n));
  ASSERT_NE(want, static_cast<uint32_t>(crc32(0L, b, 16))) << "the test needs the two to differ";
  EXPECT_EQ(container_crc32(0, p, n), want);
  ::munmap(p, n);
}

}  // namespace
}  // namespace driftlab
