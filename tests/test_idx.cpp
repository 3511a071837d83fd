// IDX reader tests: each test writes its own small raw or gzip files into a scratch
// directory, then checks the decoded array or that the one-line error names the file
// and the offset that matters. The last test reads the real Fashion-MNIST when present.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/data/idx.h"

#include "tests/require_util.h"
#include "tests/scratch_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// An IDX file image: 0, 0, type, ndim, big-endian dims, data.
Bytes idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Bytes iota_bytes(std::size_t n, uint8_t start = 0) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(start + i);
  return b;
}

void write_raw(const std::string& path, const Bytes& b) {
  std::ofstream os(path, std::ios::binary);
  os.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(os.good()) << path;
}

void write_gz(const std::string& path, const Bytes& b) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr) << path;
  if (!b.empty()) {
    ASSERT_EQ(gzwrite(gz, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
  }
  ASSERT_EQ(gzclose(gz), Z_OK);
}

Bytes read_all(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>());
}

// The bytes entry (the fuzz target's) reads through the same ByteSource as files: the same
// result for raw and gzip, and the same message, naming the given name, on bad bytes.
TEST(Idx, BytesEntryMatchesTheFileReader) {
  ScratchDir tmp;
  const Bytes raw = idx_bytes(0x08, {2, 3}, iota_bytes(6, 9));
  write_gz(tmp.path("a.gz"), raw);
  const Bytes gz = read_all(tmp.path("a.gz"));
  for (const Bytes& b : {raw, gz}) {
    IdxArray a = read_idx_bytes(std::string(b.begin(), b.end()), "mem");
    EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.data, iota_bytes(6, 9));
  }
  EXPECT_TRUE(throws_error_with([&] { read_idx_bytes(std::string(raw.begin(), raw.end() - 1), "mem.idx"); },
                                {"mem.idx", "truncated at offset 12+5"}));
  EXPECT_TRUE(
      throws_error_with([&] { read_idx_bytes("", "empty.idx"); }, {"empty.idx", "truncated header at offset 0"}));
}

TEST(Idx, RawRoundTrip) {
  ScratchDir tmp;
  const std::string p = tmp.path("a-idx3-ubyte");
  write_raw(p, idx_bytes(0x08, {3, 2, 4}, iota_bytes(24, 7)));
  IdxArray a = read_idx(p);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(a.data, iota_bytes(24, 7));
}

TEST(Idx, GzipRoundTripDetectedByMagicNotName) {
  ScratchDir tmp;
  const Bytes data = iota_bytes(5 * 300, 1);  // > 256 bytes so values wrap, several blocks
  const std::string gz_no_suffix = tmp.path("images-idx2-ubyte");
  write_gz(gz_no_suffix, idx_bytes(0x08, {5, 300}, data));
  IdxArray a = read_idx(gz_no_suffix);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 300}));
  EXPECT_EQ(a.data, data);

  const std::string raw_with_gz_suffix = tmp.path("labels-idx1-ubyte.gz");
  write_raw(raw_with_gz_suffix, idx_bytes(0x08, {4}, {1, 2, 3, 4}));
  EXPECT_EQ(read_idx(raw_with_gz_suffix).data, (Bytes{1, 2, 3, 4}));
}

TEST(Idx, ConcatenatedGzipMembersAreOneStream) {
  // `cat a.gz b.gz` decompresses to a+b with gzip -d; the reader follows that.
  ScratchDir tmp;
  const Bytes whole = idx_bytes(0x08, {2, 3}, iota_bytes(6));
  const Bytes head(whole.begin(), whole.begin() + 9), tail(whole.begin() + 9, whole.end());
  write_gz(tmp.path("h.gz"), head);
  write_gz(tmp.path("t.gz"), tail);
  Bytes cat = read_all(tmp.path("h.gz"));
  Bytes t = read_all(tmp.path("t.gz"));
  cat.insert(cat.end(), t.begin(), t.end());
  write_raw(tmp.path("cat.gz"), cat);
  IdxArray a = read_idx(tmp.path("cat.gz"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, iota_bytes(6));
}

TEST(Idx, EmptyDimensionIsAnEmptyArray) {
  ScratchDir tmp;
  const std::string p = tmp.path("empty");
  write_raw(p, idx_bytes(0x08, {0, 28, 28}, {}));
  IdxArray a = read_idx(p);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{0, 28, 28}));
  EXPECT_TRUE(a.data.empty());
}

