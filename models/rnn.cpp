// LSTM and GRU classifiers as in Openja et al.'s conversion study (docs/GLOSSARY.md), on sequential
// (Fashion-)MNIST: each 28x28 image is 28 steps of 28 features fed straight into one recurrent
// layer of 128 units (no embedding), whose last hidden state goes to a dense head of 10 logits;
// and on IMDb token ids, with an embedding in front (build_lstm_imdb, build_gru_imdb at the end).
// The Policy decides the packed weight layout, initialisers, number of biases, gate activation and
// the GRU's reset rule.
#include <memory>

#include "engine/layers/dense_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/lstm_layer.h"
#include "models/models.h"

namespace driftlab {
namespace {
constexpr int64_t kUnits = 128;
}  // namespace

void build_lstm(Model& m, Rng& rng) {
  m.net->add(std::make_unique<LstmLayer>(RnnSpec{kUnits, false}, m.net->current_shape(), m.policy, rng));
  m.net->add(std::make_unique<DenseLayer>(m.num_classes, m.net->current_shape(), m.policy, rng));
}

void build_gru(Model& m, Rng& rng) {
  m.net->add(std::make_unique<GruLayer>(RnnSpec{kUnits, false}, m.net->current_shape(), m.policy, rng));
  m.net->add(std::make_unique<DenseLayer>(m.num_classes, m.net->current_shape(), m.policy, rng));
}

}  // namespace driftlab

// Token models for IMDb (models.h): embedding -> one recurrent layer (last step) -> dense 2.
// Keras's examples/imdb_lstm.py@2.2.4 is Embedding(20000, 128), LSTM(128, dropout=0.2,
// recurrent_dropout=0.2), Dense(1, sigmoid) with binary cross-entropy; here the head is two
// logits with softmax cross-entropy (the trainer's one loss: the same model up to the
// parameterisation, logit difference = the sigmoid's logit) and there is no dropout.
namespace driftlab {
namespace {
constexpr int64_t kEmbedDim = 128;

void build_token_rnn(Model& m, Rng& rng, RnnCell cell) {
  m.net->add(std::make_unique<EmbeddingLayer>(EmbeddingArgs{m.num_ids, kEmbedDim, std::nullopt},
                                              m.net->current_shape(), m.policy, rng));
  if (cell == RnnCell::lstm)
    m.net->add(std::make_unique<LstmLayer>(RnnSpec{kUnits, false}, m.net->current_shape(), m.policy, rng));
  else
    m.net->add(std::make_unique<GruLayer>(RnnSpec{kUnits, false}, m.net->current_shape(), m.policy, rng));
  m.net->add(std::make_unique<DenseLayer>(m.num_classes, m.net->current_shape(), m.policy, rng));
}
}  // namespace

void build_lstm_imdb(Model& m, Rng& rng) { build_token_rnn(m, rng, RnnCell::lstm); }
void build_gru_imdb(Model& m, Rng& rng) { build_token_rnn(m, rng, RnnCell::gru); }

}  // namespace driftlab
