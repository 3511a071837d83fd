// IMDb reader (engine/data/imdb.h) on a small aclImdb-shaped corpus each test writes: counts,
// labels, the vocabulary order (ties by first occurrence), the id mapping, truncation and
// padding on both sides, the tokeniser rule, non-UTF-8 bytes, and errors naming the path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/data/imdb.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("driftlab_imdb_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// The corpus. Training reviews in reading order (pos by file name, then neg):
//   train/pos/0_9.txt   the movie wasn't bad it's great
//   train/pos/1_10.txt  great movie great acting          ("<br />" is a separator, not "br")
//   train/neg/5_1.txt   bad bad plot the end
// Counts: bad 3, great 3, the 2, movie 2, then wasn't, it's, acting, plot, end once each.
// First occurrences: the, movie, wasn't, bad, it's, great, acting, plot, end. So the ranks are
// bad (3, seen before great), great, the (2, seen before movie), movie, wasn't, it's, ...
// With V = 5: bad=2 great=3 the=4 movie=5 wasn't=6; it's, acting, plot, end are OOV (1).
fs::path write_corpus(const std::string& tag) {
  fs::path d = temp_dir(tag);
  write(d / "train/pos/1_10.txt", "Great movie! Great<br />acting.");
  write(d / "train/pos/0_9.txt", "The movie wasn't bad; it's GREAT");
  write(d / "train/neg/5_1.txt", "Bad, bad plot.<br /><br />The END");
  write(d / "train/neg/notes.md", "not a review: only *.txt files are read");
  write(d / "train/unsupBow.feat", "0:1 1:2");  // aclImdb has such files beside the folders
  // Test split: pos a.txt; neg b.txt (empty), c.txt (non-UTF-8 bytes).
  write(d / "test/pos/a.txt", "Great plot, the movie!");
  write(d / "test/neg/b.txt", "");
  // "café" (valid 2-byte UTF-8, only in the test split, so OOV), 0xFF, "bad", a stray
  // continuation byte 0x80, "movie", then a 3-byte sequence cut after 2 bytes (E2 82):
  // 4 invalid bytes, tokens café bad movie.
  write(d / "test/neg/c.txt", std::string("caf\xC3\xA9 \xFF" "bad\x80" "movie \xE2\x82"));
  return d;
}

std::vector<int> row(const Tensor& t, int64_t i) {
  std::vector<int> r;
  for (int64_t j = 0; j < t.dim(1); ++j) r.push_back(static_cast<int>(t.at(i * t.dim(1) + j)));
  return r;
}

