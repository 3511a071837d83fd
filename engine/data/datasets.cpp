#include "engine/data/datasets.h"

#include <cstring>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "engine/data/cifar.h"
#include "engine/data/idx.h"

namespace driftlab {

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = {"fashion-mnist", "mnist",   "seq-fashion-mnist", "seq-mnist",
                                                 "cifar10",       "synthetic-cifar10", "imdb"};
  return names;
}

ImdbOptions imdb_options(const DataSpec& spec, const nlohmann::json* model_meta) {
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& m = model_meta && model_meta->contains("imdb") ? model_meta->at("imdb") : none;
  ImdbOptions r;
  r.vocab_size = spec.vocab_size > 0 ? spec.vocab_size : m.value("vocab_size", int64_t{20000});
  r.max_len = spec.max_len > 0 ? spec.max_len : m.value("max_len", int64_t{80});
  r.pad = parse_seq_side(!spec.seq_pad.empty() ? spec.seq_pad : m.value("pad", std::string("pre")));
  r.truncate =
      parse_seq_side(!spec.seq_truncate.empty() ? spec.seq_truncate : m.value("truncate", std::string("pre")));
  return r;
}

nlohmann::json imdb_json(const ImdbOptions& o) {
  return {{"vocab_size", o.vocab_size}, {"max_len", o.max_len}, {"pad", seq_side_name(o.pad)},
          {"truncate", seq_side_name(o.truncate)}};
}

Dataset take_first(Dataset d, int64_t n) {
  if (n <= 0 || n >= d.images.dim(0)) return d;
  Shape s = d.images.shape();
  s[0] = n;
  Tensor t(s, d.images.dtype());
  std::memcpy(t.raw(), d.images.raw(), t.nbytes());  // samples are rows of the row-major tensor
  d.images = t;
  d.labels.resize(static_cast<std::size_t>(n));
  return d;
}

std::string imdb_summary(const std::string& dir, const ImdbOptions& o, const ImdbData& d) {
  const ImdbStats& s = d.stats;
  std::ostringstream line;
  line << "imdb: " << s.reviews << " reviews from " << dir << ", vocabulary " << d.vocab.words.size()
       << " words (of " << s.distinct_train_words << " in train), " << s.tokens << " tokens, " << std::fixed
       << std::setprecision(2)
       << (s.tokens ? 100.0 * static_cast<double>(s.oov_tokens) / static_cast<double>(s.tokens) : 0.0)
       << "% out of vocabulary, " << s.truncated_reviews << " reviews cut to " << o.max_len << " tokens ("
       << seq_side_name(o.truncate) << "), padding " << seq_side_name(o.pad);
  return line.str();
}

DatasetLoader::DatasetLoader(ImdbReadHook on_imdb_read) : on_imdb_read_(std::move(on_imdb_read)) {}

const ImdbData& DatasetLoader::imdb(const std::string& dir, const ImdbOptions& o) {
  const std::string key = dir + "\n" + imdb_json(o).dump();
  if (!imdb_ || imdb_key_ != key) {
    imdb_ = std::make_unique<ImdbData>(load_imdb(dir, o));
    imdb_key_ = key;
    if (on_imdb_read_) on_imdb_read_(dir, o, *imdb_);
  }
  return *imdb_;
}

Dataset DatasetLoader::load(const DataSpec& spec, Split split, const nlohmann::json* model_meta) {
  const bool train = split == Split::train;
  std::string dir = spec.data_dir;
  if (spec.dataset == "imdb") {
    check(!dir.empty(),
          "data: --dataset imdb needs --data-dir DIR (the aclImdb folder: train/ and test/, pos/ and neg/)");
    const ImdbData& d = imdb(dir, imdb_options(spec, model_meta));
    return take_first(train ? d.train : d.test, spec.limit);
  }
  if (spec.dataset == "synthetic-cifar10") {  // the limit is the size: nothing to cut from
    const int64_t n = spec.limit > 0 ? spec.limit : (train ? 50000 : 10000);  // CIFAR-10's split sizes
    Dataset d = synthetic_cifar10(n, train ? 1 : 2);  // different seeds: the splits share no image
    d.name = std::string("synthetic-cifar10") + (train ? "/train" : "/test");
    return d;
  }
  if (spec.dataset == "cifar10") {
    check(!dir.empty(), "data: --dataset cifar10 needs --data-dir DIR with data_batch_1..5.bin and test_batch.bin");
    return take_first(load_cifar10(dir, train), spec.limit);
  }
  // seq-*: the same IDX images (N,1,28,28) read as (N,28,28): 28 steps (rows) of 28 features.
  const bool seq = spec.dataset.rfind("seq-", 0) == 0;
  const std::string base = seq ? spec.dataset.substr(4) : spec.dataset;
  if (base == "fashion-mnist") {
    if (dir.empty()) dir = kDefaultFashionMnistDir;
  } else if (base == "mnist") {
    check(!dir.empty(), "data: --dataset ", spec.dataset, " needs --data-dir DIR with the MNIST IDX files");
  } else {
    std::string known;
    for (const auto& n : dataset_names()) known += (known.empty() ? "" : ", ") + n;
    fail("data: unknown dataset '", spec.dataset, "' (known: ", known, ")");
  }
  Dataset d = load_mnist_like(dir, train, spec.dataset + (train ? "/train" : "/test"), spec.limit);
  if (seq) d.images = d.images.reshape({d.images.dim(0), d.images.dim(2), d.images.dim(3)});
  return d;
}

}  // namespace driftlab
