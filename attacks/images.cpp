#include "attacks/images.h"

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace driftlab {
namespace attacks {

EightBit parse_eight_bit(const std::string& s) {
  if (s == "off") return EightBit::off;
  if (s == "round") return EightBit::round;
  if (s == "truncate") return EightBit::truncate;
  fail("attack: unknown 8-bit rule '", s, "' (off | round: np.round(x * 255) | truncate: (x * 255).astype(uint8))");
}

const char* eight_bit_name(EightBit r) {
  return r == EightBit::off ? "off" : r == EightBit::round ? "round" : "truncate";
}

namespace {

template <typename T>
void codes_of(const T* x, int64_t n, EightBit rule, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    if (!(v >= T(0) && v <= T(1)))  // the message only on failure (per element)
      fail("8-bit images: element ", i, " is ", static_cast<double>(v), ", outside [0, 1]");
    const T scaled = v * T(255);  // in the dtype, as numpy computes x * 255 on a float32 array
    const T k = rule == EightBit::truncate ? std::trunc(scaled) : std::nearbyint(scaled);  // half-even
    out[i] = static_cast<uint8_t>(k);
  }
}

}  // namespace

std::vector<uint8_t> eight_bit_codes(const Tensor& x, EightBit rule) {
  check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "8-bit images: float32 or float64 input, got ",
        dtype_name(x.dtype()));
  std::vector<uint8_t> k(static_cast<std::size_t>(x.numel()));
  if (x.dtype() == DType::f32)
    codes_of(x.data<float>(), x.numel(), rule, k.data());
  else
    codes_of(x.data<double>(), x.numel(), rule, k.data());
  return k;
}

Tensor to_8bit(const Tensor& x, EightBit rule) {
  check(rule != EightBit::off, "8-bit images: to_8bit with rule off");
  const std::vector<uint8_t> k = eight_bit_codes(x, rule);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.dtype() == DType::f32)
      out.data<float>()[i] = static_cast<float>(k[i]) / 255.f;
    else
      out.data<double>()[i] = static_cast<double>(k[i]) / 255.0;
  }
  return out;
}

namespace {

void put32(std::string& s, uint32_t v) {
  for (int b = 3; b >= 0; --b) s.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

void chunk(std::string& png, const char* type, const std::string& data) {
  put32(png, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  png += body;
  put32(png, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
}

}  // namespace

void write_png(const std::string& path, const uint8_t* pixels, int64_t h, int64_t w, int channels) {
  check(channels == 1 || channels == 3, "png: ", channels, " channels (1 grey or 3 RGB)");
  check(h >= 1 && w >= 1 && h < (1 << 24) && w < (1 << 24), "png: size ", h, "x", w);
  // Filter type 0 (none) before each row.
  const std::size_t row = static_cast<std::size_t>(w) * static_cast<std::size_t>(channels);
  std::string raw;
  raw.reserve(static_cast<std::size_t>(h) * (row + 1));
  for (int64_t y = 0; y < h; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(pixels) + static_cast<std::size_t>(y) * row, row);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::string z(zlen, '\0');
  check(compress2(reinterpret_cast<Bytef*>(&z[0]), &zlen, reinterpret_cast<const Bytef*>(raw.data()),
                  static_cast<uLong>(raw.size()), 9) == Z_OK,
        "png: zlib could not compress ", path);
  z.resize(zlen);
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put32(ihdr, static_cast<uint32_t>(w));
  put32(ihdr, static_cast<uint32_t>(h));
  ihdr.push_back(8);                                 // bit depth
  ihdr.push_back(static_cast<char>(channels == 1 ? 0 : 2));  // grey / RGB
  ihdr.append(3, '\0');                              // deflate, adaptive filtering, no interlace
  chunk(png, "IHDR", ihdr);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", "");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(png.data(), static_cast<std::streamsize>(png.size()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      fail("png: could not write ", path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("png: could not rename ", tmp, " to ", path);
  }
}

void write_pngs(const std::string& dir, const std::string& prefix, const Tensor& x) {
  check(x.rank() == 4 && (x.dim(1) == 1 || x.dim(1) == 3), "png: images (N, 1 or 3, H, W), got ",
        shape_str(x.shape()));
  const std::vector<uint8_t> k = eight_bit_codes(x, EightBit::round);
  const int64_t c = x.dim(1), h = x.dim(2), w = x.dim(3), per = c * h * w;
  std::vector<uint8_t> px(static_cast<std::size_t>(per));
  for (int64_t s = 0; s < x.dim(0); ++s) {
    for (int64_t ch = 0; ch < c; ++ch)  // CHW -> HWC
      for (int64_t i = 0; i < h * w; ++i) px[static_cast<std::size_t>(i * c + ch)] = k[s * per + ch * h * w + i];
    write_png(dir + "/" + prefix + std::to_string(s) + ".png", px.data(), h, w, static_cast<int>(c));
  }
}

}  // namespace attacks
}  // namespace driftlab
