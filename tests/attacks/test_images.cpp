// attacks/images.h: the 8-bit round trip (the PNG files of Abyane & Hemmati's study,
// docs/GLOSSARY.md) with hand-computed codes for both rules, and the PNG writer read back by hand
// (signature, chunk CRCs, IHDR, inflated rows).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "attacks/images.h"
#include "core/error.h"

namespace driftlab {
namespace {

TEST(EightBit, RoundIsHalfEvenOfXTimes255AndTruncateIsAstype) {
  // x * 255 in float32: 0.5 -> 127.5 exactly (half-even: 128; truncated: 127); 0.25 -> 63.75;
  // 0.9999 -> 254.97; 0.6f * 255 = 153.00000610 -> 153 both ways; 1 -> 255.
  const Tensor x = Tensor::from<float>({6}, {0.f, 0.5f, 0.25f, 0.9999f, 0.6f, 1.f});
  EXPECT_EQ(attacks::eight_bit_codes(x, attacks::EightBit::round), (std::vector<uint8_t>{0, 128, 64, 255, 153, 255}));
  EXPECT_EQ(attacks::eight_bit_codes(x, attacks::EightBit::truncate),
            (std::vector<uint8_t>{0, 127, 63, 254, 153, 255}));
  const Tensor r = attacks::to_8bit(x, attacks::EightBit::round);
  EXPECT_EQ(r.data<float>()[1], 128.f / 255.f);
  EXPECT_EQ(r.data<float>()[5], 1.f);
  // an image already on the 8-bit grid stays where it is
  Tensor grid = Tensor::empty({256}, DType::f32);
  for (int k = 0; k < 256; ++k) grid.data<float>()[k] = static_cast<float>(k) / 255.f;
  for (attacks::EightBit rule : {attacks::EightBit::round, attacks::EightBit::truncate}) {
    const Tensor g = attacks::to_8bit(grid, rule);
    for (int k = 0; k < 256; ++k) EXPECT_EQ(g.data<float>()[k], grid.data<float>()[k]) << k;
  }
  const Tensor bad = Tensor::from<float>({3}, {0.f, 1.0001f, 0.f});
  try {
    attacks::eight_bit_codes(bad, attacks::EightBit::round);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(attacks::parse_eight_bit("floor"), Error);
}

uint32_t be32(const std::string& s, std::size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint32_t(uint8_t(s[at + 3]));
}

TEST(Png, WrittenImagesReadBackByHand) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/driftlab_png_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  // two RGB images of 2x3: channel c, row y, column x holds (c * 6 + y * 3 + x) * 10 / 255
  Tensor x = Tensor::empty({2, 3, 2, 3}, DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i % 18) * 10) / 255.f;
  attacks::write_pngs(dir, "adv_", x);
  for (int s = 0; s < 2; ++s) {
    std::ifstream f(dir + "/adv_" + std::to_string(s) + ".png", std::ios::binary);
    const std::string png((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_GT(png.size(), 8u);
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    std::size_t at = 8;
    std::string idat, types;
    uint32_t w = 0, h = 0;
    while (at + 12 <= png.size()) {
      const uint32_t len = be32(png, at);
      const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, len);
      const std::string body = png.substr(at + 4, 4 + len);
      EXPECT_EQ(be32(png, at + 8 + len), crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size())) << type;
      types += type + " ";
      if (type == "IHDR") {
        w = be32(data, 0), h = be32(data, 4);
        EXPECT_EQ(data[8], 8);  // bit depth
        EXPECT_EQ(data[9], 2);  // RGB
      }
      if (type == "IDAT") idat += data;
      at += 12 + len;
    }
    EXPECT_EQ(types, "IHDR IDAT IEND ");
    EXPECT_EQ(at, png.size());
    ASSERT_EQ(w, 3u);
    ASSERT_EQ(h, 2u);
    std::string raw(2 * (1 + 9), '\0');
    uLongf n = raw.size();
    ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(&raw[0]), &n, reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
              Z_OK);
    ASSERT_EQ(n, raw.size());
    for (int y = 0; y < 2; ++y) {
      EXPECT_EQ(raw[y * 10], 0);  // filter: none
      for (int xx = 0; xx < 3; ++xx)
        for (int c = 0; c < 3; ++c)
          EXPECT_EQ(uint8_t(raw[y * 10 + 1 + xx * 3 + c]), (c * 6 + y * 3 + xx) * 10) << y << " " << xx << " " << c;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/adv_0.png.tmp"));
  EXPECT_THROW(attacks::write_pngs(dir, "bad_", Tensor::empty({1, 2, 2, 2}, DType::f32)), Error);  // 2 channels
  EXPECT_THROW(attacks::write_pngs(dir + "/no/such/dir", "adv_", x), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace driftlab
