// Internal to convert/keras_import.cpp: one Keras layer as the file gives it, and the reader of its
// config that accounts for every key (an unknown key, a regulariser or a constraint is refused
// naming the layer).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace driftlab {
namespace convert {
namespace detail {

using json = nlohmann::json;

// A JSON value in a message: invalid UTF-8 replaced, long values cut, never an exception.
inline std::string shown(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

// One Keras layer of the file: its class, name, config and the layers it reads.
struct KLayer {
  std::string cls, name;
  json cfg;
  std::vector<std::string> inputs;
};

// The config of one layer, every key accounted for.
class Cfg {
 public:
  Cfg(const KLayer& l, std::string where) : l_(l), where_(std::move(where)) {}
  bool has(const char* k) const { return l_.cfg.contains(k) && !l_.cfg.at(k).is_null(); }
  const json& at(const char* k) {
    read_.insert(k);
    return l_.cfg.at(k);
  }
  void mark(const char* k) { read_.insert(k); }
  std::string string(const char* k, const std::string& def) {
    read_.insert(k);
    if (!has(k)) return def;
    const json& v = l_.cfg.at(k);
    check(v.is_string(), where_, ": ", k, " is ", shown(v), ", not a string");
    return v.get<std::string>();
  }
  double number(const char* k, double def) {
    read_.insert(k);
    if (!has(k)) return def;
    const json& v = l_.cfg.at(k);
    check(v.is_number() && std::isfinite(v.get<double>()), where_, ": ", k, " is ", shown(v), ", not a number");
    return v.get<double>();
  }
  bool boolean(const char* k, bool def) {
    read_.insert(k);
    if (!has(k)) return def;
    const json& v = l_.cfg.at(k);
    check(v.is_boolean(), where_, ": ", k, " is ", shown(v), ", not true or false");
    return v.get<bool>();
  }
  int64_t integer(const char* k, int64_t def, int64_t lo, int64_t hi) {
    read_.insert(k);
    if (!has(k)) return def;
    const json& v = l_.cfg.at(k);
    check(v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi, where_, ": ", k, " is ",
          shown(v), ", not an integer in [", lo, ", ", hi, "]");
    return v.get<int64_t>();
  }
  // An int or a pair (Keras's kernel_size, strides, dilation_rate, pool_size).
  std::vector<int64_t> pair(const char* k, std::vector<int64_t> def) {
    read_.insert(k);
    if (!has(k)) return def;
    const json& v = l_.cfg.at(k);
    auto ok = [](const json& e) {
      return e.is_number_integer() && e.get<int64_t>() >= 1 && e.get<int64_t>() <= (int64_t{1} << 16);
    };
    if (ok(v)) return {v.get<int64_t>(), v.get<int64_t>()};
    check(v.is_array() && v.size() == 2 && ok(v[0]) && ok(v[1]), where_, ": ", k, " is ", shown(v),
          ", not an integer or two in [1, 65536]");
    return {v[0].get<int64_t>(), v[1].get<int64_t>()};
  }
  // Accounted for without effect: the name, trainable true, dtype float32, initialisers (the
  // file's weights or the Policy's init_* decide), regularisers and constraints left null.
  void common() {
    read_.insert("name");
    read_.insert("data_format");  // decided once per model
    check(boolean("trainable", true), where_, ": trainable false (a frozen layer): not implemented");
    if (has("dtype")) {
      const json& d = at("dtype");
      std::string name = d.is_string() ? d.get<std::string>() : "";
      if (d.is_object() && d.contains("config") && d.at("config").is_object() && d.at("config").contains("name") &&
          d.at("config").at("name").is_string())
        name = d.at("config").at("name").get<std::string>();
      check(name == "float32", where_, ": dtype ", shown(d), "; float32 layers only");
    }
    for (auto it = l_.cfg.begin(); it != l_.cfg.end(); ++it) {
      const std::string& key = it.key();
      auto ends = [&](const char* s) {
        const std::size_t n = std::strlen(s);
        return key.size() >= n && key.compare(key.size() - n, n, s) == 0;
      };
      if (ends("_initializer")) read_.insert(key);
      if (ends("_regularizer") || ends("_constraint")) {
        read_.insert(key);
        check(it.value().is_null(), where_, ": ", key, " ", shown(it.value()),
              " is not implemented (set regularisation through the Policy's weight decay)");
      }
    }
  }
  void done() const {
    for (auto it = l_.cfg.begin(); it != l_.cfg.end(); ++it)
      check(read_.count(it.key()), where_, ": unknown config key '", it.key(), "' (", shown(it.value()), ")");
  }

 private:
  const KLayer& l_;
  std::string where_;
  std::set<std::string> read_;
};

}  // namespace detail
}  // namespace convert
}  // namespace driftlab
