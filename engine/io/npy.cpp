// .npy read/write. Layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0,
// uint32 LE for 2.0/3.0), a Python dict literal {'descr','fortran_order','shape'} padded
// with spaces and a '\n', then the raw little-endian data in C order.
// The reader parses only that literal (strings, True/False, tuples of ints), checks every
// length against the file size before reading, and refuses trailing bytes.
#include "engine/io/npy.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace driftlab {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "npy: data is copied as-is, which assumes a little-endian host");

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kAlign = 64;  // numpy's ARRAY_ALIGN: data starts at a multiple of 64
// numpy >= 1.24 pads the dict so the first axis can grow in place to this many digits.
constexpr std::size_t kGrowthAxisMaxDigits = 21;
// numpy refuses headers over 10000 bytes by default; far more than that is a corrupt
// length field, and we would rather say so than allocate it.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxDataBytes = static_cast<uint64_t>(INT64_MAX);
const char kMagic[] = "\x93NUMPY";  // 6 bytes

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

// Removes the temporary file on every exit path except the successful rename.
struct RemoveUnlessKept {
  std::string path;
  bool keep = false;
  ~RemoveUnlessKept() {
    if (!keep) std::remove(path.c_str());
  }
};

// Printable rendering of header bytes for messages: non-printables as \xNN.
std::string printable(const std::string& s, std::size_t max_chars = 160) {
  std::string out;
  std::size_t end = s.find_last_not_of(" \n");
  end = end == std::string::npos ? 0 : end + 1;
  for (std::size_t i = 0; i < end && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isprint(c)) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  if (end > max_chars) out += "...";
  return out;
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
  std::size_t descr_at = 0, fortran_at = 0, shape_at = 0;  // file offsets of the values
};

// Parses the dict literal numpy writes; base is the file offset of its first byte.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text, std::size_t base)
      : path_(path), s_(text), base_(base) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      std::size_t key_at = pos_;
      std::string key = parse_string();
      expect(':');
      skip_ws();
      if (key == "descr" && !seen_descr) {
        seen_descr = true;
        h.descr_at = base_ + pos_;
        if (peek() != '\'' && peek() != '"')
          error(pos_, "structured or non-string 'descr' is not supported");
        h.descr = parse_string();
      } else if (key == "fortran_order" && !seen_fortran) {
        seen_fortran = true;
        h.fortran_at = base_ + pos_;
        h.fortran_order = parse_bool();
      } else if (key == "shape" && !seen_shape) {
        seen_shape = true;
        h.shape_at = base_ + pos_;
        h.shape = parse_shape();
      } else {
        bool known = key == "descr" || key == "fortran_order" || key == "shape";
        error(key_at, (known ? "duplicate key '" : "unexpected key '") + key + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        error(pos_, "expected ',' or '}'");
      }
    }
    ++pos_;  // '}'
    skip_ws();
    if (pos_ != s_.size()) error(pos_, "unexpected text after '}'");
    if (!seen_descr || !seen_fortran || !seen_shape)
      error(pos_, std::string("missing key '") +
                      (!seen_descr     ? "descr"
                       : !seen_fortran ? "fortran_order"
                                       : "shape") +
                      "'");
    return h;
  }

 private:
  [[noreturn]] void error(std::size_t at, const std::string& what) const {
    fail("npy: ", path_, ": cannot parse header at offset ", base_ + at, ": ", what, " in \"",
         printable(s_), "\"");
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) error(pos_, std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    char q = peek();
    if (q != '\'' && q != '"') error(pos_, "expected a quoted string");
    std::size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') error(pos_, "escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ == s_.size()) error(start - 1, "unterminated string");
    return s_.substr(start, pos_++ - start);
  }
  bool parse_bool() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    error(pos_, "expected True or False");
  }
  // "()", "(5,)", "(2, 3)"; Python 2 writers may add an 'L' after each number.
  Shape parse_shape() {
    Shape shape;
    expect('(');
    for (;;) {
      skip_ws();
      if (peek() == ')') break;
      std::size_t at = pos_;
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        error(pos_, "expected a non-negative integer in 'shape'");
      uint64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        uint64_t digit = static_cast<uint64_t>(s_[pos_++] - '0');
        if (v > (kMaxDataBytes - digit) / 10) error(at, "dimension too large");
        v = v * 10 + digit;
      }
      if (peek() == 'L') ++pos_;
      shape.push_back(static_cast<int64_t>(v));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        error(pos_, "expected ',' or ')' in 'shape'");
      }
    }
    ++pos_;  // ')'
    return shape;
  }

  const std::string& path_;
  const std::string& s_;
  std::size_t base_;
  std::size_t pos_ = 0;
};

