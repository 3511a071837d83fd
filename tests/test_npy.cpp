// .npy tests: round trips, the exact bytes of a header numpy would write, every refusal
// with the file and offset in its message, the atomic write, and (when /usr/bin/python3
// has numpy) files exchanged with numpy itself in both directions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/io/npy.h"

#include "tests/require_util.h"
#include "tests/scratch_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream os(path, std::ios::binary);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(os.good()) << path;
}

std::string read_file(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>());
}

// A .npy file with an arbitrary dict (padded to 64 like numpy) and data bytes.
std::string make_npy(const std::string& dict, const std::string& data, int major = 1) {
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t hlen = dict.size() + 1;
  const std::size_t pad = 64 - (8 + len_bytes + hlen) % 64;
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t b = 0; b < len_bytes; ++b)
    out += static_cast<char>(((hlen + pad) >> (8 * b)) & 0xFF);
  return out + dict + std::string(pad, ' ') + "\n" + data;
}

// Raw little-endian bytes of values (the test host is little-endian, as npy.cpp asserts).
template <typename T>
std::string le_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Bit-exact comparison: a round trip must not change a single bit.
void expect_same_bits(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  if (a.nbytes()) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  }
}

Tensor ramp(Shape shape, DType dtype, double scale, double offset) {
  Tensor t(std::move(shape), dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* d = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i)
      d[i] = static_cast<T>(static_cast<double>(i) * scale + offset);
  });
  return t;
}

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

TEST(Npy, RoundTrip) {
  ScratchDir tmp;
  const std::vector<Tensor> cases = {
      ramp({2, 3, 4}, DType::f32, 0.37, -3.0),  // non-dyadic values: all mantissa bits used
      ramp({5}, DType::f64, 1.0 / 3.0, 1e8),    // large offset, inexact thirds
      ramp({}, DType::f64, 0.0, -2.5),          // scalar: numpy shape ()
      ramp({0}, DType::f32, 1.0, 0.0),          // empty
      ramp({3, 0, 2}, DType::f64, 1.0, 0.0),    // empty in the middle axis
  };
  for (const Tensor& t : cases) {
    SCOPED_TRACE(shape_str(t.shape()) + " " + dtype_name(t.dtype()));
    const std::string p = tmp.path("t.npy");
    write_npy(p, t);
    EXPECT_EQ(fs::file_size(p), npy_header(t.dtype(), t.shape()).size() + t.nbytes());
    expect_same_bits(read_npy(p), t);
  }
}

TEST(Npy, HeaderBytesAreNumpys) {
  // np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)) with numpy >= 1.24 writes exactly
  // this: magic, version 1.0, header length 118 (0x76) little-endian, the 59-byte dict with
  // sorted keys, 21-len('2') = 20 spaces of room to grow the first axis, 38 spaces that
  // bring 10 + 59 + 20 + 38 + 1 to 128 (a multiple of 64), a newline, then the data.
  const std::string expected_header =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(20, ' ') +
      std::string(38, ' ') + "\n";
  ASSERT_EQ(expected_header.size(), 128u);
  EXPECT_EQ(npy_header(DType::f32, {2, 3}), expected_header);

  ScratchDir tmp;
  const std::string p = tmp.path("tiny.npy");
  write_npy(p, Tensor::from<float>({2, 3}, {0, 1, 2, 3, 4, 5}));
  const std::string data(
      "\x00\x00\x00\x00"
      "\x00\x00\x80\x3F"
      "\x00\x00\x00\x40"
      "\x00\x00\x40\x40"
      "\x00\x00\x80\x40"
      "\x00\x00\xA0\x40",
      24);
  EXPECT_EQ(read_file(p), expected_header + data);

  // Scalars get no growth room and 1-tuples keep Python's trailing comma.
  const std::string scalar = npy_header(DType::f64, {});
  EXPECT_EQ(scalar.substr(10, scalar.find('}') - 9),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }");
  const std::string vec = npy_header(DType::f64, {5});
  EXPECT_EQ(vec.substr(10, vec.find('}') - 9),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }");
}

