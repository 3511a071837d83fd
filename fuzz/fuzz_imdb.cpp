// IMDb reader (engine/data/imdb.cpp): the bytes of one review file go through tokenize(), the
// only code that sees them (the rest of load_imdb walks folders and counts). On success: no
// empty word, no separator inside a word, at most one invalid byte counted per input byte,
// and pad_or_truncate gives exactly L ids for both sides.
#include "engine/data/imdb.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    const std::string text = fuzz_bytes(data, size);
    int64_t invalid = 0;
    const std::vector<std::string> words = tokenize(text, &invalid);
    fuzz_require(invalid >= 0 && static_cast<std::size_t>(invalid) <= size, "imdb: invalid bytes <= size");
    std::size_t letters = 0;
    for (const std::string& w : words) {
      fuzz_require(!w.empty(), "imdb: no empty word");
      for (unsigned char c : w) {
        fuzz_require(c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'',
                     "imdb: words hold lower-case letters, digits, apostrophes and UTF-8 only");
      }
      letters += w.size();
    }
    fuzz_require(letters + static_cast<std::size_t>(invalid) <= size, "imdb: every byte used once");
    std::vector<int32_t> ids(words.size());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    const int64_t len = 1 + static_cast<int64_t>(size % 17);
    for (SeqSide pad : {SeqSide::pre, SeqSide::post})
      for (SeqSide cut : {SeqSide::pre, SeqSide::post})
        fuzz_require(static_cast<int64_t>(pad_or_truncate(ids, len, pad, cut).size()) == len, "imdb: L ids");
  });
  return 0;
}
