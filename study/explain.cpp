#include "study/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/error.h"
#include "engine/knob_gates.h"
#include "engine/policy.h"
#include "models/models.h"
#include "study/kinds.h"

namespace driftlab {
namespace study {

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
bool starts(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string quoted(const std::string& v) {
  std::string q = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string fmt(double v, const char* f) {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

const std::string& param_or(const std::map<std::string, std::string>& p, const std::string& k, const std::string& d) {
  auto it = p.find(k);
  return it == p.end() ? d : it->second;
}

}  // namespace

std::vector<std::string> relevant_knobs(const std::string& model, const std::string& from, const std::string& to,
                                        const std::map<std::string, std::string>& train_params) {
  const Policy pa = Policy::parse(from), pb = Policy::parse(to);
  const Model m = build_model(model, pa, 1);
  const bool has_bn = !m.net->named_buffers().empty();
  const bool recurrent = m.input_shape.size() == 2;  // (steps, features): the LSTM/GRU models
  const bool embedding = m.num_ids > 0;
  // The layer kinds in the model: its layers' and, inside residual blocks, its parameters' ("3.
  // residual.main.0.conv2d.weight"). A knob of a layer the model does not have cannot act.
  std::set<std::string> kinds;
  for (std::size_t i = 0; i < m.net->size(); ++i) kinds.insert(m.net->layer(i).kind());
  for (const auto& [name, p] : m.net->named_params()) {
    std::istringstream parts(name);
    for (std::string part; std::getline(parts, part, '.');) kinds.insert(part);
  }
  static const std::string none;
  const std::string& optimizer = param_or(train_params, "optimizer", none);
  const std::string& schedule = param_or(train_params, "schedule", none);
  const std::string& device = param_or(train_params, "device", none);
  const std::string& wd = param_or(train_params, "weight_decay", none);
  const bool decay = !wd.empty() && std::stod(wd) != 0.0;
  std::vector<std::string> out;
  for (const KnobDiff& d : diff(pa, pb)) {
    const std::string& k = d.knob;
    const std::string& group = knob_info(k).group;
    if (group == "quant") continue;                         // int8 knobs act on quantization, not training
    if (knob_inert(k, pa) && knob_inert(k, pb)) continue;   // its mechanism is off on both sides
    if (group == "cuda" && device != "cuda") continue;
    const bool rnn_knob = group == "recurrent" || k == "math_rnn" || starts(k, "hard_sigmoid") || starts(k, "rnn_") ||
                          starts(k, "lstm_") || starts(k, "gru_");
    if (rnn_knob && !recurrent) continue;
    const bool conv_knob = starts(k, "conv_") || k == "model_conv_padding";
    if (conv_knob && !kinds.count("conv2d")) continue;      // conv_same_pad, conv_kernel_flip, conv_backend, ...
    if (k == "flatten_order" && !kinds.count("flatten")) continue;
    if (starts(k, "gru_") && !kinds.count("gru")) continue;
    if (starts(k, "lstm_") && !kinds.count("lstm")) continue;
    if (group == "batchnorm" && !has_bn) continue;
    if (starts(k, "embedding") && !embedding) continue;
    if (has(k, "nan")) continue;                            // rules for NaN inputs: no effect on finite training
    if (starts(k, "adam") && optimizer != "adam") continue;
    if (starts(k, "rmsprop") && optimizer != "rmsprop") continue;
    if (k == "optim_square_order" && optimizer != "adam" && optimizer != "rmsprop") continue;
    if (k == "sgd_form" && optimizer != "sgd") continue;
    if (starts(k, "plateau") && !has(schedule, "plateau")) continue;
    if (starts(k, "weight_decay") && !decay) continue;
    out.push_back(k);
  }
  return out;
}

std::string explain_spec(const Spec& spec, const std::string& step_name, const std::string& from,
                         const std::string& to, const std::vector<std::string>& knobs_given, const std::string& model) {
  const StepSpec* step = nullptr;
  for (const StepSpec& s : spec.steps)
    if (s.name == step_name) step = &s;
  check(step != nullptr, spec.file, ": no step '", step_name, "'");
  check(step->kind == "train", spec.file, ":", step->line, ": step '", step_name, "' is a ", step->kind,
        " step; explain takes a train step");
  // The model: the step's one model (grid or set), else the spec's default.
  std::vector<std::string> models;
  for (const auto& [k, vals] : step->grid)
    if (k == "model")
      for (const SpecValue& v : vals) models.push_back(v.text);
  if (step->set.count("model")) models.push_back(step->set.at("model").text);
  if (models.empty() && spec.defaults.count("model")) models.push_back(spec.defaults.at("model").text);
  if (!model.empty()) {
    check(std::find(models.begin(), models.end(), model) != models.end(), spec.file, ":", step->line, ": step '",
          step_name, "' does not train ", model);
    models = {model};
  }
  check(models.size() == 1, spec.file, ":", step->line, ": step '", step_name, "' trains ", models.size(),
        " models; explain one model at a time (set: {model: ...})");
  std::map<std::string, std::string> params;
  for (const ParamDef& d : find_kind("train")->params) params[d.key] = d.fallback;
  for (const auto& [k, v] : spec.defaults) params[k] = v.text;
  for (const auto& [k, v] : step->set) params[k] = v.text;
  const std::vector<std::string> knobs = knobs_given.empty() ? relevant_knobs(models[0], from, to, params) : knobs_given;
  const Policy pa = Policy::parse(from), pb = Policy::parse(to);
  std::vector<std::string> policies = {from, to};
  for (const std::string& k : knobs) {
    knob_info(k);  // throws naming the knobs when it is none
    check(pa.get(k) != pb.get(k), "explain: ", k, " is ", pa.get(k), " under both ", from, " and ", to);
    policies.push_back(from + "," + k + "=" + pb.get(k));
    policies.push_back(to + "," + k + "=" + pa.get(k));
  }
  std::ostringstream y;
  y << "# Written by driftlab study explain: step '" << step_name << "' of " << spec.file << ", " << from
    << " against " << to << ",\n# each of " << knobs.size()
    << " knobs flipped one at a time from either side. Run it into the study's folder.\n";
  y << "study: " << quoted(spec.name + "-explain") << "\n";
  y << "title: " << quoted("Which knob moves " + step_name + " from " + from + " to " + to) << "\n";
  if (!spec.adaptations.empty()) {
    y << "adaptations:\n";
    for (const std::string& a : spec.adaptations) y << "  - " << quoted(a) << "\n";
  }
  if (!spec.defaults.empty()) {
    y << "defaults:\n";
    for (const auto& [k, v] : spec.defaults) y << "  " << k << ": " << quoted(v.text) << "\n";
  }
  y << "steps:\n  " << step_name << ":\n    do: train\n    grid:\n      policy:\n";
  for (const std::string& p : policies) y << "        - " << quoted(p) << "\n";
  for (const auto& [k, vals] : step->grid) {
    if (k == "policy") continue;
    if (k == "model") {
      y << "      model: [" << quoted(models[0]) << "]\n";
      continue;
    }
    y << "      " << k << ": [";
    for (std::size_t i = 0; i < vals.size(); ++i) y << (i ? ", " : "") << quoted(vals[i].text);
    y << "]\n";
  }
  if (!step->set.empty()) {
    y << "    set:\n";
    for (const auto& [k, v] : step->set) y << "      " << k << ": " << quoted(v.text) << "\n";
  }
  // The steps downstream of the train step, as written (an attack on each model, its int8 models,
  // their conversions): their gaps get explained too. Not a step that gathers (a table over the
  // presets' models would mix the one-knob variants into it), nor one needing a step left out.
  std::set<std::string> copied = {step_name};
  for (const StepSpec& s : spec.steps) {  // in dependency order
    if (copied.count(s.name) || !s.gather.empty() || s.needs.empty()) continue;
    bool all_in = true;
    for (const SpecValue& n : s.needs) all_in = all_in && copied.count(n.text) > 0;
    if (!all_in) continue;
    copied.insert(s.name);
    y << "  " << s.name << ":\n    do: " << s.kind << "\n    needs: [";
    for (std::size_t i = 0; i < s.needs.size(); ++i) y << (i ? ", " : "") << s.needs[i].text;
    y << "]\n";
    if (!s.grid.empty()) {
      y << "    grid:\n";
      for (const auto& [k, vals] : s.grid) {
        y << "      " << k << ": [";
        for (std::size_t i = 0; i < vals.size(); ++i) y << (i ? ", " : "") << quoted(vals[i].text);
        y << "]\n";
      }
    }
    if (!s.set.empty()) {
      y << "    set:\n";
      for (const auto& [k, v] : s.set) y << "      " << k << ": " << quoted(v.text) << "\n";
    }
  }
  return y.str();
}

std::vector<GapExplanation> explain_shares(const std::vector<ReportTable>& tables) {
  std::vector<GapExplanation> out;
  for (const ReportTable& t : tables)
    for (const std::string& m : explained_measures(t.kind)) {
      std::vector<GapExplanation> g = explain_shares(t, m);
      out.insert(out.end(), g.begin(), g.end());
    }
  return out;
}

std::vector<GapToExplain> gaps_to_explain(const Plan& plan, const std::vector<ReportTable>& tables) {
  std::vector<GapToExplain> out;
  for (const ReportTable& t : tables) {
    // the training's policy key, and the train step it belongs to
    const std::size_t ki = training_key(t);
    if (ki == t.keys.size()) continue;
    const std::string train = t.keys[ki] == "policy" ? t.step : t.keys[ki].substr(0, t.keys[ki].size() - 7);
    const Cell* any = nullptr;
    for (const Cell& c : plan.cells)
      if (c.step == train) any = &c;
    if (!any || any->kind != "train") continue;
    // the model: the row's (model or TRAIN.model), else the step's one model
    std::size_t mk = t.keys.size();
    for (std::size_t k = 0; k < t.keys.size(); ++k)
      if (t.keys[k] == (train == t.step ? std::string("model") : train + ".model")) mk = k;
    for (const std::string& m : explained_measures(t.kind)) {
      const auto mit = std::find(t.measures.begin(), t.measures.end(), m);
      if (mit == t.measures.end()) continue;
      const std::size_t mi = static_cast<std::size_t>(mit - t.measures.begin());
      for (std::size_t a = 0; a < t.rows.size(); ++a)
        for (std::size_t b = a + 1; b < t.rows.size(); ++b) {
          const ReportRow &ra = t.rows[a], &rb = t.rows[b];
          if (has(ra.values[ki], ",") || has(rb.values[ki], ",")) continue;
          bool rest = true;
          for (std::size_t k = 0; k < t.keys.size(); ++k)
            if (k != ki && ra.values[k] != rb.values[k]) rest = false;
          const Stat &sa = ra.stats[mi], &sb = rb.stats[mi];
          if (!rest || sa.n < 2 || sb.n < 2) continue;
          if (std::fabs(sa.mean - sb.mean) <= std::sqrt(sa.sd * sa.sd + sb.sd * sb.sd)) continue;
          GapToExplain g{train, mk < t.keys.size() ? ra.values[mk] : any->params.at("model"), ra.values[ki],
                         rb.values[ki]};
          bool seen = false;
          for (const GapToExplain& x : out) seen = seen || (x.step == g.step && x.model == g.model && x.a == g.a && x.b == g.b);
          if (!seen) out.push_back(g);
        }
    }
  }
  return out;
}

std::vector<std::string> explained_measures(const std::string& kind) {
  if (kind == "train") return {"test accuracy", "final train loss"};  // the accuracy and the loss curve's end
  if (kind == "evaluate") return {"test accuracy"};
  if (kind == "quantize") return {"int8 test accuracy"};
  if (kind == "attack") return {"success rate", "success rate on correct"};
  if (kind == "convert") return {"misclassification"};
  return {};
}

std::vector<GapExplanation> explain_shares(const ReportTable& t, const std::string& measure) {
  std::vector<GapExplanation> out;
  {
    // the training's policy: the step's own, or that of the model it measures (train.policy)
    const std::size_t ki = training_key(t);
    const auto mit = std::find(t.measures.begin(), t.measures.end(), measure);
    if (ki == t.keys.size() || mit == t.measures.end()) return out;
    const std::size_t mi = static_cast<std::size_t>(mit - t.measures.begin());
    auto rest_equal = [&](const ReportRow& x, const ReportRow& y) {
      for (std::size_t k = 0; k < t.keys.size(); ++k)
        if (k != ki && x.values[k] != y.values[k]) return false;
      return true;
    };
    for (const ReportRow& ra : t.rows)
      for (const ReportRow& rb : t.rows) {
        const std::string &a = ra.values[ki], &b = rb.values[ki];
        // Two presets as such (no knob of their own), each pair once, in table order.
        if (&ra >= &rb || has(a, ",") || has(b, ",") || !rest_equal(ra, rb)) continue;
        const Stat &sa = ra.stats[mi], &sb = rb.stats[mi];
        if (sa.n == 0 || sb.n == 0) continue;
        GapExplanation g;
        g.step = t.step;
        g.measure = measure;
        g.a = a;
        g.b = b;
        for (std::size_t k = 0; k < t.keys.size(); ++k)
          if (k != ki) g.within += (g.within.empty() ? "" : ", ") + t.keys[k] + "=" + ra.values[k];
        g.mean_a = sa.mean, g.mean_b = sb.mean, g.sd_a = sa.sd, g.sd_b = sb.sd;
        g.gap_beyond_spread = std::fabs(sb.mean - sa.mean) > std::sqrt(sa.sd * sa.sd + sb.sd * sb.sd);
        const Policy pa = Policy::parse(a), pb = Policy::parse(b);
        for (const ReportRow& rv : t.rows) {
          if (!rest_equal(rv, ra) || rv.stats[mi].n == 0) continue;
          const Policy pv = Policy::parse(rv.values[ki]);
          for (int side = 0; side < 2; ++side) {
            const Policy& base = side == 0 ? pa : pb;
            const Policy& other = side == 0 ? pb : pa;
            const std::vector<KnobDiff> d = diff(base, pv);
            if (d.size() != 1 || other.get(d[0].knob) != d[0].b) continue;
            const Stat& sv = rv.stats[mi];
            const Stat& ss = side == 0 ? sa : sb;
            KnobShare s;
            s.knob = d[0].knob;
            s.side = side == 0 ? a : b;
            s.mean = sv.mean, s.sd = sv.sd, s.n = sv.n;
            const double gap = sb.mean - sa.mean;
            s.share = gap == 0 ? 0 : (side == 0 ? (sv.mean - sa.mean) / gap : (sb.mean - sv.mean) / gap);
            s.beyond_spread = std::fabs(sv.mean - ss.mean) > std::sqrt(ss.sd * ss.sd + sv.sd * sv.sd);
            g.shares.push_back(s);
          }
        }
        if (!g.shares.empty()) out.push_back(g);
      }
  }
  return out;
}

std::string explain_markdown(const std::vector<GapExplanation>& es) {
  std::ostringstream os;
  if (es.empty()) return "";
  os << "## Explanations (one knob flipped at a time)\n\n";
  for (const GapExplanation& g : es) {
    os << "- **" << g.measure << (g.within.empty() ? "" : ", " + g.within) << ": " << g.a << " " << fmt(g.mean_a, "%.4f")
       << ", " << g.b << " " << fmt(g.mean_b, "%.4f") << "** (gap " << fmt(g.mean_b - g.mean_a, "%+.4f") << ", "
       << (g.gap_beyond_spread ? "beyond" : "within") << " the seeds' spread). ";
    std::vector<std::string> moving, still;
    std::map<std::string, std::string> moves;
    for (const KnobShare& s : g.shares) {
      (s.beyond_spread ? moving : still).push_back(s.knob);
      moves[s.knob] += (moves[s.knob].empty() ? "" : ", ") + std::string("from ") + s.side + "'s side " +
                       fmt(100 * s.share, "%.0f%%");
    }
    auto uniq = [](std::vector<std::string> v) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      return v;
    };
    moving = uniq(moving);
    still = uniq(still);
    still.erase(std::remove_if(still.begin(), still.end(),
                               [&](const std::string& k) { return std::count(moving.begin(), moving.end(), k) > 0; }),
                still.end());
    if (!g.gap_beyond_spread)
      os << "The gap is within the seeds' spread: noise across seeds explains it as well as any knob";
    if (moving.empty()) {
      os << (g.gap_beyond_spread ? "No single knob moves it beyond the seeds' spread (knobs may act together)" : "")
         << ".";
    } else {
      os << (g.gap_beyond_spread ? "Moved" : "; yet moved") << " beyond the seeds' spread by ";
      for (std::size_t i = 0; i < moving.size(); ++i) {
        os << (i ? "; " : "") << "`" << moving[i] << "` (" << moves[moving[i]] << "; `driftlab explain " << moving[i]
           << "`)";
        // A knob of the random group draws other random numbers (init, shuffle, dropout): its move is
        // that of another set of seeds, which a few seeds do not average out.
        if (knob_info(moving[i]).group == "random") os << " [re-draws the random numbers: read it as other seeds]";
      }
      os << ".";
    }
    if (!still.empty()) {
      os << " Within the spread: ";
      for (std::size_t i = 0; i < still.size(); ++i) os << (i ? ", " : "") << still[i];
      os << ".";
    }
    os << "\n";
  }
  os << "\nShare of the gap a knob moves: from A's side (m(A with B's value) - m(A)) / (m(B) - m(A)), from B's side "
        "(m(B) - m(B with A's value)) / (m(B) - m(A)); beyond the seeds' spread when the move exceeds sqrt(sd^2 + "
        "sd^2) of the two rows.\n\n";
  return os.str();
}

}  // namespace study
}  // namespace driftlab
