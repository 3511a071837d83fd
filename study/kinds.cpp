#include "study/kinds.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "engine/data/datasets.h"
#include "engine/policy.h"
#include "models/graph.h"
#include "models/models.h"

namespace driftlab {
namespace study {

namespace {

ParamDef text(const std::string& key, const std::string& fallback = "") { return {key, ParamType::text, fallback, {}, 0}; }
ParamDef integer(const std::string& key, const std::string& fallback, double min) {
  return {key, ParamType::integer, fallback, {}, min};
}
ParamDef real(const std::string& key, const std::string& fallback, double min) {
  return {key, ParamType::real, fallback, {}, min};
}
ParamDef boolean(const std::string& key, const std::string& fallback = "false") {
  return {key, ParamType::boolean, fallback, {}, 0};
}
ParamDef choice(const std::string& key, const std::string& fallback, std::vector<std::string> choices) {
  return {key, ParamType::choice, fallback, std::move(choices), 0};
}

// The data a measurement reads: "" keeps what the model was trained on (a train cell's "": the
// model's own data, model_dataset).
std::vector<ParamDef> data_params() {
  return {{"dataset", ParamType::dataset, "", {}, 0}, text("data_dir"), integer("limit", "0", 0)};
}

// The settings of an attack both the attack and the robustness kinds take ("" (no default): the
// convention's value, as `driftlab attack` fills a flag not given; study/cells.cpp attack_settings).
std::vector<ParamDef> attack_settings() {
  return {choice("convention", "driftlab", {"driftlab", "foolbox2", "foolbox3", "art", "torchattacks"}),
          real("eps", "0.1", 0), real("step", "", 0), integer("steps", "", 1),
          choice("eps_units", "", {"absolute", "fraction"}),
          choice("eps_schedule", "", {"single", "foolbox2-sweep", "foolbox2-search"}), integer("epsilons", "", 1),
          real("max_epsilon", "", 0), integer("iterations", "", 1), integer("max_directions", "", 1),
          integer("max_pixels", "", 1)};
}
std::vector<ParamDef> run_settings() {
  return {integer("seed", "1", 0), integer("batch", "128", 1), choice("device", "cpu", {"cpu", "cuda"}),
          integer("threads", "1", 1)};
}
std::vector<ParamDef> concat(const std::vector<std::vector<ParamDef>>& parts) {
  std::vector<ParamDef> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::vector<KindDef> make_table() {
  std::vector<KindDef> t;
  {
    KindDef k{"train", "a training run (driftlab train): curves per epoch, test accuracy, time per epoch, model size",
              {}, {}, 0, 0};
    k.params = {{"model", ParamType::model, "", {}, 0},
                {"policy", ParamType::policy, "torch", {}, 0},
                integer("epochs", "1", 1),
                integer("batch", "128", 1),
                choice("optimizer", "sgd", {"sgd", "adam", "rmsprop"}),
                real("lr", "0.01", 0),
                real("momentum", "", 0),
                boolean("nesterov"),
                real("weight_decay", "0", 0),
                text("schedule"),
                integer("seed", "1", 0),
                boolean("normalize"),
                boolean("step_loss"),
                choice("device", "cpu", {"cpu", "cuda"}),
                integer("threads", "1", 1),
                integer("checkpoint_every", "0", 0),
                // the weights to start from: a model file; model "graph" takes its nodes from it too
                // (driftlab import writes one). Read when the cell runs; the cell's hash covers the path.
                text("init")};
    for (const ParamDef& d : data_params()) k.params.push_back(d);
    t.push_back(k);
  }
  {
    KindDef k{"evaluate", "the test split's loss and accuracy of the model a step made", {}, {"train", "quantize"}, 1, 1};
    k.params = data_params();
    k.params.push_back(integer("batch", "1000", 1));
    k.params.push_back(choice("device", "cpu", {"cpu", "cuda"}));
    k.params.push_back(integer("threads", "1", 1));
    t.push_back(k);
  }
  {
    KindDef k{"predict_time", "the time to predict batches of the given sizes (host to host)", {}, {"train", "quantize"},
              1, 1};
    k.params = data_params();
    k.params.push_back({"sizes", ParamType::int_list, "1000,10000", {}, 1});
    k.params.push_back(choice("device", "cpu", {"cpu", "cuda"}));
    k.params.push_back(integer("threads", "1", 1));
    t.push_back(k);
  }
  {
    KindDef k{"quantize", "int8 post-training quantization of a trained model under a toolchain's scheme", {}, {"train"},
              1, 1};
    k.params = {choice("scheme", "torch_qnnpack", {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"}),
                text("knobs"),
                text("observer"),
                choice("mode", "auto", {"static", "dynamic", "auto"}),
                integer("calib", "1000", 1),
                integer("calib_batch", "32", 1)};
    for (const ParamDef& d : data_params()) k.params.push_back(d);
    t.push_back(k);
  }
  {
    KindDef k{"attack",
              "an adversarial attack on the model of its first need, judged also by the models of the others "
              "(transfer: crafted on fp32, judged on int8)",
              {}, {"train", "quantize"}, 1, 4};
    k.params = concat({{choice("attack", "fgsm", {"fgsm", "bim", "pgd", "boundary", "single-pixel"})},
                     attack_settings(),
                     {choice("eight_bit", "off", {"off", "round", "truncate"}), boolean("random_start", ""),
                      boolean("early_stop", "")},
                     run_settings(), data_params()});
    t.push_back(k);
  }
  {
    KindDef k{"robustness",
              "models under attacks over the inputs every model classifies correctly, repeated: success rates, "
              "R(m) (Guo et al.'s min-max indicator), Wilcoxon/A12 against the first model",
              {}, {"train", "quantize"}, 1, 8};
    k.gathers = true;
    k.params = concat({{text("attacks", "fgsm,bim"), integer("repeats", "3", 1), integer("samples", "0", 0)},
                     attack_settings(), run_settings(), data_params()});
    t.push_back(k);
  }
  {
    KindDef k{"drift",
              "one trained model's weights under several policies (S1's same weights in each framework): each "
              "policy's accuracy, every pair's output errors and misclassification, the first layer where they part",
              {}, {"train"}, 1, 1};
    k.params = concat({{text("policies", "tensorflow,theano,torch"), boolean("convert", "true"),
                        real("tolerance", "1e-05", 0), integer("localise_batch", "100", 1),
                        choice("device", "cpu", {"cpu", "cuda"}), integer("threads", "1", 1)},
                       data_params()});
    t.push_back(k);
  }
  {
    KindDef k{"convert",
              "the model of its first need exported to ONNX and run in ONNX Runtime beside driftlab (Openja et al.): "
              "accuracy before and after, output errors, misclassification, sizes, load and inference time; with an "
              "attack on that model as second need, its examples judged by both (S_orig, S_conv)",
              {}, {"train", "quantize"}, 1, 2};
    k.further = {"attack"};
    k.params = concat({{choice("to", "onnx", {"onnx"}), integer("opset", "13", 13),
                        choice("quant_form", "qdq", {"qdq", "qop"}), boolean("naive_pads"), boolean("naive_rnn_gates"),
                        integer("repeats", "3", 1), integer("threads", "1", 1)},
                       data_params()});
    t.push_back(k);
  }
  {
    KindDef k{"convert_robustness",
              "R(m, c) over the gathered conversions (Openja et al.): per attack |S_conv - S_orig| min-max scaled "
              "over the (model, conversion) rows, summed over the attacks",
              {}, {"convert"}, 1, 8};
    k.gathers = true;
    t.push_back(k);
  }
  return t;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool parse_long(const std::string& s, long long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

}  // namespace

std::string model_dataset(const std::string& model) {
  check(model != kGraphModelName, "model graph has no default dataset (its input shape is its file's): set dataset");
  const ModelInfo* info = nullptr;
  for (const ModelInfo& m : model_table())
    if (m.name == model) info = &m;
  check(info != nullptr, "unknown model '", model, "'");
  if (info->num_ids > 0) return "imdb";
  if (info->input_shape == Shape{1, 28, 28}) return "fashion-mnist";
  if (info->input_shape == Shape{28, 28}) return "seq-fashion-mnist";
  fail("model ", model, " has no data that installs here by default: set dataset (cifar10 with data_dir for the real "
       "CIFAR-10, or synthetic-cifar10 for times only: its labels are random)");
}

const std::vector<KindDef>& kind_table() {
  static const std::vector<KindDef> t = make_table();
  return t;
}

const KindDef* find_kind(const std::string& name) {
  for (const KindDef& k : kind_table())
    if (k.name == name) return &k;
  return nullptr;
}

const ParamDef* find_param(const KindDef& kind, const std::string& key) {
  for (const ParamDef& p : kind.params)
    if (p.key == key) return &p;
  return nullptr;
}

std::string check_value(const ParamDef& def, const std::string& value) {
  // An empty value of a parameter without a default: unset (the measurement's own choice: an
  // attack library's convention, the model's data). A model is always required.
  if (value.empty() && def.fallback.empty()) {
    check(def.type != ParamType::model, def.key, ": a model name is required");
    return value;
  }
  switch (def.type) {
    case ParamType::text: return value;
    case ParamType::integer: {
      long long v = 0;
      check(parse_long(value, &v), def.key, ": '", value, "' is not an integer");
      check(static_cast<double>(v) >= def.min, def.key, ": ", v, " is below ", def.min);
      return std::to_string(v);
    }
    case ParamType::real: {
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(value.c_str(), &end);
      check(!value.empty() && errno == 0 && end == value.c_str() + value.size() && std::isfinite(v), def.key, ": '",
            value, "' is not a finite number");
      check(v >= def.min, def.key, ": ", value, " is below ", def.min);
      // The shortest form that reads back as the same double: 0.1, not 0.10000000000000001.
      for (int prec = 1;; ++prec) {
        std::ostringstream os;
        os.precision(prec);
        os << v;
        if (std::strtod(os.str().c_str(), nullptr) == v || prec >= 17) return os.str();
      }
    }
    case ParamType::boolean:
      if (value == "true" || value == "false") return value;
      fail(def.key, ": '", value, "' is not true or false");
    case ParamType::choice:
      for (const std::string& c : def.choices)
        if (c == value) return value;
      fail(def.key, ": '", value, "' is not one of ", join(def.choices));
    case ParamType::policy:
      try {
        return Policy::parse(value).to_string();
      } catch (const Error& e) {
        fail("policy '", value, "': ", e.what());
      }
    case ParamType::model: {
      if (value == kGraphModelName) return value;  // an imported graph: its nodes come from init (checked when built)
      std::vector<std::string> names;
      for (const ModelInfo& m : model_table()) {
        if (m.name == value) return value;
        names.push_back(m.name);
      }
      fail(def.key, ": unknown model '", value, "' (known: ", join(names), ", and graph with init: a graph model file)");
    }
    case ParamType::dataset:
      for (const std::string& d : dataset_names())
        if (d == value) return value;
      fail(def.key, ": unknown dataset '", value, "' (known: ", join(dataset_names()), ")");
    case ParamType::int_list: {
      std::string out, item;
      std::istringstream is(value);
      int count = 0;
      while (std::getline(is, item, ',')) {
        long long v = 0;
        check(parse_long(item, &v) && v >= def.min, def.key, ": '", item, "' in '", value,
              "' is not an integer >= ", def.min);
        out += (count++ ? "," : "") + std::to_string(v);
      }
      check(count > 0, def.key, ": an empty list");
      return out;
    }
  }
  fail(def.key, ": unknown parameter type");
}

}  // namespace study
}  // namespace driftlab
