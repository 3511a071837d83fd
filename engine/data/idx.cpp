// IDX reader. A ByteSource yields the uncompressed bytes of a raw or gzip file (zlib
// inflate, several concatenated gzip members allowed as gzip -d does); read_idx checks the
// header and every size against the bytes that actually arrive, including the bytes that
// must not be there after the data.
#include "engine/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace driftlab {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kInChunk = std::size_t{1} << 18;   // compressed bytes per fread
constexpr std::size_t kOutChunk = std::size_t{1} << 20;  // data bytes per read()
// Deflate cannot expand one input byte into more than ~1032 output bytes (258-byte matches
// coded in ~2 bits); used only to bound the up-front reservation for a .gz file.
constexpr uint64_t kMaxDeflateRatio = 1032;
// Element counts must fit Tensor's int64 numel.
constexpr uint64_t kMaxDataBytes = static_cast<uint64_t>(INT64_MAX);

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*X", digits, static_cast<unsigned>(v));
  return buf;
}

// Names of the IDX type bytes, so a refused file says what it holds.
const char* idx_type_name(uint8_t t) {
  switch (t) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

// The uncompressed byte stream of a raw or gzip file. read() returns fewer bytes than
// asked only at the real end of the stream; a corrupt or cut gzip stream throws.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) fail("idx: ", path, ": is a directory, not an IDX file");
    errno = 0;
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) fail("idx: ", path, ": cannot open (", std::strerror(errno), ")");
    uint64_t size = fs::file_size(path, ec);
    file_bytes_ = ec ? 0 : size;
    start();
  }
  // Bytes in memory (read_idx_bytes), through fmemopen so that both take the same path.
  ByteSource(const std::string& bytes, const std::string& name) : path_(name) {
    static char empty = 0;  // fmemopen wants a buffer even for 0 bytes
    char* buf = bytes.empty() ? &empty : const_cast<char*>(bytes.data());
    errno = 0;
    file_.reset(::fmemopen(buf, bytes.size(), "rb"));
    if (!file_) fail("idx: ", name, ": fmemopen failed (", std::strerror(errno), ")");
    file_bytes_ = bytes.size();
    start();
  }
  // Reads the first chunk and sniffs the gzip magic; both constructors end here.
  void start() {
    in_.resize(kInChunk);
    in_len_ = fill(in_.data(), in_.size());
    gzip_ = in_len_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (gzip_) {
      // 15 + 16: 32 KiB window, gzip wrapper required (and its CRC-32 and length checked).
      if (inflateInit2(&zs_, 15 + 16) != Z_OK) fail("idx: ", path_, ": zlib inflateInit2 failed");
      zinit_ = true;
      zs_.next_in = in_.data();
      zs_.avail_in = static_cast<uInt>(in_len_);
    }
  }
  ~ByteSource() {
    if (zinit_) inflateEnd(&zs_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return gzip_; }
  uint64_t file_bytes() const { return file_bytes_; }

  std::size_t read(uint8_t* dst, std::size_t n) {
    std::size_t got = gzip_ ? read_gzip(dst, n) : read_raw(dst, n);
    out_off_ += got;
    return got;
  }

 private:
  std::size_t fill(uint8_t* dst, std::size_t n) {
    errno = 0;
    std::size_t got = std::fread(dst, 1, n, file_.get());
    if (got < n && std::ferror(file_.get()))
      fail("idx: ", path_, ": read error at file offset ", file_off_ + got, " (",
           std::strerror(errno), ")");
    file_off_ += got;
    return got;
  }

  std::size_t read_raw(uint8_t* dst, std::size_t n) {
    std::size_t got = std::min(n, in_len_ - in_pos_);
    if (got) std::memcpy(dst, in_.data() + in_pos_, got);
    in_pos_ += got;
    if (got < n) got += fill(dst + got, n - got);
    return got;
  }

  std::size_t read_gzip(uint8_t* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      if (zs_.avail_in == 0 && !file_eof_) {
        std::size_t k = fill(in_.data(), in_.size());
        file_eof_ = k == 0;
        zs_.next_in = in_.data();
        zs_.avail_in = static_cast<uInt>(k);
      }
      if (member_done_) {
        if (zs_.avail_in == 0) break;  // clean end after a complete member
        inflateReset(&zs_);            // another member follows, as `cat a.gz b.gz` makes
        member_done_ = false;
      }
      if (zs_.avail_in == 0)
        fail("idx: ", path_, ": truncated gzip stream at offset ", out_off_ + got,
             " (the compressed file ends after ", file_off_,
             " bytes, before the end of its gzip member)");
      zs_.next_out = dst + got;
      zs_.avail_out = static_cast<uInt>(std::min<std::size_t>(n - got, UINT32_MAX));
      uInt before = zs_.avail_out;
      int rc = inflate(&zs_, Z_NO_FLUSH);
      got += before - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {  // Z_BUF_ERROR: needs more input
        const char* why = zs_.msg ? zs_.msg : zError(rc);
        fail("idx: ", path_, ": corrupt gzip stream at offset ", out_off_ + got,
             " (compressed offset ", file_off_ - zs_.avail_in, "): ", why);
      }
    }
    return got;
  }

  std::string path_;
  std::unique_ptr<FILE, FileCloser> file_;
  uint64_t file_bytes_ = 0;
  uint64_t file_off_ = 0;  // bytes taken from the file so far
  uint64_t out_off_ = 0;   // uncompressed bytes handed out so far
  std::vector<uint8_t> in_;
  std::size_t in_len_ = 0, in_pos_ = 0;  // raw mode: the first chunk, read to sniff gzip
  bool gzip_ = false;
  z_stream zs_{};
  bool zinit_ = false;
  bool file_eof_ = false;
  bool member_done_ = false;
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

