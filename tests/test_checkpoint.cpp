// The checkpoint file (train/checkpoint.h) and the state it carries: a written checkpoint reads
// back with every field equal (doubles bit for bit, NaN and infinities included), RNG streams
// saved mid-stream continue with the same draws, a runner's state restored into a fresh runner
// trains on to the same bits, and a damaged file is refused naming the file and the offset.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "train/checkpoint.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_tensor(const Tensor& a, const Tensor& b) {
  // An empty tensor (SGD's unused second state slot) has no buffer: nothing to compare.
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

void expect_same_stats(const EpochStats& a, const EpochStats& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  for (auto [x, y] : {std::pair{a.train_loss, b.train_loss}, {a.train_acc, b.train_acc}, {a.val_loss, b.val_loss},
                      {a.val_acc, b.val_acc}, {a.seconds, b.seconds}, {a.images_per_s, b.images_per_s}, {a.lr, b.lr},
                      {a.first_step_seconds, b.first_step_seconds},
                      {a.images_per_s_after_first, b.images_per_s_after_first}})
    EXPECT_TRUE(same_bits(x, y)) << x << " vs " << y;
  EXPECT_EQ(a.skipped_steps, b.skipped_steps);
  EXPECT_EQ(a.first_skip, b.first_skip);
  EXPECT_EQ(a.overflow_steps, b.overflow_steps);
  EXPECT_TRUE(same_bits(a.loss_scale, b.loss_scale));
  ASSERT_EQ(a.step_losses.size(), b.step_losses.size());
  for (std::size_t i = 0; i < a.step_losses.size(); ++i) EXPECT_TRUE(same_bits(a.step_losses[i], b.step_losses[i]));
  EXPECT_EQ(a.order_hash, b.order_hash);
}

Tensor counting(Shape s, DType t, double start) {
  Tensor x(s, t);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<T>()[i] = static_cast<T>(start + 0.1 * static_cast<double>(i));
  });
  return x;
}

// A checkpoint with every field away from its default, and values that do not survive a
// careless round trip (1/3, 0.1+0.2, NaN, +-inf, -0, 2^64-1).
Checkpoint sample_checkpoint() {
  Checkpoint c;
  c.spec.model = "lenet1";
  c.spec.policy = Policy::parse("tensorflow,shuffle=none,relu_grad_at_zero=0.5");
  c.spec.data.dataset = "mnist";
  c.spec.data.data_dir = "/data/mnist";
  c.spec.data.limit = 512;
  c.spec.data.vocab_size = 7;
  c.spec.data.max_len = 9;
  c.spec.data.seq_pad = "post";
  c.spec.data.seq_truncate = "pre";
  c.spec.train.epochs = 5;
  c.spec.train.batch = 33;
  c.spec.train.optim.kind = OptimizerKind::adam;
  c.spec.train.optim.lr = 1.0 / 3.0;
  c.spec.train.optim.momentum = 0;  // SGD's and RMSprop's only (refused for Adam)
  c.spec.train.optim.weight_decay = 0.1 + 0.2;
  c.spec.train.optim.beta1 = 0.85;
  c.spec.train.optim.beta2 = 0.995;
  c.spec.train.schedule = parse_schedule("step:step=2,gamma=0.5");
  c.spec.train.step_losses = true;
  c.spec.train.seed = 123456789012345ull;
  c.spec.train.on_nonfinite = OnNonFinite::skip_batch;
  c.spec.normalize = true;
  c.spec.init = "runs/src/model.dlm";
  c.spec.init_convert = false;
  c.spec.init_policy = "";
  c.spec.checkpoint_every = 7;
  c.threads = 3;
  c.init = {{"path", "runs/src/model.dlm"}, {"fnv1a64", "0123456789abcdef"}};
  c.tensors.emplace_back("0.conv2d.weight", counting({2, 1, 3, 3}, DType::f32, -0.7));
  c.tensors.emplace_back("1.bn.running_mean", counting({2}, DType::f64, 1.0 / 3.0));
  c.state.epoch = 2;
  c.state.step_index = 41;
  std::mt19937 mt(5);
  for (int i = 0; i < 1000; ++i) mt();
  c.state.shuffle_rng = mt19937_text(mt);
  Rng r(RngEngine::philox_u23, 99);
  r.next_u32();
  c.state.dropout_rng = r.state();
  c.state.schedule = {0.0625, 2, 41, std::numeric_limits<double>::infinity(), 3, 1};
  c.state.optim.steps = 40;
  c.state.optim.skipped = 3;
  c.state.optim.power1 = std::pow(0.85, 40);
  c.state.optim.power2 = -0.0;
  c.state.optim.slot0 = {counting({2, 1, 3, 3}, DType::f32, 0.5), counting({2}, DType::f64, -2)};
  c.state.optim.slot1 = {Tensor(), counting({2}, DType::f64, 9)};
  EpochProgress& p = c.state.progress;
  p.active = true;
  p.order = {3, 0, 2, 1};
  p.next_batch = 2;
  p.loss_sum = 0.1 + 0.2;
  p.correct_sum = 17;
  p.skipped_samples = 33;
  p.elapsed_s = 1e-300;
  p.stats.epoch = 3;
  p.stats.first_step_seconds = 0.75;
  p.stats.skipped_steps = 1;
  p.stats.first_skip = "loss is nan";
  p.stats.overflow_steps = 2;
  p.stats.loss_scale = 16384;
  p.stats.lr = 0.0625;
  p.stats.step_losses = {std::numeric_limits<double>::quiet_NaN(), 2.5};
  p.stats.order_hash = ~uint64_t{0};
  EpochStats e;
  e.epoch = 1;
  e.train_loss = std::numeric_limits<double>::quiet_NaN();
  e.train_acc = 0.25;
  e.val_loss = -std::numeric_limits<double>::infinity();
  e.val_acc = 1.0 / 7.0;
  e.seconds = 12.5;
  e.images_per_s = 40.96;
  e.first_step_seconds = 1.0 / 3.0;
  e.images_per_s_after_first = 51.25;
  e.lr = 0.125;
  e.order_hash = 42;
  c.epochs = {e, e};
  c.epochs[1].epoch = 2;
  c.resumed = nlohmann::json::array({{{"epoch", 1}, {"batch_in_epoch", 4}, {"step", 4}}});
  return c;
}

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("driftlab_ckpt_" + name + "_" + std::to_string(::getpid()) + ".dlc");
}

