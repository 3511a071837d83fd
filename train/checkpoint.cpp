#include "train/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "models/model_file.h"

namespace driftlab {

namespace {

using json = nlohmann::json;
// The checkpoint's container (engine/io/container.h).
const ContainerFormat kCheckpointFormat{"checkpoint", {'D', 'L', 'C', 'K', 'P', 'T', '\r', '\n'},
                                        "(not a driftlab checkpoint)", "a checkpoint has at least 24 bytes",
                                        kCheckpointVersion, kCheckpointVersion, uint64_t{64} << 20, "", true, false};

// A double that may be NaN or infinite: JSON has no such numbers (nlohmann writes null).
json dbl(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// The header's fields, read with the file and the field's path in every message.
struct Reader {
  std::string path;

  [[noreturn]] void bad(const std::string& where, const std::string& what) const {
    fail("checkpoint: ", path, ": header (at offset 20) field ", where, " ", what);
  }
  const json& at(const json& o, const char* key, const std::string& where) const {
    if (!o.is_object() || !o.contains(key)) bad(where + key, "is missing");
    return o.at(key);
  }
  double number(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (v.is_number()) return v.get<double>();
    if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (v == "inf") return std::numeric_limits<double>::infinity();
    if (v == "-inf") return -std::numeric_limits<double>::infinity();
    bad(where + key, "is " + v.dump() + ", not a number");
  }
  int64_t integer(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (!v.is_number_integer()) bad(where + key, "is " + v.dump() + ", not an integer");
    return v.get<int64_t>();
  }
  uint64_t unsigned_int(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (!v.is_number_unsigned()) bad(where + key, "is " + v.dump() + ", not an integer >= 0");
    return v.get<uint64_t>();
  }
  bool boolean(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (!v.is_boolean()) bad(where + key, "is " + v.dump() + ", not true/false");
    return v.get<bool>();
  }
  std::string string(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (!v.is_string()) bad(where + key, "is " + v.dump() + ", not a string");
    return v.get<std::string>();
  }
  const json& array(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (!v.is_array()) bad(where + key, "is not an array");
    return v;
  }
};

json epoch_stats_json(const EpochStats& e) {
  json losses = json::array();
  for (double l : e.step_losses) losses.push_back(dbl(l));
  return {{"epoch", e.epoch},          {"train_loss", dbl(e.train_loss)}, {"train_acc", dbl(e.train_acc)},
          {"val_loss", dbl(e.val_loss)}, {"val_acc", dbl(e.val_acc)},     {"seconds", dbl(e.seconds)},
          {"images_per_s", dbl(e.images_per_s)}, {"first_step_seconds", dbl(e.first_step_seconds)},
          {"images_per_s_after_first", dbl(e.images_per_s_after_first)}, {"skipped_steps", e.skipped_steps},
          {"first_skip", e.first_skip}, {"overflow_steps", e.overflow_steps}, {"loss_scale", dbl(e.loss_scale)},
          {"lr", dbl(e.lr)}, {"step_losses", losses}, {"order_hash", e.order_hash}};
}

EpochStats epoch_stats_from(const Reader& r, const json& j, const std::string& w) {
  EpochStats e;
  e.epoch = static_cast<int>(r.integer(j, "epoch", w));
  e.train_loss = r.number(j, "train_loss", w);
  e.train_acc = r.number(j, "train_acc", w);
  e.val_loss = r.number(j, "val_loss", w);
  e.val_acc = r.number(j, "val_acc", w);
  e.seconds = r.number(j, "seconds", w);
  e.images_per_s = r.number(j, "images_per_s", w);
  if (j.is_object() && j.contains("first_step_seconds")) {  // absent in checkpoints written before it was timed
    e.first_step_seconds = r.number(j, "first_step_seconds", w);
    e.images_per_s_after_first = r.number(j, "images_per_s_after_first", w);
  }
  e.skipped_steps = r.integer(j, "skipped_steps", w);
  e.first_skip = r.string(j, "first_skip", w);
  if (j.is_object() && j.contains("overflow_steps")) {  // absent in checkpoints written before loss scaling's counts
    e.overflow_steps = r.integer(j, "overflow_steps", w);
    e.loss_scale = r.number(j, "loss_scale", w);
  }
  e.lr = r.number(j, "lr", w);
  const json& losses = r.array(j, "step_losses", w);
  for (std::size_t i = 0; i < losses.size(); ++i)
    e.step_losses.push_back(r.number(json{{"v", losses[i]}}, "v", w + "step_losses[" + std::to_string(i) + "]."));
  e.order_hash = r.unsigned_int(j, "order_hash", w);
  return e;
}

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t offset, nbytes;
};

void read_at(std::istream& in, uint64_t at, void* dst, uint64_t n, const std::string& path) {
  container_read_at(in, at, dst, n, path, kCheckpointFormat);
}

}  // namespace

json train_spec_json(const TrainRunSpec& s) {
  const OptimConfig& o = s.train.optim;
  return {{"model", s.model},
          {"policy", s.policy.to_string()},
          {"data",
           {{"dataset", s.data.dataset}, {"data_dir", s.data.data_dir}, {"limit", s.data.limit},
            {"vocab_size", s.data.vocab_size}, {"max_len", s.data.max_len}, {"seq_pad", s.data.seq_pad},
            {"seq_truncate", s.data.seq_truncate}}},
          {"train",
           {{"epochs", s.train.epochs}, {"batch", s.train.batch}, {"optimizer", optimizer_name(o.kind)},
            {"lr", o.lr}, {"momentum", o.momentum}, {"nesterov", o.nesterov}, {"weight_decay", o.weight_decay},
            {"beta1", o.beta1}, {"beta2", o.beta2}, {"schedule", schedule_string(s.train.schedule)},
            {"step_losses", s.train.step_losses}, {"seed", s.train.seed},
            {"on_nonfinite", on_nonfinite_name(s.train.on_nonfinite)}}},
          {"normalize", s.normalize},
          {"device", device_name(s.device)},
          {"init", s.init},
          {"init_convert", s.init_convert},
          {"init_policy", s.init_policy},
          {"checkpoint_every", s.checkpoint_every}};
}

namespace {

TrainRunSpec spec_from(const Reader& r, const json& j) {
  const std::string w = "spec.";
  // Values are parsed by the functions the command line uses; their errors say what is wrong,
  // this says where it was read.
  auto parsed = [&](const char* field, auto&& f) {
    try {
      return f();
    } catch (const Error& e) {
      r.bad(std::string("spec.") + field, std::string("is refused: ") + e.what());
    }
  };
  TrainRunSpec s;
  s.model = r.string(j, "model", w);
  const std::string policy = r.string(j, "policy", w);
  s.policy = parsed("policy", [&] { return Policy::parse(policy); });
  const json& d = r.at(j, "data", w);
  s.data.dataset = r.string(d, "dataset", w + "data.");
  s.data.data_dir = r.string(d, "data_dir", w + "data.");
  s.data.limit = r.integer(d, "limit", w + "data.");
  s.data.vocab_size = r.integer(d, "vocab_size", w + "data.");
  s.data.max_len = r.integer(d, "max_len", w + "data.");
  s.data.seq_pad = r.string(d, "seq_pad", w + "data.");
  s.data.seq_truncate = r.string(d, "seq_truncate", w + "data.");
  const json& t = r.at(j, "train", w);
  const std::string tw = w + "train.";
  s.train.epochs = static_cast<int>(r.integer(t, "epochs", tw));
  s.train.batch = r.integer(t, "batch", tw);
  OptimConfig& o = s.train.optim;
  const std::string opt = r.string(t, "optimizer", tw);
  o.kind = parsed("train.optimizer", [&] { return parse_optimizer(opt); });
  o.lr = r.number(t, "lr", tw);
  o.momentum = r.number(t, "momentum", tw);
  o.nesterov = r.boolean(t, "nesterov", tw);
  o.weight_decay = r.number(t, "weight_decay", tw);
  o.beta1 = r.number(t, "beta1", tw);
  o.beta2 = r.number(t, "beta2", tw);
  const std::string sched = r.string(t, "schedule", tw);
  s.train.schedule = parsed("train.schedule", [&] { return parse_schedule(sched); });
  s.train.step_losses = r.boolean(t, "step_losses", tw);
  s.train.seed = r.unsigned_int(t, "seed", tw);
  const std::string onf = r.string(t, "on_nonfinite", tw);
  s.train.on_nonfinite = parsed("train.on_nonfinite", [&] { return parse_on_nonfinite(onf); });
  s.normalize = r.boolean(j, "normalize", w);
  const std::string dev = r.string(j, "device", w);
  s.device = parsed("device", [&] { return parse_device(dev); });
  s.init = r.string(j, "init", w);
  s.init_convert = r.boolean(j, "init_convert", w);
  s.init_policy = r.string(j, "init_policy", w);
  s.checkpoint_every = r.integer(j, "checkpoint_every", w);
  parsed("train", [&] {
    check_optim_config(o);
    check(s.train.epochs >= 0 && s.train.batch >= 1 && s.checkpoint_every >= 0, "epochs=", s.train.epochs,
          " batch=", s.train.batch, " checkpoint_every=", s.checkpoint_every, " out of range");
    return 0;
  });
  return s;
}

}  // namespace

TrainRunSpec train_spec_from_json(const json& j) { return spec_from(Reader{"(spec)"}, j); }

namespace {

// The header and the spans of the tensors' own memory (c's tensors, and `order` for the epoch's
// sample order, which must outlive the parts).
ContainerParts checkpoint_parts(const Checkpoint& c, Tensor& order) {
  ContainerParts parts;
  json tensors = json::array();
  auto add = [&](const std::string& name, const Tensor& t) { tensors.push_back(parts.add_tensor(name, t)); };
  for (const auto& [name, t] : c.tensors) add("model/" + name, t);
  const TrainState& s = c.state;
  for (std::size_t i = 0; i < s.optim.slot0.size(); ++i) add("optim.slot0/" + std::to_string(i), s.optim.slot0[i]);
  for (std::size_t i = 0; i < s.optim.slot1.size(); ++i)
    if (s.optim.slot1[i].numel()) add("optim.slot1/" + std::to_string(i), s.optim.slot1[i]);
  const EpochProgress& p = s.progress;
  if (p.active) {
    order = Tensor::from<int64_t>({static_cast<int64_t>(p.order.size())}, p.order);
    add("progress.order", order);
  }
  json epochs = json::array();
  for (const EpochStats& e : c.epochs) epochs.push_back(epoch_stats_json(e));
  json h = {
      {"format", "driftlab-checkpoint"},
      {"spec", train_spec_json(c.spec)},
      {"threads", c.threads},
      {"init", c.init},
      {"state",
       {{"epoch", s.epoch},
        {"step_index", s.step_index},
        {"shuffle_rng", s.shuffle_rng},
        {"dropout_rng", s.dropout_rng},
        {"schedule",
         {{"lr", dbl(s.schedule.lr)}, {"epochs", s.schedule.epochs}, {"steps", s.schedule.steps},
          {"best", dbl(s.schedule.best)}, {"bad", s.schedule.bad}, {"cooldown", s.schedule.cooldown}}},
        {"loss_scale", {{"scale", dbl(s.loss_scale)}, {"finite_steps", s.loss_scale_finite_steps}}},
        {"optim", {{"steps", s.optim.steps}, {"skipped", s.optim.skipped}, {"power1", dbl(s.optim.power1)}, {"power2", dbl(s.optim.power2)},
                   {"slots", s.optim.slot0.size()}}},
        {"progress",
         {{"active", p.active}, {"next_batch", p.next_batch}, {"loss_sum", dbl(p.loss_sum)},
          {"correct_sum", p.correct_sum}, {"skipped_samples", p.skipped_samples}, {"elapsed_s", dbl(p.elapsed_s)},
          {"stats", epoch_stats_json(p.stats)}}}}},
      {"epochs", epochs},
      {"resumed", c.resumed},
      {"tensors", tensors}};
  parts.header = h.dump();
  return parts;
}

}  // namespace

std::string checkpoint_bytes(const Checkpoint& c) {
  Tensor order;
  return container_bytes(kCheckpointFormat, kCheckpointVersion, checkpoint_parts(c, order));
}

void write_checkpoint(const std::string& path, const Checkpoint& c, const std::function<void()>& halfway) {
  Tensor order;
  write_container_atomic(path, kCheckpointFormat, kCheckpointVersion, checkpoint_parts(c, order), halfway);
}

Checkpoint read_checkpoint(const std::string& path) {
  std::error_code ec;
  check(!std::filesystem::is_directory(path, ec), "checkpoint: ", path, ": is a directory, not a checkpoint");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "checkpoint: cannot open ", path, ": ", std::strerror(errno));
  return read_checkpoint(in, path);
}