TEST(Npy, HeaderIsAlwaysAligned) {
  const std::vector<Shape> shapes = {
      {}, {1}, {7}, {2, 3}, {123456789, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, {4611686018427387903}};
  for (const Shape& s : shapes) {
    for (DType dt : {DType::f32, DType::f64}) {
      const std::string h = npy_header(dt, s);
      SCOPED_TRACE(shape_str(s));
      EXPECT_EQ(h.size() % 64, 0u);
      EXPECT_EQ(h.back(), '\n');
      const std::size_t field =
          static_cast<unsigned char>(h[8]) + 256u * static_cast<unsigned char>(h[9]);
      EXPECT_EQ(field + 10, h.size());
    }
  }
}

TEST(Npy, Version2ReadAndWritten) {
  ScratchDir tmp;
  // A hand-made 2.0 file: 4-byte header length.
  const std::string p = tmp.path("v2.npy");
  write_file(p, make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                         le_bytes<double>({1.5, -2.0, 1e300}), 2));
  Tensor t = read_npy(p);
  EXPECT_EQ(t.shape(), (Shape{3}));
  EXPECT_EQ(t.at(0), 1.5);
  EXPECT_EQ(t.at(2), 1e300);

  // A header over 64 KiB (22000 axes) makes the writer switch to 2.0. Only the header is
  // built: a Tensor of that rank is pointless and slow to construct.
  const std::string h = npy_header(DType::f32, Shape(22000, 1));
  EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x02\x00", 8));
  EXPECT_EQ(h.size() % 64, 0u);
  uint64_t field = 0;
  for (int b = 3; b >= 0; --b)
    field = (field << 8) | static_cast<unsigned char>(h[static_cast<std::size_t>(8 + b)]);
  EXPECT_EQ(field + 12, h.size());
  EXPECT_GT(field, 0xFFFFu);
  EXPECT_EQ(h.back(), '\n');
}

TEST(Npy, Truncated) {
  ScratchDir tmp;
  const std::string good = make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
                                    std::string(48, '\0'));
  ASSERT_EQ(good.size(), 128u + 48u);
  const std::string p = tmp.path("short.npy");
  write_file(p, good.substr(0, good.size() - 28));
  EXPECT_TRUE(throws_error_with(
      [&] { read_npy(p); },
      {p, "header claims shape [3,4] (48 bytes) but only 20 data bytes follow at offset 128"}));

  const std::string q = tmp.path("cut-header.npy");
  write_file(q, good.substr(0, 60));
  EXPECT_TRUE(throws_error_with([&] { read_npy(q); },
                                {q, "header length 118 at offset 8 runs past the end"}));

  const std::string r = tmp.path("tiny.npy");
  write_file(r, good.substr(0, 5));
  EXPECT_TRUE(throws_error_with([&] { read_npy(r); }, {r, "truncated header at offset 5"}));

  const std::string s = tmp.path("trailing.npy");
  write_file(s, good + "xyz");
  EXPECT_TRUE(throws_error_with([&] { read_npy(s); }, {s, "3 trailing bytes at offset 128+48"}));
}

TEST(Npy, BadMagicAndVersion) {
  ScratchDir tmp;
  std::string bytes =
      make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
  std::string bad = bytes;
  bad[5] = 'Z';
  const std::string p = tmp.path("magic.npy");
  write_file(p, bad);
  EXPECT_TRUE(throws_error_with([&] { read_npy(p); }, {p, "bad magic \"\\x93NUMPZ\" at offset 0"}));
  bad = bytes;
  bad[6] = 4;
  const std::string q = tmp.path("version.npy");
  write_file(q, bad);
  EXPECT_TRUE(
      throws_error_with([&] { read_npy(q); }, {q, "unsupported format version 4.0 at offset 6"}));
}

TEST(Npy, RefusedDtypesAndOrder) {
  ScratchDir tmp;
  struct Case {
    std::string dict, expect;
  };
  const std::string fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }";
  const std::vector<Case> cases = {
      {fortran, "fortran_order True at offset " + std::to_string(10 + fortran.find("True"))},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
       "big-endian dtype '>f4' at offset 20"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }",
       "unsupported dtype '<c8' at offset 20"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }",
       "structured or non-string 'descr'"},
      {"{'descr': '<f4', 'shape': (2, 3), }", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", "unexpected key 'x'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
       "expected a non-negative integer in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       "dimension too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
       "multiplies past"},
  };
  const std::string p = tmp.path("refused.npy");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    write_file(p, make_npy(c.dict, std::string(24, '\0')));
    EXPECT_TRUE(throws_error_with([&] { read_npy(p); }, {p, c.expect}));
  }
}

TEST(Npy, PythonTwoStyleHeaderIsRead) {
  // Old writers: double quotes, 'L' suffixes, no padding alignment, no trailing comma.
  ScratchDir tmp;
  const std::string p = tmp.path("py2.npy");
  std::string dict = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L, 1L)}";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size());
  bytes += '\0';
  write_file(p, bytes + dict + le_bytes<float>({0.5f, -1.0f}));
  Tensor t = read_npy(p);
  EXPECT_EQ(t.shape(), (Shape{2, 1}));
  EXPECT_EQ(t.at(1), -1.0);
}