TEST(Idx, TruncatedHeader) {
  ScratchDir tmp;
  const std::string empty = tmp.path("empty-file");
  write_raw(empty, {});
  EXPECT_TRUE(throws_error_with([&] { read_idx(empty); }, {empty, "truncated header at offset 0"}));

  const std::string short_magic = tmp.path("short-magic");
  write_raw(short_magic, {0, 0, 8});
  EXPECT_TRUE(throws_error_with([&] { read_idx(short_magic); },
                                {short_magic, "truncated header at offset 3"}));

  // Magic says 3 dims (12 bytes), only 6 follow.
  Bytes b = idx_bytes(0x08, {60000, 28, 28}, {});
  b.resize(4 + 6);
  const std::string raw = tmp.path("short-dims");
  write_raw(raw, b);
  EXPECT_TRUE(throws_error_with([&] { read_idx(raw); },
                                {raw, "truncated header at offset 4+6", "12 dimension bytes"}));
  const std::string gz = tmp.path("short-dims.gz");
  write_gz(gz, b);
  EXPECT_TRUE(throws_error_with([&] { read_idx(gz); }, {gz, "truncated header at offset 4+6"}));
}

TEST(Idx, TruncatedData) {
  ScratchDir tmp;
  Bytes b = idx_bytes(0x08, {3, 2, 2}, iota_bytes(5));  // 12 declared, 5 present
  const std::string raw = tmp.path("short-data");
  write_raw(raw, b);
  EXPECT_TRUE(throws_error_with([&] { read_idx(raw); }, {raw, "truncated at offset 16+5",
                                                         "expected 12 data bytes", "got 5"}));
  const std::string gz = tmp.path("short-data.gz");
  write_gz(gz, b);
  EXPECT_TRUE(throws_error_with([&] { read_idx(gz); }, {gz, "truncated at offset 16+5"}));
}

TEST(Idx, TrailingBytes) {
  ScratchDir tmp;
  Bytes b = idx_bytes(0x08, {3, 2, 2}, iota_bytes(15));  // 12 declared, 15 present
  const std::string raw = tmp.path("long-data");
  write_raw(raw, b);
  EXPECT_TRUE(throws_error_with([&] { read_idx(raw); }, {raw, "3 trailing bytes at offset 16+12"}));
  const std::string gz = tmp.path("long-data.gz");
  write_gz(gz, b);
  EXPECT_TRUE(throws_error_with([&] { read_idx(gz); }, {gz, "3 trailing bytes at offset 16+12"}));
}

TEST(Idx, WrongMagic) {
  ScratchDir tmp;
  const std::string p = tmp.path("not-idx");
  write_raw(p, {0x01, 0x02, 0x08, 0x03, 0, 0, 0, 1});
  EXPECT_TRUE(throws_error_with([&] { read_idx(p); }, {p, "bad magic 0x01020803 at offset 0"}));
  const std::string unknown_type = tmp.path("unknown-type");
  write_raw(unknown_type, idx_bytes(0x05, {1}, {0}));
  EXPECT_TRUE(throws_error_with([&] { read_idx(unknown_type); },
                                {unknown_type, "bad magic 0x00000501", "unknown type byte 0x05"}));
  const std::string no_dims = tmp.path("ndim0");
  write_raw(no_dims, {0, 0, 8, 0});
  EXPECT_TRUE(throws_error_with([&] { read_idx(no_dims); }, {no_dims, "ndim 0 at offset 3"}));
}

TEST(Idx, UnsupportedTypeByte) {
  ScratchDir tmp;
  const std::string p = tmp.path("floats-idx1");
  write_raw(p, idx_bytes(0x0D, {2}, Bytes(8, 0)));
  EXPECT_TRUE(throws_error_with(
      [&] { read_idx(p); }, {p, "unsupported type byte 0x0D (float32) at offset 2", "only 0x08"}));
}