TEST(Checkpoint, RoundTripKeepsEveryField) {
  const Checkpoint a = sample_checkpoint();
  const fs::path f = temp_file("roundtrip");
  write_checkpoint(f.string(), a);
  const Checkpoint b = read_checkpoint(f.string());
  fs::remove(f);
  EXPECT_EQ(train_spec_json(b.spec), train_spec_json(a.spec));
  EXPECT_EQ(b.spec.policy.to_full_string(), a.spec.policy.to_full_string());
  EXPECT_TRUE(same_bits(b.spec.train.optim.lr, 1.0 / 3.0));
  EXPECT_TRUE(same_bits(b.spec.train.optim.weight_decay, 0.1 + 0.2));
  EXPECT_EQ(b.spec.train.seed, 123456789012345ull);
  EXPECT_EQ(b.threads, 3);
  EXPECT_EQ(b.init, a.init);
  EXPECT_EQ(b.resumed, a.resumed);
  ASSERT_EQ(b.tensors.size(), a.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(b.tensors[i].first, a.tensors[i].first);
    EXPECT_TRUE(same_tensor(b.tensors[i].second, a.tensors[i].second)) << a.tensors[i].first;
  }
  const TrainState &s = b.state, &t = a.state;
  EXPECT_EQ(s.epoch, t.epoch);
  EXPECT_EQ(s.step_index, t.step_index);
  EXPECT_EQ(s.shuffle_rng, t.shuffle_rng);
  EXPECT_EQ(s.dropout_rng, t.dropout_rng);
  EXPECT_TRUE(same_bits(s.schedule.lr, t.schedule.lr));
  EXPECT_EQ(s.schedule.epochs, t.schedule.epochs);
  EXPECT_EQ(s.schedule.steps, t.schedule.steps);
  EXPECT_TRUE(same_bits(s.schedule.best, t.schedule.best));
  EXPECT_EQ(s.schedule.bad, t.schedule.bad);
  EXPECT_EQ(s.schedule.cooldown, t.schedule.cooldown);
  EXPECT_EQ(s.optim.steps, t.optim.steps);
  EXPECT_EQ(s.optim.skipped, t.optim.skipped);
  EXPECT_TRUE(same_bits(s.optim.power1, t.optim.power1));
  EXPECT_TRUE(same_bits(s.optim.power2, -0.0));
  ASSERT_EQ(s.optim.slot0.size(), 2u);
  ASSERT_EQ(s.optim.slot1.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(same_tensor(s.optim.slot0[i], t.optim.slot0[i]));
    EXPECT_TRUE(same_tensor(s.optim.slot1[i], t.optim.slot1[i]));
  }
  EXPECT_EQ(s.optim.slot1[0].numel(), 0);
  EXPECT_EQ(s.progress.active, t.progress.active);
  EXPECT_EQ(s.progress.order, t.progress.order);
  EXPECT_EQ(s.progress.next_batch, t.progress.next_batch);
  EXPECT_TRUE(same_bits(s.progress.loss_sum, t.progress.loss_sum));
  EXPECT_EQ(s.progress.correct_sum, t.progress.correct_sum);
  EXPECT_EQ(s.progress.skipped_samples, t.progress.skipped_samples);
  EXPECT_TRUE(same_bits(s.progress.elapsed_s, t.progress.elapsed_s));
  expect_same_stats(s.progress.stats, t.progress.stats);
  ASSERT_EQ(b.epochs.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) expect_same_stats(b.epochs[i], a.epochs[i]);
  // And the bytes: writing what was read gives the same file.
  EXPECT_EQ(checkpoint_bytes(b), checkpoint_bytes(a));
}