TEST(Npy, MissingFileAndAtomicWrite) {
  ScratchDir tmp;
  const std::string missing = tmp.path("nope.npy");
  EXPECT_TRUE(throws_error_with([&] { read_npy(missing); }, {missing, "cannot open"}));

  // Into a missing directory: the temporary file cannot even be created.
  const std::string nodir = tmp.path("no-dir/x.npy");
  EXPECT_TRUE(throws_error_with([&] { write_npy(nodir, ramp({2}, DType::f32, 1, 0)); },
                                {nodir, "cannot create"}));
  // Onto a directory: the rename fails and the temporary file must be gone.
  fs::create_directories(tmp.path("occupied"));
  const std::string occupied = tmp.path("occupied");
  EXPECT_TRUE(throws_error_with([&] { write_npy(occupied, ramp({2}, DType::f32, 1, 0)); },
                                {occupied, "cannot rename"}));
  EXPECT_TRUE(
      throws_error_with([&] { write_npy(tmp.path("u.npy"), Tensor()); }, {"u.npy", "undefined"}));

  // Overwriting replaces the old content completely.
  const std::string p = tmp.path("a.npy");
  write_npy(p, ramp({100}, DType::f64, 1, 0));
  write_npy(p, ramp({2}, DType::f32, 1, 5));
  expect_same_bits(read_npy(p), ramp({2}, DType::f32, 1, 5));

  for (const auto& e : fs::directory_iterator(tmp.dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos)
        << "left behind: " << e.path();
}

// Runs a Python script with /usr/bin/python3; returns its exit status (0 = success).
int run_python(const ScratchDir& tmp, const std::string& script) {
  const std::string py = tmp.path("script.py");
  write_file(py, script);
  return std::system(("/usr/bin/python3 " + py + " " + tmp.dir.string()).c_str());
}

TEST(Npy, NumpyWritesWeRead) {
  if (!have_numpy()) DRIFTLAB_SKIP_OR_REQUIRE("numpy not available (apt-get install python3-numpy)");
  ScratchDir tmp;
  ASSERT_EQ(run_python(tmp, R"(
import sys, numpy as np
d = sys.argv[1] + '/'
np.save(d + 'a.npy', np.arange(24, dtype='<f4').reshape(2, 3, 4) * np.float32(0.25) - 2)
np.save(d + 'b.npy', np.linspace(-1, 1, 5))
np.save(d + 'c.npy', np.float32(1.5))
np.save(d + 'd.npy', np.zeros((0, 3)))
with open(d + 'e.npy', 'wb') as f:
    np.lib.format.write_array(f, np.array([3.0, 4.0]), version=(2, 0))
np.save(d + 'f.npy', np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)))
np.save(d + 'g.npy', np.arange(3, dtype='>f8'))
np.save(d + 'h.npy', np.arange(3, dtype='<f2'))
np.save(d + 'k.npy', np.array([-128, 0, 127], dtype='i1'))
np.save(d + 'l.npy', np.array([0, 255], dtype='u1'))
np.save(d + 'm.npy', np.array([[-2**31, 2**31 - 1]], dtype='<i4'))
np.save(d + 'o.npy', np.array([-2**63, 2**63 - 1], dtype='<i8'))
np.save(d + 'i.npy', np.arange(12.0).reshape(3, 4)[:, ::2])
)"),
            0);
  Tensor a = read_npy(tmp.path("a.npy"));
  ASSERT_EQ(a.dtype(), DType::f32);
  ASSERT_EQ(a.shape(), (Shape{2, 3, 4}));
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(a.at(i), static_cast<double>(i) * 0.25 - 2) << i;  // exact: dyadic
  Tensor b = read_npy(tmp.path("b.npy"));
  ASSERT_EQ(b.dtype(), DType::f64);
  expect_same_bits(b, Tensor::from<double>({5}, {-1, -0.5, 0, 0.5, 1}));
  expect_same_bits(read_npy(tmp.path("c.npy")), Tensor::from<float>({}, {1.5f}));
  expect_same_bits(read_npy(tmp.path("d.npy")), Tensor(Shape{0, 3}, DType::f64));
  expect_same_bits(read_npy(tmp.path("e.npy")), Tensor::from<double>({2}, {3, 4}));
  expect_same_bits(read_npy(tmp.path("i.npy")), Tensor::from<double>({3, 2}, {0, 2, 4, 6, 8, 10}));
  EXPECT_TRUE(
      throws_error_with([&] { read_npy(tmp.path("f.npy")); }, {"f.npy", "fortran_order True"}));
  EXPECT_TRUE(
      throws_error_with([&] { read_npy(tmp.path("g.npy")); }, {"g.npy", "big-endian dtype '>f8'"}));
  EXPECT_TRUE(throws_error_with([&] { read_npy(tmp.path("h.npy")); },
                                {"h.npy", "unsupported dtype '<f2'"}));
  // Integer arrays keep their type and bits (quantized tensors, token ids).
  expect_same_bits(read_npy(tmp.path("k.npy")), Tensor::from<int8_t>({3}, {-128, 0, 127}));
  expect_same_bits(read_npy(tmp.path("l.npy")), Tensor::from<uint8_t>({2}, {0, 255}));
  expect_same_bits(read_npy(tmp.path("m.npy")), Tensor::from<int32_t>({1, 2}, {INT32_MIN, INT32_MAX}));
  expect_same_bits(read_npy(tmp.path("o.npy")), Tensor::from<int64_t>({2}, {INT64_MIN, INT64_MAX}));
}