uint64_t read_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

namespace {
// numpy's descr of each dtype, little-endian ('|' for single bytes, as numpy writes them).
struct NpyType {
  DType dtype;
  const char* descr;
};
constexpr NpyType kNpyTypes[] = {{DType::f32, "<f4"}, {DType::f64, "<f8"}, {DType::i8, "|i1"},
                                 {DType::u8, "|u1"},  {DType::i32, "<i4"}, {DType::i64, "<i8"}};
}  // namespace

std::string npy_header(DType dtype, const Shape& shape) {
  const char* descr = nullptr;
  for (const NpyType& t : kNpyTypes)
    if (t.dtype == dtype) descr = t.descr;
  if (!descr) fail_dtype("npy_header", dtype);
  std::string dict = "{'descr': '";
  dict += descr;
  dict += "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dict += ",";  // Python's repr of a 1-tuple
  dict += "), }";
  if (!shape.empty()) dict.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');

  for (int major = 1; major <= 2; ++major) {
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    const std::size_t hlen = dict.size() + 1;  // + '\n'
    // Like numpy: a full block of padding when already aligned, never zero.
    const std::size_t pad = kAlign - (6 + 2 + len_bytes + hlen) % kAlign;
    const uint64_t field = hlen + pad;
    if (major == 1 && field > 0xFFFF) continue;  // 2.0 only when 1.0 cannot hold it
    std::string out(kMagic, 6);
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t b = 0; b < len_bytes; ++b) out += static_cast<char>((field >> (8 * b)) & 0xFF);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
  }
  fail("npy: header of ", dict.size(), " bytes for shape ", shape_str(shape), " is too long");
}

void write_npy(const std::string& path, const Tensor& t) {
  check(t.defined(), "npy: ", path, ": cannot write an undefined tensor");
  const std::string header = npy_header(t.dtype(), t.shape());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  RemoveUnlessKept guard{tmp};
  errno = 0;
  FilePtr f(std::fopen(tmp.c_str(), "wb"));
  if (!f) fail("npy: ", path, ": cannot create ", tmp, " (", std::strerror(errno), ")");

  auto put = [&](const void* p, std::size_t n, std::size_t at) {
    if (n && std::fwrite(p, 1, n, f.get()) != n)
      fail("npy: ", path, ": write error at offset ", at, " of ", tmp, " (", std::strerror(errno),
           ")");
  };
  put(header.data(), header.size(), 0);
  put(t.raw(), t.nbytes(), header.size());
  // Flush and fsync before the rename, so that path never names a half-written file.
  if (std::fflush(f.get()) != 0 || ::fsync(::fileno(f.get())) != 0)
    fail("npy: ", path, ": cannot flush ", tmp, " (", std::strerror(errno), ")");
  if (std::fclose(f.release()) != 0)
    fail("npy: ", path, ": cannot close ", tmp, " (", std::strerror(errno), ")");
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    fail("npy: ", path, ": cannot rename ", tmp, " onto it (", std::strerror(errno), ")");
  guard.keep = true;
}

