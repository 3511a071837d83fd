#include "engine/io/container.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace driftlab {

namespace {

void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

uint32_t container_crc32(uint32_t crc, const void* data, uint64_t n) {
  // zlib's crc32 takes a uInt (32-bit) length: one call over more than 4 GiB would cover only
  // n mod 2^32 bytes, so feed it in pieces.
  constexpr uint64_t kPiece = uint64_t{1} << 30;
  uLong c = crc;
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const uint64_t k = std::min(n, kPiece);
    c = crc32(c, p, static_cast<uInt>(k));
    p += k;
    n -= k;
  }
  return static_cast<uint32_t>(c);
}

uint64_t ContainerParts::add(const void* p, uint64_t n) {
  const uint64_t at = data_size;
  if (n) data.push_back({p, n});
  data_size += n;
  return at;
}

nlohmann::json ContainerParts::add_tensor(const std::string& name, const Tensor& t) {
  const uint64_t at = add(t.raw(), t.nbytes());  // an empty tensor: no buffer, nothing added
  return {{"name", name}, {"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"offset", at}, {"nbytes", t.nbytes()}};
}

namespace {

// The frame around the parts: magic, version and header length with the header after them, then
// the CRC of every byte before it.
std::string container_prefix(const ContainerFormat& f, uint32_t version, const std::string& header) {
  std::string out(f.magic, 8);
  put_le(out, version, 4);
  put_le(out, header.size(), 8);
  out += header;
  return out;
}

std::vector<ByteSpan> framed_spans(const std::string& prefix, const std::vector<ByteSpan>& data, std::string& crc) {
  std::vector<ByteSpan> spans;
  spans.reserve(data.size() + 2);
  spans.push_back({prefix.data(), prefix.size()});
  spans.insert(spans.end(), data.begin(), data.end());
  uint32_t c = 0;
  for (const ByteSpan& s : spans) c = container_crc32(c, s.data, s.size);
  crc.clear();
  put_le(crc, c, 4);
  spans.push_back({crc.data(), crc.size()});
  return spans;
}

}  // namespace

std::string container_bytes(const ContainerFormat& f, uint32_t version, const ContainerParts& parts) {
  const std::string prefix = container_prefix(f, version, parts.header);
  std::string crc;
  const std::vector<ByteSpan> spans = framed_spans(prefix, parts.data, crc);
  std::string out;
  out.reserve(prefix.size() + parts.data_size + 4);
  for (const ByteSpan& s : spans) out.append(static_cast<const char*>(s.data), s.size);
  return out;
}

std::string container_bytes(const ContainerFormat& f, uint32_t version, const std::string& header,
                            const std::string& data) {
  ContainerParts parts;
  parts.header = header;
  parts.add(data.data(), data.size());
  return container_bytes(f, version, parts);
}

void write_container_atomic(const std::string& path, const ContainerFormat& f, uint32_t version,
                            const ContainerParts& parts, const std::function<void()>& halfway) {
  const std::string prefix = container_prefix(f, version, parts.header);
  std::string crc;
  write_file_atomic(path, framed_spans(prefix, parts.data, crc), halfway);
}

void container_read_at(std::istream& in, uint64_t at, void* dst, uint64_t n, const std::string& path,
                       const ContainerFormat& f) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(at));
  errno = 0;
  if (n) in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  if (!in || static_cast<uint64_t>(in.gcount()) != n)
    fail(f.what, ": ", path, ": read error at offset ",
         at + (f.read_error_at_end ? static_cast<uint64_t>(std::max<std::streamsize>(in.gcount(), 0)) : 0), " (", n,
         " bytes wanted", errno ? std::string(": ") + std::strerror(errno) : std::string(), ")");
}