TEST(Npy, WeWriteNumpyReads) {
  if (!have_numpy()) DRIFTLAB_SKIP_OR_REQUIRE("numpy not available (apt-get install python3-numpy)");
  ScratchDir tmp;
  Tensor a = ramp({2, 3, 4}, DType::f32, 0.25, -2.0);
  write_npy(tmp.path("a.npy"), a);
  write_npy(tmp.path("b.npy"), Tensor::from<double>({5}, {-1, -0.5, 0, 0.5, 1e300}));
  write_npy(tmp.path("c.npy"), Tensor::from<float>({}, {1.5f}));
  write_npy(tmp.path("d.npy"), Tensor(Shape{0, 3}, DType::f64));
  write_npy(tmp.path("e.npy"), Tensor::from<int8_t>({3}, {-128, 0, 127}));
  write_npy(tmp.path("f.npy"), Tensor::from<uint8_t>({2}, {0, 255}));
  write_npy(tmp.path("g.npy"), Tensor::from<int32_t>({1, 2}, {INT32_MIN, INT32_MAX}));
  write_npy(tmp.path("h.npy"), Tensor::from<int64_t>({2}, {INT64_MIN, INT64_MAX}));
  // Values are compared exactly; with numpy >= 1.24 (which adds the growth room) the whole
  // file must also equal what np.save writes for the same array.
  EXPECT_EQ(run_python(tmp, R"(
import io, sys, numpy as np
d = sys.argv[1] + '/'
expect = {
    'a': np.arange(24, dtype='<f4').reshape(2, 3, 4) * np.float32(0.25) - np.float32(2),
    'b': np.array([-1, -0.5, 0, 0.5, 1e300]),
    'c': np.array(1.5, dtype='<f4'),
    'd': np.zeros((0, 3)),
    'e': np.array([-128, 0, 127], dtype='i1'),
    'f': np.array([0, 255], dtype='u1'),
    'g': np.array([[-2**31, 2**31 - 1]], dtype='<i4'),
    'h': np.array([-2**63, 2**63 - 1], dtype='<i8'),
}
numpy_version = tuple(int(x) for x in np.__version__.split('.')[:2])
for name, e in expect.items():
    got = np.load(d + name + '.npy')
    if got.dtype != e.dtype or got.shape != e.shape or not np.array_equal(got, e):
        sys.exit('%s: got %r %r %r' % (name, got.dtype, got.shape, got))
    if numpy_version >= (1, 24):
        buf = io.BytesIO()
        np.save(buf, e)
        if buf.getvalue() != open(d + name + '.npy', 'rb').read():
            sys.exit('%s: bytes differ from np.save' % name)
)"),
            0);
}

// The bytes entry (the fuzz target's) is the file reader over fmemopen: the same tensor, and
// the same checks naming the given name.
TEST(Npy, BytesEntryMatchesTheFileReader) {
  ScratchDir tmp;
  Tensor t({2, 3}, DType::f32);
  for (int64_t i = 0; i < 6; ++i) t.data<float>()[i] = static_cast<float>(i) - 2.5f;
  write_npy(tmp.path("t.npy"), t);
  const std::string bytes = read_file(tmp.path("t.npy"));
  expect_same_bits(read_npy_bytes(bytes, "mem.npy"), t);
  EXPECT_TRUE(throws_error_with([&] { read_npy_bytes(bytes + "x", "mem.npy"); }, {"mem.npy", "1 trailing bytes"}));
  EXPECT_TRUE(throws_error_with([&] { read_npy_bytes("", "empty.npy"); }, {"empty.npy", "truncated header"}));
}

}  // namespace
}  // namespace driftlab