IdxArray read_idx_from(ByteSource& src, const std::string& path) {
  uint8_t magic[4];
  std::size_t got = src.read(magic, 4);
  if (got < 4)
    fail("idx: ", path, ": truncated header at offset ", got, " (expected a 4-byte magic, got ",
         got, " bytes)");
  const std::string m = hex(be32(magic), 8);
  if (magic[0] != 0 || magic[1] != 0)
    fail("idx: ", path, ": bad magic ", m,
         " at offset 0 (expected 0x000008NN: two zero bytes, type 0x08, ndim)");
  const char* type_name = idx_type_name(magic[2]);
  if (!type_name)
    fail("idx: ", path, ": bad magic ", m, " at offset 0: unknown type byte ", hex(magic[2], 2),
         " at offset 2 (expected 0x08)");
  if (magic[2] != 0x08)
    fail("idx: ", path, ": unsupported type byte ", hex(magic[2], 2), " (", type_name,
         ") at offset 2 in magic ", m, "; only 0x08 (unsigned byte) is supported");
  const int ndim = magic[3];
  if (ndim == 0)
    fail("idx: ", path, ": ndim 0 at offset 3 in magic ", m, " (expected at least 1 dimension)");

  std::vector<uint8_t> dim_bytes(4 * static_cast<std::size_t>(ndim));
  got = src.read(dim_bytes.data(), dim_bytes.size());
  if (got < dim_bytes.size())
    fail("idx: ", path, ": truncated header at offset 4+", got, " (expected ", dim_bytes.size(),
         " dimension bytes for ndim ", ndim, ", got ", got, ")");
  IdxArray out;
  uint64_t need = 1;
  bool overflow = false;
  for (int i = 0; i < ndim; ++i) {
    uint64_t d = be32(&dim_bytes[4 * static_cast<std::size_t>(i)]);
    out.dims.push_back(static_cast<int64_t>(d));
    if (d != 0 && need > kMaxDataBytes / d) overflow = true;
    if (!overflow) need *= d;
  }
  if (overflow)
    fail("idx: ", path, ": dims ", shape_str(out.dims),
         " at offset 4 multiply past 2^63-1 data bytes");
  const uint64_t header = 4 + dim_bytes.size();

  // Reserve no more than the file can hold, so a corrupt header cannot make us allocate
  // gigabytes before the truncation is found.
  uint64_t cap = src.gzip() ? src.file_bytes() * kMaxDeflateRatio
                            : src.file_bytes() - std::min(src.file_bytes(), header);
  out.data.reserve(static_cast<std::size_t>(std::min(need, cap)));
  uint64_t have = 0;
  while (have < need) {
    std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(kOutChunk, need - have));
    out.data.resize(static_cast<std::size_t>(have) + want);
    std::size_t k = src.read(out.data.data() + have, want);
    have += k;
    if (k < want) break;
  }
  if (have < need)
    fail("idx: ", path, ": truncated at offset ", header, "+", have, " (expected ", need,
         " data bytes for dims ", shape_str(out.dims), ", got ", have, ")");

  uint64_t extra = 0;
  uint8_t scratch[4096];
  for (std::size_t k; (k = src.read(scratch, sizeof scratch)) > 0;) extra += k;
  if (extra)
    fail("idx: ", path, ": ", extra, " trailing bytes at offset ", header, "+", need, " after the ",
         need, " data bytes declared by dims ", shape_str(out.dims));
  return out;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  ByteSource src(path);
  return read_idx_from(src, path);
}