// The writer streams the tensors from their own memory (no copy of the file in memory): the file
// is the layout train/checkpoint.h states, byte for byte, assembled here from the header's own
// offsets and zlib's CRC directly, and the kill hook sees exactly half of it in the temporary.
TEST(Checkpoint, StreamedFileIsTheStatedLayoutAndTheHookSeesHalf) {
  const Checkpoint a = sample_checkpoint();
  const fs::path f = temp_file("layout");
  uint64_t seen = 0;
  int calls = 0;
  write_checkpoint(f.string(), a, [&] {
    ++calls;
    for (const auto& e : fs::directory_iterator(f.parent_path()))
      if (e.path().filename().string().rfind(f.filename().string() + ".tmp.", 0) == 0) seen = fs::file_size(e.path());
  });
  std::ifstream in(f, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(f);
  ASSERT_GE(file.size(), 24u);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, file.size() / 2);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | static_cast<unsigned char>(file[12 + i]);
  const nlohmann::json h = nlohmann::json::parse(file.substr(20, hlen));
  std::string want("DLCKPT\r\n", 8);
  for (int i = 0; i < 4; ++i) want.push_back(static_cast<char>((kCheckpointVersion >> (8 * i)) & 0xff));
  for (int i = 0; i < 8; ++i) want.push_back(static_cast<char>((hlen >> (8 * i)) & 0xff));
  want += file.substr(20, hlen);
  // Every tensor of the sample at the offset the header gives it, in the header's order.
  std::vector<const Tensor*> order;
  for (const auto& nt : a.tensors) order.push_back(&nt.second);
  for (const Tensor& t : a.state.optim.slot0) order.push_back(&t);
  for (const Tensor& t : a.state.optim.slot1)
    if (t.numel()) order.push_back(&t);
  const Tensor progress = Tensor::from<int64_t>({4}, a.state.progress.order);
  order.push_back(&progress);
  ASSERT_EQ(h["tensors"].size(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(h["tensors"][i]["offset"].get<uint64_t>(), want.size() - 20 - hlen) << i;
    want.append(static_cast<const char*>(order[i]->raw()), order[i]->nbytes());
  }
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(want.data()), static_cast<uInt>(want.size()));
  for (int i = 0; i < 4; ++i) want.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  EXPECT_EQ(file, want);
  EXPECT_EQ(checkpoint_bytes(a), want);
}

