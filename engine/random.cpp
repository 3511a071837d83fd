#include "engine/random.h"

#include <cstring>
#include <sstream>

#include "core/error.h"
#include "engine/policy.h"

namespace driftlab {

namespace {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;
constexpr int64_t kMrgM1 = 2147483647;  // 2^31 - 1
constexpr int64_t kMrgM2 = 2147462579;  // 2^31 - 21069

// The rng_engine knob's value names, which a saved state opens with.
const char* rng_engine_name(RngEngine e) {
  switch (e) {
    case RngEngine::mt19937_u24: return "mt19937_u24";
    case RngEngine::philox_u23: return "philox_u23";
    case RngEngine::mrg31k3p: return "mrg31k3p";
  }
  return "?";
}
}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kPhiloxW0;
    k[1] += kPhiloxW1;
  }
  return c;
}

Rng::Rng(RngEngine engine, uint64_t seed) : engine_(engine) {
  switch (engine) {
    case RngEngine::mt19937_u24:
      // PyTorch's CPU generator: init_genrand(seed & 0xffffffff).
      mt_.seed(static_cast<uint32_t>(seed & 0xffffffffu));
      break;
    case RngEngine::philox_u23:
      key_ = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
      break;
    case RngEngine::mrg31k3p: {
      // Theano MRG_RandomStreams(seed): all six state words set to the seed, which Theano
      // requires to be in (0, M2); seeds outside that range (Theano refuses them) are mapped in.
      int64_t s = seed > 0 && seed < static_cast<uint64_t>(kMrgM2)
                      ? static_cast<int64_t>(seed)
                      : static_cast<int64_t>(seed % static_cast<uint64_t>(kMrgM2 - 1)) + 1;
      x1_ = {s, s, s};
      x2_ = {s, s, s};
      break;
    }
  }
}

uint32_t Rng::next_u32() {
  switch (engine_) {
    case RngEngine::mt19937_u24:
      return static_cast<uint32_t>(mt_());
    case RngEngine::philox_u23:
      if (buf_pos_ == 4) {
        buf_ = philox4x32_10(ctr_, key_);
        buf_pos_ = 0;
        for (auto& w : ctr_)  // 128-bit increment
          if (++w != 0) break;
      }
      return buf_[buf_pos_++];
    case RngEngine::mrg31k3p: {
      // Component 1: x_n = (2^22 x_{n-2} + (2^7+1) x_{n-3}) mod m1
      int64_t y1 = ((int64_t{1} << 22) * x1_[1] + 129 * x1_[0]) % kMrgM1;
      x1_ = {x1_[1], x1_[2], y1};
      // Component 2: x_n = (2^15 x_{n-1} + (2^15+1) x_{n-3}) mod m2
      int64_t y2 = ((int64_t{1} << 15) * x2_[2] + 32769 * x2_[0]) % kMrgM2;
      x2_ = {x2_[1], x2_[2], y2};
      int64_t z = y1 <= y2 ? y1 - y2 + kMrgM1 : y1 - y2;
      return static_cast<uint32_t>(z);
    }
  }
  return 0;
}

float Rng::uniform_f32() {
  uint32_t r = next_u32();
  switch (engine_) {
    case RngEngine::mt19937_u24:
      return static_cast<float>(r & 0xFFFFFFu) * (1.0f / 16777216.0f);
    case RngEngine::philox_u23: {
      uint32_t bits = 0x3F800000u | (r & 0x7FFFFFu);
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f - 1.0f;
    }
    case RngEngine::mrg31k3p:
      return static_cast<float>(r) * 4.6566126e-10f;
  }
  return 0.0f;
}

double Rng::uniform_f64() {
  if (engine_ == RngEngine::mrg31k3p) return static_cast<double>(next_u32()) * (1.0 / 2147483648.0);
  uint64_t hi = next_u32(), lo = next_u32();
  uint64_t r = ((hi << 32) | lo) & ((uint64_t{1} << 53) - 1);
  return static_cast<double>(r) * (1.0 / 9007199254740992.0);
}

std::vector<int64_t> permutation(int64_t n, ShuffleAlgo algo, std::mt19937& mt) {
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  check(n < (int64_t{1} << 32), "shuffle: ", n, " items exceed the 32-bit draws of the shuffle algorithms");
  switch (algo) {
    case ShuffleAlgo::none:
      break;
    case ShuffleAlgo::forward_modulo:
      for (int64_t i = 0; i + 1 < n; ++i) {
        int64_t z = static_cast<int64_t>(static_cast<uint32_t>(mt()) % static_cast<uint64_t>(n - i));
        std::swap(idx[i], idx[i + z]);
      }
      break;
    case ShuffleAlgo::backward_rejection:
      for (int64_t i = n - 1; i >= 1; --i) {
        uint32_t max = static_cast<uint32_t>(i), mask = max;
        mask |= mask >> 1;
        mask |= mask >> 2;
        mask |= mask >> 4;
        mask |= mask >> 8;
        mask |= mask >> 16;
        uint32_t j;
        do {
          j = static_cast<uint32_t>(mt()) & mask;
        } while (j > max);
        std::swap(idx[i], idx[j]);
      }
      break;
  }
  return idx;
}

std::string mt19937_text(const std::mt19937& mt) {
  std::ostringstream os;
  os << mt;
  return os.str();
}

void mt19937_from_text(std::mt19937& mt, const std::string& text, const std::string& what) {
  std::istringstream is(text);
  std::mt19937 r;
  is >> r;
  check(!is.fail(), what, ": not an MT19937 state (624 words and a position)");
  is >> std::ws;
  check(is.eof(), what, ": text after the MT19937 state");
  mt = r;
}

