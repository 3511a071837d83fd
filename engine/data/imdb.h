// IMDb movie reviews (Maas et al. 2011) in the standard aclImdb folder layout:
//   DIR/train/pos/*.txt  DIR/train/neg/*.txt  DIR/test/pos/*.txt  DIR/test/neg/*.txt
// one review per file, label 1 = pos, 0 = neg. Anything else in DIR (train/unsup, *.feat,
// urls_*.txt, imdb.vocab) is not read. Within a split the samples are the pos files, then the
// neg files, each folder in byte-wise order of the file names (a fixed, documented order:
// shuffling is the trainer's job).
//
// Tokenisation (tokenize() below), an approximation of Keras' Tokenizer with its default
// filters '!"#$%&()*+,-./:;<=>?@[\]^_`{|}~\t\n' (text_to_word_sequence):
//   1) the HTML line breaks of the corpus, `<br />`, `<br/>` and `<br>` in any case, become a
//      space (Keras keeps them and so makes a word "br" out of every line break);
//   2) ASCII letters are lower-cased; other characters are left as they are (Python's
//      str.lower() in Keras also lower-cases non-ASCII letters such as 'É');
//   3) a word is a maximal run of ASCII letters, digits, apostrophes and non-ASCII characters
//      (well-formed UTF-8 sequences of 2..4 bytes); every other ASCII byte separates words.
//      For printable ASCII this is exactly Keras' rule: its filters are all the ASCII
//      punctuation except the apostrophe. Keras splits only on ' ' after filtering, so it
//      would keep control characters such as '\r' inside words; here they separate.
//   4) bytes that are not part of well-formed UTF-8 (stray continuation bytes, 0xC0/0xC1,
//      0xF5..0xFF, truncated or overlong sequences, surrogates) separate words too and are
//      counted in ImdbStats::invalid_utf8_bytes, never an error and never part of a word.
//
// Vocabulary: the V = vocab_size most frequent words of the TRAINING reviews (the test split
// never influences it). Ties in count are broken by first occurrence in the training reviews
// read in the order above — what Keras' Tokenizer.fit_on_texts does on the same texts in the
// same order (a stable sort by count of an insertion-ordered dict).
//
// Ids: 0 = padding, 1 = out-of-vocabulary, 2 + r = the word of frequency rank r (r = 0 is the
// most frequent), so ids run 0..V+1 and an embedding needs num_ids() = V+2 rows. This differs
// from keras.datasets.imdb.load_data(num_words=V), which reserves 0 = padding, 1 = start
// marker, 2 = oov and index_from=3, keeps only ids < V (so V-3 words) and prepends the start
// marker to every review; here there is no start marker, and V counts words, not ids.
//
// Fixed length L (Keras pad_sequences(maxlen=L, padding, truncating), both 'pre' by default):
// truncate 'pre' drops the first tokens (keeps the last L), 'post' the last ones; pad 'pre'
// puts the padding id 0 before the review, 'post' after it. An empty review is L zeros.
//
// Errors name the path: a missing or non-directory DIR, split or class folder, a folder
// without .txt files, a file that cannot be opened or read.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/data/dataset.h"

namespace driftlab {

enum class SeqSide { pre, post };  // Keras pad_sequences 'pre' / 'post'

struct ImdbOptions {
  int64_t vocab_size = 20000;        // V: words kept, ids 2..V+1
  int64_t max_len = 200;             // L: tokens per review after truncation/padding
  SeqSide pad = SeqSide::pre;        // where padding goes (Keras default 'pre')
  SeqSide truncate = SeqSide::pre;   // which end is cut (Keras default 'pre')
};

inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kOovId = 1;
inline constexpr int32_t kFirstWordId = 2;

struct Vocabulary {
  std::vector<std::string> words;   // words[r] has id kFirstWordId + r, r = frequency rank
  std::vector<int64_t> counts;      // training-set count of words[r]
  std::unordered_map<std::string, int32_t> ids;

  int32_t id(const std::string& word) const;  // kOovId when not in the vocabulary
  int64_t num_ids() const { return kFirstWordId + static_cast<int64_t>(words.size()); }
};

struct ImdbStats {
  int64_t reviews = 0;             // files read (train + test)
  int64_t tokens = 0;              // tokens before truncation
  int64_t oov_tokens = 0;          // of them, mapped to kOovId
  int64_t truncated_reviews = 0;   // reviews longer than L
  int64_t invalid_utf8_bytes = 0;  // bytes treated as separators (see the header comment)
  int64_t distinct_train_words = 0;
};

struct ImdbData {
  // images holds the ids as float32 [N, L] (exact: ids < 2^24 are checked), labels 0/1,
  // num_classes 2, name "imdb/train" / "imdb/test".
  Dataset train, test;
  std::vector<int64_t> train_lengths, test_lengths;  // real tokens per row, min(length, L)
  Vocabulary vocab;
  ImdbStats stats;
};

// Splits one review into words by the rule above; *invalid_bytes (if given) is increased by
// the number of bytes that were not well-formed UTF-8.
std::vector<std::string> tokenize(const std::string& text, int64_t* invalid_bytes = nullptr);

// Keras pad_sequences for one sequence: exactly `len` ids.
std::vector<int32_t> pad_or_truncate(const std::vector<int32_t>& ids, int64_t len, SeqSide pad, SeqSide truncate);

// Reads DIR/{train,test}/{pos,neg}/*.txt, builds the vocabulary on train, maps both splits.
ImdbData load_imdb(const std::string& dir, const ImdbOptions& options);

const char* seq_side_name(SeqSide s);
SeqSide parse_seq_side(const std::string& s);  // "pre" | "post", throws otherwise

}  // namespace driftlab
