// convert-report's readers (driftlab/convert.h conversion_robustness): the convert.json files of
// convert folders and the attack's result.json each names. The input is split at NUL bytes: the
// last piece is the attack folder's result.json (DIR/attack), every piece before it the
// convert.json of a folder DIR/c<i> (at most 4); "@DIR@" in a piece becomes the folder the target
// writes into (so that a seed's "from" names the attack folder). What it accepts: a table with a
// row per (weights, conversion), a cell per attack, and R in [0, attacks] (each attack's share is
// min-max scaled to [0, 1]).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "driftlab/convert.h"
#include "fuzz/fuzz_common.h"

namespace {

std::string g_dir;

void put(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = (std::filesystem::temp_directory_path() / ("driftlab-fuzz-convert-report-" + std::to_string(::getpid())))
              .string();
  std::filesystem::create_directories(g_dir + "/attack");
  for (int i = 0; i < 4; ++i) std::filesystem::create_directories(g_dir + "/c" + std::to_string(i));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  if (size > 8192) return 0;  // a few small JSON files
  std::vector<std::string> pieces(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      if (pieces.size() == 5) break;
      pieces.emplace_back();
    } else {
      pieces.back().push_back(static_cast<char>(data[i]));
    }
  }
  for (std::string& p : pieces)
    for (std::size_t at; (at = p.find("@DIR@")) != std::string::npos;) p.replace(at, 5, g_dir);
  put(g_dir + "/attack/result.json", pieces.back());
  std::vector<std::string> dirs;
  for (std::size_t i = 0; i + 1 < pieces.size(); ++i) {
    dirs.push_back(g_dir + "/c" + std::to_string(i));
    put(dirs.back() + "/convert.json", pieces[i]);
  }
  fuzz_one([&] {
    const ConversionRobustness t = conversion_robustness(dirs);
    fuzz_require(!t.rows.empty() && !t.attacks.empty(), "convert-report: a table has rows and attacks");
    for (const ConversionRobustness::Row& r : t.rows) {
      fuzz_require(r.cells.size() == t.attacks.size(), "convert-report: a cell per attack");
      fuzz_require(r.R >= 0 && r.R <= static_cast<double>(t.attacks.size()) + 1e-9,
                   "convert-report: R within [0, attacks]");
    }
  });
  return 0;
}
