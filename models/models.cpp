#include "models/models.h"

#include "models/graph.h"

#include "engine/random.h"

namespace driftlab {

namespace {
using Builder = void (*)(Model&, Rng&);
struct Entry {
  ModelInfo info;
  Builder build;
};
const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {{"lenet1", "LeNet-1: conv 4@5x5, relu, maxpool 2, conv 12@5x5, relu, maxpool 2, dense 10", {1, 28, 28}, 10},
       build_lenet1},
      {{"lenet5", "LeNet-5: conv 6@5x5, pool, conv 16@5x5, pool, dense 120, 84, 10 (relu)", {1, 28, 28}, 10},
       build_lenet5},
      {{"resnet20", "ResNet-20, CIFAR variant: 3x3 stages of basic blocks 16/32/64, option A shortcuts, BN",
        {3, 32, 32}, 10},
       build_resnet20},
      {{"resnet20b", "ResNet-20 with option B shortcuts (1x1 conv + BN where the shape changes)", {3, 32, 32}, 10},
       build_resnet20b},
      {{"resnet18", "ResNet-18, CIFAR variant: 3x3 stem, 4 stages of 2 basic blocks 64..512, option B",
        {3, 32, 32}, 10},
       build_resnet18},
      {{"vgg16", "VGG-16 on 32x32: 13 conv 3x3 (64..512), 5 max-pools, dense 4096-4096-10", {3, 32, 32}, 10},
       build_vgg16},
      {{"lstm", "LSTM classifier: 28 steps of 28 features, LSTM 128 units (last step), dense 10", {28, 28}, 10},
       build_lstm},
      {{"gru", "GRU classifier: 28 steps of 28 features, GRU 128 units (last step), dense 10", {28, 28}, 10},
       build_gru},
      {{"lstm-imdb",
        "LSTM on IMDb reviews (Keras imdb_lstm.py): embedding (20,000 words + 2) x 128, LSTM 128 (last step), "
        "dense 2 (softmax); 80 tokens",
        {80}, 2, 20002},
       build_lstm_imdb},
      {{"gru-imdb", "GRU on IMDb reviews: embedding (20,000 words + 2) x 128, GRU 128 (last step), dense 2; 80 tokens",
        {80}, 2, 20002},
       build_gru_imdb},
  };
  return kEntries;
}
}  // namespace

const std::vector<ModelInfo>& model_table() {
  static const std::vector<ModelInfo> kTable = [] {
    std::vector<ModelInfo> t;
    for (const auto& e : entries()) t.push_back(e.info);
    return t;
  }();
  return kTable;
}

ModelArgs model_args(const Model& m) {
  ModelArgs a;
  a.graph = m.graph;
  if (m.num_ids > 0) {
    a.num_ids = m.num_ids;
    a.steps = m.input_shape.at(0);
  }
  return a;
}

Model build_model(const std::string& name, const Policy& policy, uint64_t seed, const ModelArgs& args) {
  if (name == kGraphModelName) {
    check(!args.graph.empty(), "model: a graph model needs its graph spec (a model file's or an importer's)");
    Model m;
    m.name = name;
    m.policy = policy;
    m.graph = args.graph;
    Rng rng(policy.rng_engine, seed);
    build_graph_model(m, rng, args.max_param_bytes);
    return m;
  }
  check(args.graph.empty(), "model: ", name, " is a zoo model; a graph spec was given");
  for (const auto& e : entries()) {
    if (e.info.name != name) continue;
    Model m;
    m.name = name;
    m.policy = policy;
    m.input_shape = e.info.input_shape;
    m.num_classes = e.info.num_classes;
    m.num_ids = e.info.num_ids;
    if (args.num_ids != 0 || args.steps != 0) {
      check(e.info.num_ids > 0, "model: ", name, " takes no vocabulary or sequence length (num_ids=", args.num_ids,
            ", steps=", args.steps, "); only token models do");
      check(args.num_ids >= 0 && args.steps >= 0, "model: ", name, ": num_ids=", args.num_ids, " and steps=",
            args.steps, " must be >= 0");
      if (args.num_ids > 0) m.num_ids = args.num_ids;
      if (args.steps > 0) m.input_shape = {args.steps};
    }
    m.net = std::make_unique<Sequential>(m.input_shape);
    Rng rng(policy.rng_engine, seed);
    e.build(m, rng);
    m.net->apply_input_cast(policy);
    return m;
  }
  std::string known;
  for (const auto& e : entries()) known += (known.empty() ? "" : ", ") + e.info.name;
  fail("model: unknown model '", name, "' (known: ", known, ")");
}

}  // namespace driftlab