IdxArray read_idx_bytes(const std::string& bytes, const std::string& name) {
  ByteSource src(bytes, name);
  return read_idx_from(src, name);
}

Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                         const std::string& name, int64_t limit) {
  IdxArray img = read_idx(images_path);
  check(img.dims.size() == 3, "idx: images ", images_path, " has dims ", shape_str(img.dims),
        ", expected 3 dims [n,rows,cols] (magic 0x00000803)");
  IdxArray lab = read_idx(labels_path);
  check(lab.dims.size() == 1, "idx: labels ", labels_path, " has dims ", shape_str(lab.dims),
        ", expected 1 dim [n] (magic 0x00000801)");
  check(img.dims[0] == lab.dims[0], "idx: images ", images_path, " has ", img.dims[0],
        " items but labels ", labels_path, " has ", lab.dims[0]);

  const int64_t n = img.dims[0];
  const int64_t kept = limit > 0 && limit < n ? limit : n;
  const std::size_t label_header = 4 + 4 * lab.dims.size();
  Dataset ds;
  ds.name = name;
  ds.num_classes = kMnistNumClasses;
  for (std::size_t i = 0; i < lab.data.size(); ++i) {  // every label checked, the kept ones stored
    int v = lab.data[i];
    if (v >= kMnistNumClasses)
      fail("idx: ", labels_path, ": label ", v, " at offset ", label_header, "+", i,
           " is outside 0..", kMnistNumClasses - 1);
  }
  ds.labels.assign(lab.data.begin(), lab.data.begin() + kept);
  ds.images = Tensor({kept, 1, img.dims[1], img.dims[2]}, DType::f32);
  float* px = ds.images.data<float>();
  for (int64_t i = 0; i < ds.images.numel(); ++i) px[i] = img.data[static_cast<std::size_t>(i)] / 255.0f;
  return ds;
}

std::string find_idx_file(const std::string& dir, const std::string& stem) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("idx: dataset directory ", dir,
         fs::exists(dir, ec) ? " is not a directory" : " does not exist");
  const fs::path raw = fs::path(dir) / stem;
  const fs::path gz = fs::path(dir) / (stem + ".gz");
  if (fs::exists(raw, ec)) return raw.string();
  if (fs::exists(gz, ec)) return gz.string();
  fail("idx: dataset directory ", dir, " has neither ", stem, " nor ", stem, ".gz");
}

Dataset load_mnist_like(const std::string& dir, bool train, const std::string& name, int64_t limit) {
  const std::string prefix = train ? "train" : "t10k";
  std::string images = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  std::string labels = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  return load_idx_dataset(images, labels, name, limit);
}

}  // namespace driftlab