ContainerHeader read_container(std::istream& in, const std::string& path, const ContainerFormat& f) {
  ContainerHeader c;
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  check(in.good() && end >= 0, f.what, ": ", path, ": cannot find its size", f.no_size);
  c.size = static_cast<uint64_t>(end);
  const uint64_t size = c.size;
  check(size >= 24, f.what, ": ", path, ": truncated at offset ", size, " (", f.at_least, ")");
  char pre[20];
  container_read_at(in, 0, pre, 20, path, f);
  check(std::memcmp(pre, f.magic, 8) == 0, f.what, ": ", path, ": bad magic at offset 0 ", f.not_one);
  c.version = static_cast<uint32_t>(get_le(pre + 8, 4));
  if (f.oldest == f.newest)
    check(c.version == f.newest, f.what, ": ", path, ": version ", c.version,
          " at offset 8 is not supported (this build reads version ", f.newest, ")");
  else
    check(c.version >= f.oldest && c.version <= f.newest, f.what, ": ", path, ": version ", c.version,
          " at offset 8 is not supported (this build reads versions ", f.oldest, " to ", f.newest, ")");
  c.header_len = get_le(pre + 12, 8);
  const uint64_t hlen = c.header_len;
  if (f.one_header_check) {
    check(hlen <= size - 24 && hlen <= f.max_header, f.what, ": ", path, ": header length ", hlen,
          " at offset 12 exceeds the ", size - 24, " bytes left (file is truncated or corrupt)");
  } else {
    check(hlen <= size - 24, f.what, ": ", path, ": header length ", hlen, " at offset 12 exceeds the ", size - 24,
          " bytes left");
    check(hlen <= f.max_header, f.what, ": ", path, ": header length ", hlen, " at offset 12 is over ", f.max_header,
          " bytes");
  }
  {  // the CRC first, streamed: whatever else the bytes say is only read once they are known whole
    std::vector<char> buf(static_cast<std::size_t>(std::min<uint64_t>(size - 4, uint64_t{1} << 20)));
    uint32_t crc = 0;
    for (uint64_t at = 0; at < size - 4; at += buf.size()) {
      const uint64_t k = std::min<uint64_t>(buf.size(), size - 4 - at);
      container_read_at(in, at, buf.data(), k, path, f);
      crc = container_crc32(crc, buf.data(), k);
    }
    char tail[4];
    container_read_at(in, size - 4, tail, 4, path, f);
    check(static_cast<uint32_t>(get_le(tail, 4)) == crc, f.what, ": ", path, ": CRC mismatch at offset ", size - 4,
          " (file is corrupt or truncated)");
  }
  std::string htext(static_cast<std::size_t>(hlen), '\0');
  container_read_at(in, 20, htext.data(), hlen, path, f);
  try {
    c.header = nlohmann::json::parse(htext);
  } catch (const std::exception& e) {
    fail(f.what, ": ", path, ": header JSON at offset 20 is invalid: ", e.what());
  }
  return c;
}

void write_file_atomic(const std::string& path, const std::string& bytes, const std::function<void()>& halfway) {
  write_file_atomic(path, std::vector<ByteSpan>{{bytes.data(), bytes.size()}}, halfway);
}

void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& spans,
                       const std::function<void()>& halfway) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(fd >= 0, "write: cannot create ", tmp, ": ", std::strerror(errno));
  uint64_t total = 0;
  for (const ByteSpan& s : spans) total += s.size;
  const uint64_t half = halfway ? total / 2 : total;
  bool called = false;
  uint64_t done = 0;  // bytes of the file written
  for (const ByteSpan& s : spans) {
    const char* p = static_cast<const char*>(s.data);
    uint64_t left = s.size;
    while (left > 0) {  // half < total, so the hook's point lies before some byte still to write
      if (halfway && !called && done == half) {
        halfway();
        called = true;
      }
      // Up to the halfway point first, so that the hook sees exactly half the bytes written.
      const uint64_t upto = done < half ? std::min(left, half - done) : left;
      ssize_t w = ::write(fd, p, upto);
      if (w < 0) {
        int e = errno;
        ::close(fd);
        std::remove(tmp.c_str());
        fail("write: ", tmp, " at offset ", done, ": ", std::strerror(e));
      }
      p += w;
      left -= static_cast<uint64_t>(w);
      done += static_cast<uint64_t>(w);
    }
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

}  // namespace driftlab