TEST(Imdb, TokeniserRule) {
  // <br /> variants vanish, ASCII is lower-cased, apostrophes stay inside words, every other
  // ASCII punctuation and control byte separates, digits are word characters.
  EXPECT_EQ(tokenize("It's<BR/>a 10/10 <br>film,\r\nreally-good <b>!</b>"),
            (std::vector<std::string>{"it's", "a", "10", "10", "film", "really", "good", "b", "b"}));
  // Non-ASCII characters are kept inside words as they are (not lower-cased).
  EXPECT_EQ(tokenize("Caf\xC3\xA9 \xC3\x89T\xC3\x89 na\xC3\xAFve\xE2\x80\x94ok"),
            (std::vector<std::string>{"caf\xC3\xA9", "\xC3\x89t\xC3\x89", "na\xC3\xAFve\xE2\x80\x94ok"}));
  // Invalid bytes separate and are counted: overlong C0 AF, surrogate ED A0 80, F5, lone 80.
  int64_t bad = 0;
  EXPECT_EQ(tokenize("a\xC0\xAF" "b\xED\xA0\x80" "c\xF5" "d\x80" "e", &bad),
            (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(bad, 2 + 3 + 1 + 1);
  // 4-byte sequences (U+1F600) are word characters.
  EXPECT_EQ(tokenize("x\xF0\x9F\x98\x80y z"), (std::vector<std::string>{"x\xF0\x9F\x98\x80y", "z"}));
  EXPECT_TRUE(tokenize(" <br /> ... ").empty());
  // "<brown>" is not a line break: '<' and '>' separate, the word stays.
  EXPECT_EQ(tokenize("<brown>"), (std::vector<std::string>{"brown"}));
}

TEST(Imdb, PadOrTruncateBothSides) {
  const std::vector<int32_t> s{5, 6, 7, 8, 9};
  EXPECT_EQ(pad_or_truncate(s, 3, SeqSide::pre, SeqSide::pre), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(pad_or_truncate(s, 3, SeqSide::pre, SeqSide::post), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(pad_or_truncate(s, 7, SeqSide::pre, SeqSide::pre), (std::vector<int32_t>{0, 0, 5, 6, 7, 8, 9}));
  EXPECT_EQ(pad_or_truncate(s, 7, SeqSide::post, SeqSide::pre), (std::vector<int32_t>{5, 6, 7, 8, 9, 0, 0}));
  EXPECT_EQ(pad_or_truncate(s, 5, SeqSide::post, SeqSide::post), s);
  EXPECT_EQ(pad_or_truncate({}, 2, SeqSide::post, SeqSide::post), (std::vector<int32_t>{0, 0}));
  EXPECT_NE(error_of([&] { pad_or_truncate(s, 0, SeqSide::pre, SeqSide::pre); }).find("len=0"), std::string::npos);
}

TEST(Imdb, CountsLabelsVocabularyAndIds) {
  fs::path d = write_corpus("vocab");
  ImdbOptions o;
  o.vocab_size = 5;
  o.max_len = 6;
  ImdbData data = load_imdb(d.string(), o);
  EXPECT_EQ(data.train.name, "imdb/train");
  EXPECT_EQ(data.test.name, "imdb/test");
  EXPECT_EQ(data.train.num_classes, 2);
  ASSERT_EQ(data.train.images.shape(), (Shape{3, 6}));
  ASSERT_EQ(data.test.images.shape(), (Shape{3, 6}));
  EXPECT_EQ(data.train.labels, (std::vector<int32_t>{1, 1, 0}));  // pos 0_9, pos 1_10, neg 5_1
  EXPECT_EQ(data.test.labels, (std::vector<int32_t>{1, 0, 0}));
  EXPECT_EQ(data.vocab.words, (std::vector<std::string>{"bad", "great", "the", "movie", "wasn't"}));
  EXPECT_EQ(data.vocab.counts, (std::vector<int64_t>{3, 3, 2, 2, 1}));
  EXPECT_EQ(data.vocab.num_ids(), 7);
  EXPECT_EQ(data.vocab.id("bad"), 2);
  EXPECT_EQ(data.vocab.id("wasn't"), 6);
  EXPECT_EQ(data.vocab.id("it's"), kOovId);   // count 1, rank 6 > V
  EXPECT_EQ(data.vocab.id("caf\xC3\xA9"), kOovId);  // test-only word
  EXPECT_EQ(data.vocab.id("br"), kOovId);     // line breaks never become words
  // the movie wasn't bad it's great (6 tokens: fits exactly).
  EXPECT_EQ(row(data.train.images, 0), (std::vector<int>{4, 5, 6, 2, 1, 3}));
  // great movie great acting, padded before.
  EXPECT_EQ(row(data.train.images, 1), (std::vector<int>{0, 0, 3, 5, 3, 1}));
  EXPECT_EQ(row(data.train.images, 2), (std::vector<int>{0, 2, 2, 1, 4, 1}));
  EXPECT_EQ(row(data.test.images, 0), (std::vector<int>{0, 0, 3, 1, 4, 5}));
  EXPECT_EQ(row(data.test.images, 1), (std::vector<int>{0, 0, 0, 0, 0, 0}));  // empty review
  EXPECT_EQ(row(data.test.images, 2), (std::vector<int>{0, 0, 0, 1, 2, 5}));  // café bad movie
  EXPECT_EQ(data.train_lengths, (std::vector<int64_t>{6, 4, 5}));
  EXPECT_EQ(data.test_lengths, (std::vector<int64_t>{4, 0, 3}));
  EXPECT_EQ(data.stats.reviews, 6);
  EXPECT_EQ(data.stats.tokens, 6 + 4 + 5 + 4 + 0 + 3);
  EXPECT_EQ(data.stats.oov_tokens, 4 + 1 + 1);  // it's acting plot end | plot | café
  EXPECT_EQ(data.stats.invalid_utf8_bytes, 4);
  EXPECT_EQ(data.stats.distinct_train_words, 9);
  EXPECT_EQ(data.stats.truncated_reviews, 0);
  fs::remove_all(d);
}

TEST(Imdb, VocabularyLargerThanTheCorpusKeepsEveryWord) {
  fs::path d = write_corpus("bigv");
  ImdbOptions o;
  o.vocab_size = 100;
  o.max_len = 4;
  ImdbData data = load_imdb(d.string(), o);
  EXPECT_EQ(data.vocab.words,
            (std::vector<std::string>{"bad", "great", "the", "movie", "wasn't", "it's", "acting", "plot", "end"}));
  EXPECT_EQ(data.vocab.num_ids(), 11);
  fs::remove_all(d);
}

TEST(Imdb, TruncationAndPaddingBothSides) {
  fs::path d = write_corpus("sides");
  ImdbOptions o;
  o.vocab_size = 5;
  o.max_len = 4;
  // Ids of the reviews (see write_corpus): train 0: 4 5 6 2 1 3, train 2: 2 2 1 4 1, test 2: 1 2 5.
  o.pad = SeqSide::pre;
  o.truncate = SeqSide::pre;
  ImdbData a = load_imdb(d.string(), o);
  EXPECT_EQ(row(a.train.images, 0), (std::vector<int>{6, 2, 1, 3}));  // keeps the last 4
  EXPECT_EQ(row(a.train.images, 2), (std::vector<int>{2, 1, 4, 1}));
  EXPECT_EQ(row(a.test.images, 2), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(a.stats.truncated_reviews, 2);
  EXPECT_EQ(a.train_lengths, (std::vector<int64_t>{4, 4, 4}));
  o.pad = SeqSide::post;
  o.truncate = SeqSide::post;
  ImdbData b = load_imdb(d.string(), o);
  EXPECT_EQ(row(b.train.images, 0), (std::vector<int>{4, 5, 6, 2}));  // keeps the first 4
  EXPECT_EQ(row(b.train.images, 1), (std::vector<int>{3, 5, 3, 1}));  // exactly 4: untouched
  EXPECT_EQ(row(b.train.images, 2), (std::vector<int>{2, 2, 1, 4}));
  EXPECT_EQ(row(b.test.images, 2), (std::vector<int>{1, 2, 5, 0}));
  EXPECT_EQ(row(b.test.images, 1), (std::vector<int>{0, 0, 0, 0}));
  // The vocabulary does not depend on L or the sides.
  EXPECT_EQ(a.vocab.words, b.vocab.words);
  fs::remove_all(d);
}

TEST(Imdb, MissingAndUnreadableFoldersNameThePath) {
  fs::path d = write_corpus("errors");
  ImdbOptions o;
  std::string e = error_of([&] { load_imdb((d / "nope").string(), o); });
  EXPECT_NE(e.find((d / "nope").string() + " does not exist"), std::string::npos) << e;

  fs::remove_all(d / "test/neg");
  e = error_of([&] { load_imdb(d.string(), o); });
  EXPECT_NE(e.find((d / "test/neg").string() + " does not exist"), std::string::npos) << e;

  fs::create_directories(d / "test/neg");  // present but without reviews
  e = error_of([&] { load_imdb(d.string(), o); });
  EXPECT_NE(e.find((d / "test/neg").string() + " has no .txt review files"), std::string::npos) << e;

  write(d / "test/neg/b.txt", "fine");
  fs::create_directories(d / "train/neg/9_2.txt");  // a folder where a review should be
  e = error_of([&] { load_imdb(d.string(), o); });
  EXPECT_NE(e.find((d / "train/neg/9_2.txt").string() + " is not a regular file"), std::string::npos) << e;
  fs::remove_all(d / "train/neg/9_2.txt");

  fs::remove_all(d / "train/pos");
  write(d / "train/pos", "a file, not a folder");
  e = error_of([&] { load_imdb(d.string(), o); });
  EXPECT_NE(e.find((d / "train/pos").string() + " is not a directory"), std::string::npos) << e;

  fs::remove_all(d / "test");
  e = error_of([&] { load_imdb(d.string(), o); });
  EXPECT_NE(e.find("train/pos"), std::string::npos) << "train is read first: " << e;

  // Permission bits do not stop root, so this part runs only for other users.
  if (::geteuid() != 0) {
    fs::remove_all(d);
    d = write_corpus("perm");
    ::chmod((d / "train/neg/5_1.txt").c_str(), 0);
    e = error_of([&] { load_imdb(d.string(), o); });
    EXPECT_NE(e.find((d / "train/neg/5_1.txt").string()), std::string::npos) << e;
    ::chmod((d / "train/neg").c_str(), 0);
    e = error_of([&] { load_imdb(d.string(), o); });
    EXPECT_NE(e.find("cannot list " + (d / "train/neg").string()), std::string::npos) << e;
    ::chmod((d / "train/neg").c_str(), 0755);
  }
  fs::remove_all(d);
}

TEST(Imdb, BadOptionsAreRefused) {
  fs::path d = write_corpus("opts");
  ImdbOptions o;
  o.vocab_size = 0;
  EXPECT_NE(error_of([&] { load_imdb(d.string(), o); }).find("vocab_size=0"), std::string::npos);
  o.vocab_size = int64_t{1} << 24;
  EXPECT_NE(error_of([&] { load_imdb(d.string(), o); }).find("float32"), std::string::npos);
  o.vocab_size = 10;
  o.max_len = 0;
  EXPECT_NE(error_of([&] { load_imdb(d.string(), o); }).find("max_len=0"), std::string::npos);
  EXPECT_EQ(parse_seq_side("post"), SeqSide::post);
  EXPECT_NE(error_of([] { parse_seq_side("middle"); }).find("'middle'"), std::string::npos);
  fs::remove_all(d);
}

}  // namespace