TEST(Checkpoint, DamagedFilesAreRefusedNamingFileAndOffset) {
  const std::string good = checkpoint_bytes(sample_checkpoint());
  const fs::path f = temp_file("damaged");
  auto error_of = [&](const std::string& bytes) -> std::string {
    std::ofstream(f, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    try {
      read_checkpoint(f.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string name = "checkpoint: " + f.string() + ": ";
  // Every truncation is caught (by the size, the header length or the CRC), never read past.
  for (std::size_t n : {std::size_t{0}, std::size_t{23}, std::size_t{24}, std::size_t{100}, good.size() / 2,
                        good.size() - 1}) {
    const std::string e = error_of(good.substr(0, n));
    EXPECT_EQ(e.rfind(name, 0), 0u) << n << ": " << e;
    EXPECT_NE(e.find("offset"), std::string::npos) << n << ": " << e;
  }
  std::string bad_version = good;
  bad_version[8] = 9;
  EXPECT_NE(error_of(bad_version).find("version 9 at offset 8 is not supported"), std::string::npos);
  std::string flipped = good;
  flipped[good.size() - 10] ^= 1;
  EXPECT_NE(error_of(flipped).find("CRC mismatch at offset " + std::to_string(good.size() - 4)), std::string::npos);
  EXPECT_EQ(error_of(good), "(no error)");
  // A header that parses but says what no run could: named by its field.
  Checkpoint odd = sample_checkpoint();
  odd.spec.train.optim.momentum = 0.5;  // Adam has no --momentum
  const std::string e = error_of(checkpoint_bytes(odd));
  EXPECT_NE(e.find(name + "header (at offset 20) field spec.train is refused: adam: --momentum"), std::string::npos)
      << e;
  fs::remove(f);
  EXPECT_NE(error_of("").find("truncated at offset 0"), std::string::npos);
  fs::remove(f);
}

TEST(Checkpoint, RngStreamsContinueFromTheirSavedState) {
  for (RngEngine engine : {RngEngine::mt19937_u24, RngEngine::philox_u23, RngEngine::mrg31k3p}) {
    Rng a(engine, 7);
    for (int i = 0; i < 5; ++i) a.next_u32();  // mid-block for philox (4 outputs a block)
    Rng b(engine, 1234);
    b.set_state(a.state());
    for (int i = 0; i < 20; ++i) ASSERT_EQ(a.next_u32(), b.next_u32()) << a.state();
  }
  Rng m(RngEngine::mrg31k3p, 1);
  EXPECT_THROW(m.set_state("philox_u23 1 2 3"), Error);
  EXPECT_THROW(m.set_state("mrg31k3p 1 2"), Error);
  std::mt19937 x(3), y;
  x();
  mt19937_from_text(y, mt19937_text(x), "test");
  EXPECT_EQ(x(), y());
  EXPECT_THROW(mt19937_from_text(y, "12 34", "shuffle stream"), Error);
}

// A runner stopped between two steps and its state put into a fresh runner on a copy of the
// model trains on to the bits of the runner that never stopped (Adam, a per-batch schedule,
// dropout-free LeNet-1, 10 steps an epoch on a 10-sample batch).
TEST(Checkpoint, RestoredRunnerTrainsOnToTheSameBits) {
  Dataset data;
  data.name = "counting";
  data.images = Tensor({100, 1, 28, 28}, DType::f32);
  for (int64_t i = 0; i < data.images.numel(); ++i)
    data.images.data<float>()[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
  data.num_classes = 10;
  for (int i = 0; i < 100; ++i) data.labels.push_back(i % 10);
  TrainConfig cfg;
  cfg.epochs = 2;
  cfg.batch = 10;
  cfg.optim.kind = OptimizerKind::adam;
  cfg.optim.lr = 1e-3;
  cfg.schedule = parse_schedule("step:step=3,gamma=0.5,every=batch");
  ExecContext exec;
  exec.threads = 1;
  Model ref = build_model("lenet1", Policy::torch(), 3);
  Model cut = build_model("lenet1", Policy::torch(), 3);
  CpuRunner a(ref, cfg, exec), b(cut, cfg, exec);
  for (int e = 0; e < 2; ++e) a.run_epoch(data, nullptr, {});
  int steps = 0;
  EpochStats st;
  ASSERT_FALSE(b.run_epoch(data, nullptr, {}, [&] { return ++steps != 4; }, &st));
  ASSERT_TRUE(b.run_epoch(data, nullptr, {}, [] { return true; }, &st));  // finishes epoch 1
  steps = 0;
  ASSERT_FALSE(b.run_epoch(data, nullptr, {}, [&] { return ++steps != 3; }, &st));  // epoch 2, 3 steps in
  const TrainState saved = b.train_state();
  EXPECT_EQ(saved.step_index, 13);
  EXPECT_EQ(saved.progress.next_batch, 3);
  Model resumed = build_model("lenet1", Policy::torch(), 99);  // other initial weights: all replaced below
  auto dst = resumed.net->named_params(), src = cut.net->named_params();
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i].second->value = src[i].second->value.clone();
  CpuRunner c(resumed, cfg, exec);
  c.set_train_state(saved);
  ASSERT_TRUE(c.run_epoch(data, nullptr, {}, [] { return true; }, &st));
  EXPECT_EQ(c.step_index(), 20);
  auto pr = ref.net->named_params(), pc = resumed.net->named_params();
  for (std::size_t i = 0; i < pr.size(); ++i)
    EXPECT_TRUE(same_tensor(pr[i].second->value, pc[i].second->value)) << pr[i].first;
}

}  // namespace
}  // namespace driftlab