TEST(Idx, DimsThatOverflowAreRefused) {
  ScratchDir tmp;
  const std::string p = tmp.path("huge");
  write_raw(p, idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}));
  EXPECT_TRUE(throws_error_with([&] { read_idx(p); }, {p, "at offset 4 multiply past"}));
  // Large but representable: must fail on the missing bytes, without allocating them.
  const std::string q = tmp.path("large.gz");
  write_gz(q, idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFu}, iota_bytes(10)));
  EXPECT_TRUE(throws_error_with([&] { read_idx(q); }, {q, "truncated at offset 12+10"}));
}

TEST(Idx, CorruptGzip) {
  ScratchDir tmp;
  const std::string good = tmp.path("good.gz");
  write_gz(good, idx_bytes(0x08, {100}, iota_bytes(100)));
  const Bytes z = read_all(good);
  ASSERT_GT(z.size(), 20u);

  // Byte 10 starts the deflate data (gzopen writes a 10-byte header without a name);
  // 0xFF there declares block type 3, which does not exist.
  Bytes bad_block = z;
  bad_block[10] = 0xFF;
  const std::string p1 = tmp.path("bad-block.gz");
  write_raw(p1, bad_block);
  EXPECT_TRUE(throws_error_with([&] { read_idx(p1); },
                                {p1, "corrupt gzip stream at offset 0", "invalid block type"}));

  // The CRC-32 is the 8th..5th last byte; it is checked when the data has been read.
  Bytes bad_crc = z;
  bad_crc[z.size() - 8] ^= 0x55;
  const std::string p2 = tmp.path("bad-crc.gz");
  write_raw(p2, bad_crc);
  EXPECT_TRUE(throws_error_with([&] { read_idx(p2); },
                                {p2, "corrupt gzip stream at offset 108", "incorrect data check"}));

  // A cut .gz file.
  Bytes cut(z.begin(), z.begin() + static_cast<long>(z.size() / 2));
  const std::string p3 = tmp.path("cut.gz");
  write_raw(p3, cut);
  EXPECT_TRUE(throws_error_with([&] { read_idx(p3); }, {p3, "truncated gzip stream at offset"}));

  // Garbage after a complete member.
  Bytes junk = z;
  junk.insert(junk.end(), {'j', 'u', 'n', 'k'});
  const std::string p4 = tmp.path("junk.gz");
  write_raw(p4, junk);
  EXPECT_TRUE(throws_error_with(
      [&] { read_idx(p4); }, {p4, "corrupt gzip stream at offset 108", "incorrect header check"}));
}

TEST(Idx, MissingFileAndDirectory) {
  ScratchDir tmp;
  const std::string missing = tmp.path("no-such-file");
  EXPECT_TRUE(
      throws_error_with([&] { read_idx(missing); }, {missing, "cannot open", "No such file"}));
  EXPECT_TRUE(
      throws_error_with([&] { read_idx(tmp.dir.string()); }, {tmp.dir.string(), "is a directory"}));

  const std::string no_dir = tmp.path("no-such-dir");
  EXPECT_TRUE(throws_error_with([&] { find_idx_file(no_dir, "train-images-idx3-ubyte"); },
                                {no_dir, "does not exist"}));
  EXPECT_TRUE(
      throws_error_with([&] { load_mnist_like(no_dir, true, "x"); }, {no_dir, "does not exist"}));
  write_raw(tmp.path("plain-file"), {1});
  EXPECT_TRUE(throws_error_with([&] { find_idx_file(tmp.path("plain-file"), "a"); },
                                {tmp.path("plain-file"), "is not a directory"}));
  EXPECT_TRUE(throws_error_with(
      [&] { find_idx_file(tmp.dir.string(), "t10k-labels-idx1-ubyte"); },
      {tmp.dir.string(), "t10k-labels-idx1-ubyte nor t10k-labels-idx1-ubyte.gz"}));
}

TEST(Idx, FindIdxFilePrefersRawThenGz) {
  ScratchDir tmp;
  write_raw(tmp.path("x-idx1-ubyte.gz"), {1});
  EXPECT_EQ(find_idx_file(tmp.dir.string(), "x-idx1-ubyte"), tmp.path("x-idx1-ubyte.gz"));
  write_raw(tmp.path("x-idx1-ubyte"), {1});
  EXPECT_EQ(find_idx_file(tmp.dir.string(), "x-idx1-ubyte"), tmp.path("x-idx1-ubyte"));
}