namespace {
// The reader proper, on an open file of `size` bytes (a real file or fmemopen'ed bytes).
Tensor read_npy_from(const FilePtr& f, uint64_t size, const std::string& path) {

  // Reads exactly n bytes at offset `at`; sizes were checked against `size` beforehand,
  // so a short read means the file changed under us or the disk failed.
  auto get = [&](void* dst, std::size_t n, uint64_t at) {
    if (n && std::fread(dst, 1, n, f.get()) != n)
      fail("npy: ", path, ": read error at offset ", at, " (", std::strerror(errno), ")");
  };

  unsigned char pre[12];
  if (size < 10)
    fail("npy: ", path, ": truncated header at offset ", size,
         " (a .npy file starts with at least 10 header bytes, the file has ", size, ")");
  get(pre, 10, 0);
  if (std::memcmp(pre, kMagic, 6) != 0)
    fail("npy: ", path, ": bad magic \"", printable(std::string(pre, pre + 6)),
         "\" at offset 0 (expected \"\\x93NUMPY\")");
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0)
    fail("npy: ", path, ": unsupported format version ", major, ".", minor,
         " at offset 6 (supported: 1.0, 2.0, 3.0)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + len_bytes;
  if (size < prefix)
    fail("npy: ", path, ": truncated header at offset ", size, " (format ", major, ".0 needs ",
         prefix, " bytes before the dict)");
  if (len_bytes == 4) get(pre + 10, 2, 10);
  const uint64_t hlen = read_le(pre + 8, static_cast<int>(len_bytes));
  if (prefix + hlen > size)
    fail("npy: ", path, ": header length ", hlen, " at offset 8 runs past the end of the file (",
         size, " bytes, the header would end at ", prefix + hlen, ")");
  if (hlen > kMaxHeaderBytes)
    fail("npy: ", path, ": header length ", hlen, " at offset 8 is over ", kMaxHeaderBytes,
         " bytes");
  std::string text(static_cast<std::size_t>(hlen), '\0');
  get(&text[0], text.size(), prefix);
  NpyHeader h = HeaderParser(path, text, prefix).parse();

  const NpyType* type = nullptr;
  for (const NpyType& t : kNpyTypes)
    if (h.descr == t.descr) type = &t;
  // numpy also spells single bytes with '<' or '>' ('<i1'): the same bytes.
  if (!type && h.descr.size() == 3 && h.descr[2] == '1' && (h.descr[0] == '<' || h.descr[0] == '>'))
    for (const NpyType& t : kNpyTypes)
      if (h.descr.substr(1) == std::string(t.descr).substr(1)) type = &t;
  if (!type && !h.descr.empty() && h.descr[0] == '>')
    fail("npy: ", path, ": big-endian dtype '", h.descr, "' at offset ", h.descr_at,
         " is not supported (save a.astype('<", h.descr.substr(1), "'))");
  if (!type)
    fail("npy: ", path, ": unsupported dtype '", h.descr, "' at offset ", h.descr_at,
         " (known: '<f4' float32, '<f8' float64, '|i1' int8, '|u1' uint8, '<i4' int32, '<i8' int64)");
  const DType dtype = type->dtype;
  if (h.fortran_order)
    fail("npy: ", path, ": fortran_order True at offset ", h.fortran_at,
         " is not supported (save np.ascontiguousarray(a))");

  const uint64_t item = dtype_size(dtype);
  uint64_t need = item;
  for (int64_t d : h.shape) {
    uint64_t ud = static_cast<uint64_t>(d);
    if (ud != 0 && need > kMaxDataBytes / ud)
      fail("npy: ", path, ": shape ", shape_str(h.shape), " at offset ", h.shape_at,
           " multiplies past 2^63-1 bytes");
    need *= ud;
  }
  const uint64_t data_at = prefix + hlen;
  const uint64_t avail = size - data_at;
  if (avail < need)
    fail("npy: ", path, ": header claims shape ", shape_str(h.shape), " (", need,
         " bytes) but only ", avail, " data bytes follow at offset ", data_at);
  if (avail > need)
    fail("npy: ", path, ": ", avail - need, " trailing bytes at offset ", data_at, "+", need,
         " after the ", need, " data bytes of shape ", shape_str(h.shape));

  Tensor t(h.shape, dtype);
  get(t.raw(), static_cast<std::size_t>(need), data_at);
  return t;
}
}  // namespace

Tensor read_npy(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("npy: ", path, ": is a directory, not a .npy file");
  errno = 0;
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) fail("npy: ", path, ": cannot open (", std::strerror(errno), ")");
  const uint64_t size = fs::file_size(path, ec);
  if (ec) fail("npy: ", path, ": cannot read its size (", ec.message(), ")");
  return read_npy_from(f, size, path);
}

Tensor read_npy_bytes(const std::string& bytes, const std::string& name) {
  static char empty = 0;  // fmemopen wants a buffer even for 0 bytes
  char* buf = bytes.empty() ? &empty : const_cast<char*>(bytes.data());
  errno = 0;
  FilePtr f(::fmemopen(buf, bytes.size(), "rb"));
  if (!f) fail("npy: ", name, ": fmemopen failed (", std::strerror(errno), ")");
  return read_npy_from(f, bytes.size(), name);
}

}  // namespace driftlab
