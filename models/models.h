// The model zoo. Each model is built from a Policy and a seed: the Policy decides padding,
// flip, flatten order and initialisers; the seed starts the Policy's rng_engine.
//
// Token models (lstm-imdb, gru-imdb) are built for a vocabulary and a sequence length chosen
// at training time (ModelArgs); the model file stores both (num_ids, input_shape), so every
// later command rebuilds the same shapes.
//
// To add a model: 1) write models/<name>.cpp with a build function; 2) add it to the table
// in models/models.cpp; 3) add its parameter count to tests/test_models.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/layers/residual_layer.h"
#include "engine/model.h"

namespace driftlab {

struct ModelInfo {
  std::string name;
  std::string description;
  Shape input_shape;  // per sample: (C,H,W) for the CNNs, (steps, features) for the RNNs
  int64_t num_classes;
  int64_t num_ids = 0;  // token models: the default embedding rows (0: not a token model)
};

// The sizes a token model is built for; 0 keeps the table's default. Other models take none.
struct ModelArgs {
  // A token model's sizes (ModelArgs{ids, steps}); a graph's spec is set by name (.graph).
  ModelArgs(int64_t ids = 0, int64_t sequence_steps = 0) : num_ids(ids), steps(sequence_steps) {}
  int64_t num_ids = 0;  // embedding rows: vocabulary size + 2 (ids 0 = padding, 1 = OOV)
  int64_t steps = 0;    // sequence length
  std::string graph;    // a graph model's spec (models/graph.h): what build_model("graph") builds
  uint64_t max_param_bytes = 0;  // a graph's parameter bytes at most (a model file's data; 0: no bound)
};
// The arguments that rebuild m's shapes (for a model file, or the same weights under another Policy).
ModelArgs model_args(const Model& m);

const std::vector<ModelInfo>& model_table();
// Throws "model: unknown model 'X' (known: lenet1, lenet5)".
Model build_model(const std::string& name, const Policy& policy, uint64_t seed, const ModelArgs& args = {});

// The ResNet basic block of the CIFAR models, appended to net: conv3x3(stride)-BN-relu-
// conv3x3-BN plus the shortcut, then relu. Convs pad the Policy's way ('same', or PyTorch's
// padding=1 under the torch preset) and have no bias.
void add_basic_block(Sequential& net, const Policy& p, Rng& rng, int64_t planes, int64_t stride, Shortcut sc);

// Builders, one per file.
void build_lenet1(Model& m, Rng& rng);
void build_lenet5(Model& m, Rng& rng);
void build_resnet20(Model& m, Rng& rng);
void build_resnet20b(Model& m, Rng& rng);
void build_resnet18(Model& m, Rng& rng);
void build_vgg16(Model& m, Rng& rng);
void build_lstm(Model& m, Rng& rng);
void build_gru(Model& m, Rng& rng);
void build_lstm_imdb(Model& m, Rng& rng);
void build_gru_imdb(Model& m, Rng& rng);

}  // namespace driftlab