TEST(Idx, DatasetScalesImagesAndKeepsLabels) {
  ScratchDir tmp;
  const Bytes pixels = {0, 255, 51, 102, 1, 2, 3, 4, 10, 20, 30, 40};
  write_raw(tmp.path("img"), idx_bytes(0x08, {3, 2, 2}, pixels));
  write_gz(tmp.path("lab"), idx_bytes(0x08, {3}, {9, 0, 4}));
  Dataset ds = load_idx_dataset(tmp.path("img"), tmp.path("lab"), "tiny");
  EXPECT_EQ(ds.name, "tiny");
  EXPECT_EQ(ds.num_classes, 10);
  EXPECT_EQ(ds.images.dtype(), DType::f32);
  EXPECT_EQ(ds.images.shape(), (Shape{3, 1, 2, 2}));
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{9, 0, 4}));
  for (std::size_t i = 0; i < pixels.size(); ++i)  // exact: the same float division
    EXPECT_EQ(ds.images.data<float>()[i], pixels[i] / 255.0f) << "pixel " << i;
  EXPECT_EQ(ds.images.at(0), 0.0);
  EXPECT_EQ(ds.images.at(1), 1.0);
}

// A limit keeps the first items as float32; the files are still checked to their end: a bad label
// or a truncated image file past the items kept is still an error naming its offset.
TEST(Idx, DatasetLimitKeepsTheFirstItemsAndChecksTheRest) {
  ScratchDir tmp;
  const Bytes pixels = {0, 255, 51, 102, 1, 2, 3, 4, 10, 20, 30, 40};
  write_raw(tmp.path("img"), idx_bytes(0x08, {3, 2, 2}, pixels));
  write_raw(tmp.path("lab"), idx_bytes(0x08, {3}, {9, 0, 4}));
  for (const int64_t limit : {1, 2}) {
    Dataset ds = load_idx_dataset(tmp.path("img"), tmp.path("lab"), "tiny", limit);
    EXPECT_EQ(ds.images.shape(), (Shape{limit, 1, 2, 2}));
    EXPECT_EQ(ds.labels, (limit == 1 ? std::vector<int32_t>{9} : std::vector<int32_t>{9, 0}));
    for (int64_t i = 0; i < ds.images.numel(); ++i) EXPECT_EQ(ds.images.data<float>()[i], pixels[i] / 255.0f) << i;
  }
  for (const int64_t limit : {0, 3, 5})  // no limit, or one at or past n: every item
    EXPECT_EQ(load_idx_dataset(tmp.path("img"), tmp.path("lab"), "tiny", limit).images.dim(0), 3) << limit;
  write_raw(tmp.path("badlab"), idx_bytes(0x08, {3}, {9, 0, 12}));
  EXPECT_TRUE(throws_error_with([&] { load_idx_dataset(tmp.path("img"), tmp.path("badlab"), "x", 1); },
                                {"label 12 at offset 8+2"}));
  Bytes cut = idx_bytes(0x08, {3, 2, 2}, pixels);
  cut.resize(cut.size() - 3);
  write_raw(tmp.path("cutimg"), cut);
  EXPECT_TRUE(throws_error_with([&] { load_idx_dataset(tmp.path("cutimg"), tmp.path("lab"), "x", 1); },
                                {"truncated at offset 16+9"}));
}

TEST(Idx, DatasetCountMismatch) {
  ScratchDir tmp;
  const std::string img = tmp.path("img"), lab = tmp.path("lab");
  write_raw(img, idx_bytes(0x08, {3, 2, 2}, iota_bytes(12)));
  write_raw(lab, idx_bytes(0x08, {2}, {1, 2}));
  EXPECT_TRUE(throws_error_with([&] { load_idx_dataset(img, lab, "x"); },
                                {"images " + img + " has 3 items but labels " + lab + " has 2"}));
}

