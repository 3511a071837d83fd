// Datasets by name: the one place that turns a dataset name and its options (what the
// command's --dataset/--data-dir/--limit/--vocab-size/... set, what a study's config or a
// model file's metadata records) into a loaded split, so every command and the study runner
// read data the same way.
//
// Names: fashion-mnist, mnist (IDX files, images [N,1,28,28]), seq-fashion-mnist, seq-mnist
// (the same images as [N,28,28]: 28 steps of 28 features, for lstm/gru), cifar10 (the binary
// version), synthetic-cifar10 (random pixels and labels: timing, never accuracy), imdb
// (aclImdb folders, token ids [N,L], for lstm-imdb/gru-imdb).
//
// IMDb is read once for both splits (the vocabulary is the training split's): a DatasetLoader
// keeps the last corpus it read, so the caller that owns the loader decides how long the
// corpus lives and whether a summary line is shown (the loader itself prints nothing).
//
// To add a dataset: 1) write its reader in engine/data/<name>.h/.cpp; 2) add its name to
// dataset_names() and a branch to DatasetLoader::load in datasets.cpp; 3) add a case to
// tests/test_datasets.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/data/dataset.h"
#include "engine/data/imdb.h"

namespace driftlab {

struct DataSpec {
  std::string dataset = "fashion-mnist";  // one of dataset_names()
  std::string data_dir;  // "": the default folder for fashion-mnist; required for the others
  int64_t limit = 0;     // use only the first N samples of each split (0: all)
  // imdb: 0 / "" = the model file's metadata "imdb" when one is given, else Keras's
  // examples/imdb_lstm.py and pad_sequences defaults: 20,000 words, 80 tokens, pre, pre.
  int64_t vocab_size = 0, max_len = 0;
  std::string seq_pad, seq_truncate;  // "pre" | "post"
};

enum class Split { train, test };

// The names DatasetLoader::load knows, in the order error messages list them.
const std::vector<std::string>& dataset_names();

// The IMDb reader's options: what spec sets, else model_meta's "imdb" object (a model file's
// metadata; may be null), else the Keras defaults above.
ImdbOptions imdb_options(const DataSpec& spec, const nlohmann::json* model_meta);
// The options as a model file's metadata "imdb" records them (what imdb_options reads back).
nlohmann::json imdb_json(const ImdbOptions& o);

// The first n samples of d (all of them when n <= 0 or n >= N).
Dataset take_first(Dataset d, int64_t n);

// One line (no newline) on a corpus read: reviews, vocabulary, tokens, out-of-vocabulary
// share, reviews cut and the padding side. For the loader's owner to show.
std::string imdb_summary(const std::string& dir, const ImdbOptions& o, const ImdbData& d);

class DatasetLoader {
 public:
  // Called after each IMDb corpus read (not on a cache hit), e.g. to print imdb_summary.
  using ImdbReadHook = std::function<void(const std::string& dir, const ImdbOptions& o, const ImdbData& d)>;

  explicit DatasetLoader(ImdbReadHook on_imdb_read = nullptr);

  // One split of spec.dataset, cut to spec.limit. model_meta: a loaded model file's metadata,
  // for the IMDb options the model was trained with (see imdb_options); may be null.
  // Throws naming the dataset, the folder or the file (see the readers' headers).
  Dataset load(const DataSpec& spec, Split split, const nlohmann::json* model_meta = nullptr);

 private:
  // The corpus of dir under o: the kept one when dir and o are those of the last read.
  const ImdbData& imdb(const std::string& dir, const ImdbOptions& o);

  ImdbReadHook on_imdb_read_;
  std::string imdb_key_;             // dir and options of imdb_
  std::unique_ptr<ImdbData> imdb_;   // the last corpus read; null before the first
};

}  // namespace driftlab