std::string Rng::state() const {
  std::ostringstream os;
  os << rng_engine_name(engine_);
  switch (engine_) {
    case RngEngine::mt19937_u24:
      os << " " << mt_;
      break;
    case RngEngine::philox_u23:
      for (uint32_t w : ctr_) os << " " << w;
      for (uint32_t w : buf_) os << " " << w;
      for (uint32_t w : key_) os << " " << w;
      os << " " << buf_pos_;
      break;
    case RngEngine::mrg31k3p:
      for (int64_t w : x1_) os << " " << w;
      for (int64_t w : x2_) os << " " << w;
      break;
  }
  return os.str();
}

void Rng::set_state(const std::string& text) {
  std::istringstream is(text);
  std::string name;
  is >> name;
  check(name == rng_engine_name(engine_), "rng state: engine '", name, "', this stream is ",
        rng_engine_name(engine_));
  Rng r = *this;
  switch (engine_) {
    case RngEngine::mt19937_u24:
      is >> r.mt_;
      break;
    case RngEngine::philox_u23:
      for (uint32_t& w : r.ctr_) is >> w;
      for (uint32_t& w : r.buf_) is >> w;
      for (uint32_t& w : r.key_) is >> w;
      is >> r.buf_pos_;
      check(is.fail() || (r.buf_pos_ >= 0 && r.buf_pos_ <= 4), "rng state: philox buffer position ", r.buf_pos_,
            " is outside 0..4");
      break;
    case RngEngine::mrg31k3p:
      for (int64_t& w : r.x1_) is >> w;
      for (int64_t& w : r.x2_) is >> w;
      for (int64_t w : r.x1_) check(is.fail() || (w >= 0 && w < kMrgM1), "rng state: mrg31k3p word ", w, " is outside [0, m1)");
      for (int64_t w : r.x2_) check(is.fail() || (w >= 0 && w < kMrgM2), "rng state: mrg31k3p word ", w, " is outside [0, m2)");
      break;
  }
  check(!is.fail(), "rng state: the ", name, " words are incomplete or not numbers");
  is >> std::ws;
  check(is.eof(), "rng state: text after the ", name, " state");
  *this = r;
}

uint64_t fnv1a64(const void* data, std::size_t n, uint64_t h) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;  // FNV 64 prime
  }
  return h;
}

uint64_t order_hash(const std::vector<int64_t>& order) {
  uint64_t h = kFnv1a64Basis;
  for (int64_t v : order) {
    unsigned char le[8];  // little-endian whatever the host's order
    for (int b = 0; b < 8; ++b) le[b] = static_cast<unsigned char>((static_cast<uint64_t>(v) >> (8 * b)) & 0xffu);
    h = fnv1a64(le, 8, h);
  }
  return h;
}

namespace {

// The ziggurat's tables (zigset of the paper): kn the fast-path thresholds in units of 2^-31,
// wn the layer widths over 2^31, fn the density at each layer's edge.
struct ZigTables {
  uint32_t kn[128];
  double wn[128], fn[128];
  ZigTables() {
    const double m1 = 2147483648.0, vn = 9.91256303526217e-3;
    double dn = 3.442619855899, tn = dn;
    const double q = vn / std::exp(-0.5 * dn * dn);
    kn[0] = static_cast<uint32_t>((dn / q) * m1);
    kn[1] = 0;
    wn[0] = q / m1;
    wn[127] = dn / m1;
    fn[0] = 1.0;
    fn[127] = std::exp(-0.5 * dn * dn);
    for (int i = 126; i >= 1; --i) {
      dn = std::sqrt(-2.0 * std::log(vn / dn + std::exp(-0.5 * dn * dn)));
      kn[i + 1] = static_cast<uint32_t>((dn / tn) * m1);
      tn = dn;
      fn[i] = std::exp(-0.5 * dn * dn);
      wn[i] = dn / m1;
    }
  }
};

const ZigTables& zig_tables() {
  static const ZigTables t;
  return t;
}

uint32_t abs32(int32_t v) { return v < 0 ? 0u - static_cast<uint32_t>(v) : static_cast<uint32_t>(v); }

}  // namespace

double ZigguratNormal::unit_open() { return 1.0 - rng_.uniform_f64(); }

double ZigguratNormal::next() {
  const ZigTables& t = zig_tables();
  const int32_t hz = static_cast<int32_t>(rng_.next_u32());
  const uint32_t iz = rng_.next_u32() & 127u;
  if (abs32(hz) < t.kn[iz]) return hz * t.wn[iz];  // inside the layer's rectangle: most draws
  return tail_or_wedge(hz, iz);
}

double ZigguratNormal::tail_or_wedge(int32_t hz, uint32_t iz) {
  const ZigTables& t = zig_tables();
  constexpr double r = 3.442619855899;
  for (;;) {
    const double x = hz * t.wn[iz];
    if (iz == 0) {  // the base layer's tail beyond r (Marsaglia's 1964 method)
      double xt, y;
      do {
        xt = -std::log(unit_open()) / r;
        y = -std::log(unit_open());
      } while (y + y < xt * xt);
      return hz > 0 ? r + xt : -r - xt;
    }
    if (t.fn[iz] + unit_open() * (t.fn[iz - 1] - t.fn[iz]) < std::exp(-0.5 * x * x)) return x;  // the wedge
    hz = static_cast<int32_t>(rng_.next_u32());
    iz = rng_.next_u32() & 127u;
    if (abs32(hz) < t.kn[iz]) return hz * t.wn[iz];
  }
}

}  // namespace driftlab