Checkpoint read_checkpoint(std::istream& in, const std::string& path) {
  const ContainerHeader ch = read_container(in, path, kCheckpointFormat);
  const json& h = ch.header;
  const Reader r{path};
  check(h.is_object() && h.value("format", "") == "driftlab-checkpoint", "checkpoint: ", path,
        ": header at offset 20 is not a driftlab checkpoint's");
  Checkpoint c;
  c.spec = spec_from(r, r.at(h, "spec", ""));
  c.threads = static_cast<int>(r.integer(h, "threads", ""));
  c.init = r.at(h, "init", "");
  c.resumed = r.array(h, "resumed", "");
  const json& st = r.at(h, "state", "");
  TrainState& s = c.state;
  s.epoch = static_cast<int>(r.integer(st, "epoch", "state."));
  s.step_index = r.integer(st, "step_index", "state.");
  s.shuffle_rng = r.string(st, "shuffle_rng", "state.");
  s.dropout_rng = r.string(st, "dropout_rng", "state.");
  const json& sc = r.at(st, "schedule", "state.");
  s.schedule.lr = r.number(sc, "lr", "state.schedule.");
  s.schedule.epochs = r.integer(sc, "epochs", "state.schedule.");
  s.schedule.steps = r.integer(sc, "steps", "state.schedule.");
  s.schedule.best = r.number(sc, "best", "state.schedule.");
  s.schedule.bad = r.integer(sc, "bad", "state.schedule.");
  s.schedule.cooldown = r.integer(sc, "cooldown", "state.schedule.");
  if (st.is_object() && st.contains("loss_scale")) {  // absent in checkpoints written before loss scaling
    const json& ls = r.at(st, "loss_scale", "state.");
    s.loss_scale = r.number(ls, "scale", "state.loss_scale.");
    s.loss_scale_finite_steps = r.integer(ls, "finite_steps", "state.loss_scale.");
  }
  const json& op = r.at(st, "optim", "state.");
  s.optim.steps = r.integer(op, "steps", "state.optim.");
  if (op.is_object() && op.contains("skipped"))  // absent in checkpoints written before counted skipped steps
    s.optim.skipped = r.integer(op, "skipped", "state.optim.");
  s.optim.power1 = r.number(op, "power1", "state.optim.");
  s.optim.power2 = r.number(op, "power2", "state.optim.");
  const int64_t slots = r.integer(op, "slots", "state.optim.");
  const json& pj = r.at(st, "progress", "state.");
  EpochProgress& p = s.progress;
  p.active = r.boolean(pj, "active", "state.progress.");
  p.next_batch = r.integer(pj, "next_batch", "state.progress.");
  p.loss_sum = r.number(pj, "loss_sum", "state.progress.");
  p.correct_sum = r.integer(pj, "correct_sum", "state.progress.");
  p.skipped_samples = r.integer(pj, "skipped_samples", "state.progress.");
  p.elapsed_s = r.number(pj, "elapsed_s", "state.progress.");
  p.stats = epoch_stats_from(r, r.at(pj, "stats", "state.progress."), "state.progress.stats.");
  const json& eps = r.array(h, "epochs", "");
  for (std::size_t i = 0; i < eps.size(); ++i)
    c.epochs.push_back(epoch_stats_from(r, eps[i], "epochs[" + std::to_string(i) + "]."));

  // The tensors: every claim checked against the bytes there are before anything is allocated.
  const uint64_t data_start = ch.data_start(), data_len = ch.data_len();
  const json& tj = r.array(h, "tensors", "");
  std::vector<TensorEntry> entries;
  uint64_t next = 0;
  for (std::size_t i = 0; i < tj.size(); ++i) {
    const std::string w = "tensors[" + std::to_string(i) + "].";
    TensorEntry e;
    e.name = r.string(tj[i], "name", w);
    const std::string dt = r.string(tj[i], "dtype", w);
    try {
      e.dtype = dtype_from_name(dt);
    } catch (const Error& err) {
      r.bad(w + "dtype", std::string("is refused: ") + err.what());
    }
    const json& shape = r.array(tj[i], "shape", w);
    uint64_t numel = 1;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      if (!shape[k].is_number_unsigned() || shape[k].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        r.bad(w + "shape", "holds " + shape[k].dump() + ", not a dimension");
      e.shape.push_back(shape[k].get<int64_t>());
      if (__builtin_mul_overflow(numel, shape[k].get<uint64_t>(), &numel)) r.bad(w + "shape", "overflows");
    }
    e.offset = r.unsigned_int(tj[i], "offset", w);
    e.nbytes = r.unsigned_int(tj[i], "nbytes", w);
    uint64_t want = 0;
    check(!__builtin_mul_overflow(numel, dtype_size(e.dtype), &want) && want == e.nbytes, "checkpoint: ", path,
          ": tensor '", e.name, "' of shape ", shape_str(e.shape), " ", dt, " declares ", e.nbytes, " bytes");
    check(e.offset == next && e.nbytes <= data_len - next, "checkpoint: ", path, ": tensor '", e.name,
          "' at offset ", data_start + e.offset, " (", e.nbytes, " bytes) is not where the data section (",
          data_len, " bytes) has room for it");
    next += e.nbytes;
    entries.push_back(std::move(e));
  }
  check(next == data_len, "checkpoint: ", path, ": ", data_len - next, " bytes after the last tensor at offset ",
        data_start + next);
  std::vector<std::pair<std::string, Tensor>> slot0, slot1;
  bool have_order = false;
  for (const TensorEntry& e : entries) {
    Tensor t(e.shape, e.dtype);
    read_at(in, data_start + e.offset, t.raw(), e.nbytes, path);
    if (e.name.rfind("model/", 0) == 0) {
      c.tensors.emplace_back(e.name.substr(6), std::move(t));
    } else if (e.name.rfind("optim.slot0/", 0) == 0) {
      slot0.emplace_back(e.name.substr(12), std::move(t));
    } else if (e.name.rfind("optim.slot1/", 0) == 0) {
      slot1.emplace_back(e.name.substr(12), std::move(t));
    } else if (e.name == "progress.order") {
      check(e.dtype == DType::i64 && e.shape.size() == 1, "checkpoint: ", path,
            ": tensor progress.order is not a vector of int64");
      p.order.assign(t.data<int64_t>(), t.data<int64_t>() + t.numel());
      have_order = true;
    } else {
      fail("checkpoint: ", path, ": unknown tensor '", e.name, "' at offset ", data_start + e.offset);
    }
  }
  check(have_order == p.active, "checkpoint: ", path, ": ",
        p.active ? "an epoch is under way but its order (progress.order) is missing"
                 : "progress.order is present but no epoch is under way");
  for (std::size_t i = 0; i < p.order.size(); ++i)
    check(p.order[i] >= 0 && p.order[i] < static_cast<int64_t>(p.order.size()), "checkpoint: ", path,
          ": progress.order[", i, "] = ", p.order[i], " is not a sample index");
  // Slot i belongs to parameter i; slot1 only for the optimisers with two.
  check(static_cast<int64_t>(slot0.size()) == slots && slot1.size() <= slot0.size(), "checkpoint: ", path, ": ",
        slot0.size(), " optim.slot0 and ", slot1.size(), " optim.slot1 tensors, the header says ", slots);
  s.optim.slot1.assign(slot0.size(), Tensor());
  for (std::size_t i = 0; i < slot0.size(); ++i) {
    check(slot0[i].first == std::to_string(i), "checkpoint: ", path, ": optim.slot0/", slot0[i].first,
          " is out of order (expected ", i, ")");
    s.optim.slot0.push_back(std::move(slot0[i].second));
  }
  for (auto& [idx, t] : slot1) {
    std::size_t k = 0;
    try {
      k = std::stoul(idx);
    } catch (const std::exception&) {
      k = slot0.size();
    }
    check(k < slot0.size() && std::to_string(k) == idx, "checkpoint: ", path, ": optim.slot1/", idx,
          " names no parameter");
    s.optim.slot1[k] = std::move(t);
  }
  return c;
}

}  // namespace driftlab