TEST(Idx, DatasetLabelOutOfRange) {
  ScratchDir tmp;
  const std::string img = tmp.path("img"), lab = tmp.path("lab.gz");
  write_raw(img, idx_bytes(0x08, {6, 1, 1}, iota_bytes(6)));
  write_gz(lab, idx_bytes(0x08, {6}, {0, 1, 2, 3, 4, 12}));
  EXPECT_TRUE(throws_error_with([&] { load_idx_dataset(img, lab, "x"); },
                                {lab, "label 12 at offset 8+5 is outside 0..9"}));
}

TEST(Idx, DatasetWrongRanks) {
  ScratchDir tmp;
  const std::string img2 = tmp.path("img2"), lab = tmp.path("lab"), lab2 = tmp.path("lab2");
  write_raw(img2, idx_bytes(0x08, {2, 4}, iota_bytes(8)));
  write_raw(lab, idx_bytes(0x08, {2}, {1, 2}));
  write_raw(lab2, idx_bytes(0x08, {2, 1}, {1, 2}));
  EXPECT_TRUE(throws_error_with([&] { load_idx_dataset(img2, lab, "x"); },
                                {img2, "dims [2,4], expected 3 dims"}));
  EXPECT_TRUE(throws_error_with([&] { load_idx_dataset(img2, lab2, "x"); }, {img2}));
  const std::string img3 = tmp.path("img3");
  write_raw(img3, idx_bytes(0x08, {2, 1, 1}, {0, 0}));
  EXPECT_TRUE(throws_error_with([&] { load_idx_dataset(img3, lab2, "x"); },
                                {lab2, "dims [2,1], expected 1 dim"}));
}

TEST(Idx, LoadMnistLikeFromRawAndGz) {
  ScratchDir tmp;
  write_raw(tmp.path("train-images-idx3-ubyte"), idx_bytes(0x08, {2, 3, 3}, iota_bytes(18)));
  write_gz(tmp.path("train-labels-idx1-ubyte.gz"), idx_bytes(0x08, {2}, {3, 7}));
  write_gz(tmp.path("t10k-images-idx3-ubyte.gz"), idx_bytes(0x08, {1, 3, 3}, iota_bytes(9)));
  write_raw(tmp.path("t10k-labels-idx1-ubyte"), idx_bytes(0x08, {1}, {5}));
  Dataset train = load_mnist_like(tmp.dir.string(), true, "synthetic-train");
  Dataset test = load_mnist_like(tmp.dir.string(), false, "synthetic-test");
  EXPECT_EQ(train.images.shape(), (Shape{2, 1, 3, 3}));
  EXPECT_EQ(train.labels, (std::vector<int32_t>{3, 7}));
  EXPECT_EQ(test.images.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(test.labels, (std::vector<int32_t>{5}));
  EXPECT_EQ(train.name, "synthetic-train");
}

TEST(Idx, RealFashionMnist) {
  const std::string dir = kDefaultFashionMnistDir;
  for (const char* stem : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    std::error_code ec;
    if (!fs::exists(fs::path(dir) / stem, ec) &&
        !fs::exists(fs::path(dir) / (std::string(stem) + ".gz"), ec))
      DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not found in " + dir + " (no " + stem + "[.gz])");
  }
  struct Expect {
    bool train;
    int64_t n;
  };
  for (Expect e : {Expect{true, 60000}, Expect{false, 10000}}) {
    Dataset ds = load_mnist_like(dir, e.train, "fashion-mnist");
    EXPECT_EQ(ds.images.shape(), (Shape{e.n, 1, 28, 28}));
    ASSERT_EQ(static_cast<int64_t>(ds.labels.size()), e.n);
    EXPECT_EQ(ds.num_classes, 10);
    // Fashion-MNIST is balanced: 6000 (train) or 1000 (test) images per class.
    std::vector<int64_t> per_class(10, 0);
    for (int32_t l : ds.labels) {
      ASSERT_TRUE(l >= 0 && l < 10) << l;
      ++per_class[static_cast<std::size_t>(l)];
    }
    for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[static_cast<std::size_t>(c)], e.n / 10);
    const float* px = ds.images.data<float>();
    const auto mm = std::minmax_element(px, px + ds.images.numel());
    EXPECT_EQ(*mm.first, 0.0f);
    EXPECT_EQ(*mm.second, 1.0f);
  }
}

}  // namespace
}  // namespace driftlab
