#include "engine/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace driftlab {

namespace {

const char* kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::step: return "step";
    case ScheduleKind::multistep: return "multistep";
    case ScheduleKind::exponential: return "exponential";
    case ScheduleKind::inverse_time: return "inverse_time";
    case ScheduleKind::plateau: return "plateau";
  }
  return "?";
}

double number(const std::string& field, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  check(!v.empty() && end == v.c_str() + v.size() && std::isfinite(d), "schedule: ", field, "='", v,
        "' is not a number");
  return d;
}

int64_t integer(const std::string& field, const std::string& v) {
  const double d = number(field, v);
  check(d == std::floor(d) && d >= 0 && d < 1e15, "schedule: ", field, "='", v, "' is not a whole number >= 0");
  return static_cast<int64_t>(d);
}

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(17);
  for (int p = 1; p <= 17; ++p) {
    std::ostringstream t;
    t.precision(p);
    t << v;
    if (std::strtod(t.str().c_str(), nullptr) == v) return t.str();
  }
  os << v;
  return os.str();
}

}  // namespace

ScheduleSpec parse_schedule(const std::string& text) {
  ScheduleSpec s;
  if (text.empty() || text == "constant") return s;
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  bool known = false;
  for (ScheduleKind k : {ScheduleKind::constant, ScheduleKind::step, ScheduleKind::multistep,
                         ScheduleKind::exponential, ScheduleKind::inverse_time, ScheduleKind::plateau})
    if (kind == kind_name(k)) s.kind = k, known = true;
  check(known, "schedule: unknown schedule '", kind,
        "' (known: constant, step, multistep, exponential, inverse_time, plateau)");
  bool have_step = false, have_milestones = false, have_decay = false;
  std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  std::stringstream fields(rest);
  std::string item;
  while (std::getline(fields, item, ',')) {
    const std::size_t eq = item.find('=');
    check(eq != std::string::npos, "schedule: '", item, "' in '", text, "' is not field=value");
    const std::string f = item.substr(0, eq), v = item.substr(eq + 1);
    const bool sme = s.kind == ScheduleKind::step || s.kind == ScheduleKind::multistep ||
                     s.kind == ScheduleKind::exponential;
    if (f == "step" && s.kind == ScheduleKind::step) {
      s.step_size = integer(f, v), have_step = true;
      check(s.step_size >= 1, "schedule: step=", v, " must be >= 1");
    } else if (f == "milestones" && s.kind == ScheduleKind::multistep) {
      std::stringstream ms(v);
      std::string m;
      while (std::getline(ms, m, ';')) s.milestones.push_back(integer("milestones", m));
      check(!s.milestones.empty() && std::is_sorted(s.milestones.begin(), s.milestones.end()) &&
                std::adjacent_find(s.milestones.begin(), s.milestones.end()) == s.milestones.end(),
            "schedule: milestones=", v, " must be increasing numbers separated by ';'");
      have_milestones = true;
    } else if (f == "gamma" && sme) {
      s.gamma = number(f, v);
      check(s.gamma > 0, "schedule: gamma=", v, " must be > 0");
    } else if (f == "every" && sme) {
      check(v == "epoch" || v == "batch", "schedule: every=", v, " must be epoch or batch");
      s.per_batch = v == "batch";
    } else if (f == "decay" && s.kind == ScheduleKind::inverse_time) {
      s.decay = number(f, v), have_decay = true;
      check(s.decay >= 0, "schedule: decay=", v, " must be >= 0");
    } else if (s.kind == ScheduleKind::plateau && f == "factor") {
      s.factor = number(f, v);
      check(s.factor > 0 && s.factor < 1, "schedule: factor=", v, " must be in (0,1)");
    } else if (s.kind == ScheduleKind::plateau && f == "patience") {
      s.patience = integer(f, v);
    } else if (s.kind == ScheduleKind::plateau && f == "threshold") {
      s.threshold = number(f, v);
      check(s.threshold >= 0, "schedule: threshold=", v, " must be >= 0");
    } else if (s.kind == ScheduleKind::plateau && f == "cooldown") {
      s.cooldown = integer(f, v);
    } else if (s.kind == ScheduleKind::plateau && f == "min_lr") {
      s.min_lr = number(f, v);
      check(s.min_lr >= 0, "schedule: min_lr=", v, " must be >= 0");
    } else {
      fail("schedule: '", kind, "' has no field '", f,
           "' (step: step, gamma, every; multistep: milestones, gamma, every; exponential: gamma, every; "
           "inverse_time: decay; plateau: factor, patience, threshold, cooldown, min_lr)");
    }
  }
  check(s.kind != ScheduleKind::step || have_step, "schedule: step needs step=N (epochs between decays)");
  check(s.kind != ScheduleKind::multistep || have_milestones, "schedule: multistep needs milestones=A;B;...");
  check(s.kind != ScheduleKind::inverse_time || have_decay, "schedule: inverse_time needs decay=D");
  return s;
}

std::string schedule_string(const ScheduleSpec& s) {
  std::ostringstream os;
  os << kind_name(s.kind);
  const std::string every = s.per_batch ? ",every=batch" : "";
  switch (s.kind) {
    case ScheduleKind::constant: break;
    case ScheduleKind::step: os << ":step=" << s.step_size << ",gamma=" << fmt(s.gamma) << every; break;
    case ScheduleKind::multistep: {
      os << ":milestones=";
      for (std::size_t i = 0; i < s.milestones.size(); ++i) os << (i ? ";" : "") << s.milestones[i];
      os << ",gamma=" << fmt(s.gamma) << every;
      break;
    }
    case ScheduleKind::exponential: os << ":gamma=" << fmt(s.gamma) << every; break;
    case ScheduleKind::inverse_time: os << ":decay=" << fmt(s.decay); break;
    case ScheduleKind::plateau:
      os << ":factor=" << fmt(s.factor) << ",patience=" << s.patience << ",threshold=" << fmt(s.threshold)
         << ",cooldown=" << s.cooldown << ",min_lr=" << fmt(s.min_lr);
      break;
  }
  return os.str();
}

LrSchedule::LrSchedule(const ScheduleSpec& spec, double base_lr, const Policy& policy)
    : spec_(spec), base_(base_lr), rule_(policy.plateau_rule), precision_(policy.optim_scalar_precision) {
  check(base_lr > 0, "schedule: the base rate ", base_lr, " must be > 0");
  st_.lr = round(base_lr);
  st_.best = std::numeric_limits<double>::infinity();
}

double LrSchedule::round(double v) const {
  return precision_ == ScalarPrecision::float32 ? double(static_cast<float>(v)) : v;
}

double LrSchedule::lr() const {
  if (spec_.kind != ScheduleKind::inverse_time) return st_.lr;
  // Keras 2.2.4: lr * (1. / (1. + self.decay * K.cast(self.iterations, K.dtype(self.decay))))
  if (precision_ == ScalarPrecision::float32) {
    const float it = static_cast<float>(st_.steps);
    return double(float(base_) * (1.0f / (1.0f + float(spec_.decay) * it)));
  }
  return base_ * (1.0 / (1.0 + spec_.decay * static_cast<double>(st_.steps)));
}

void LrSchedule::tick(int64_t count) {
  switch (spec_.kind) {
    case ScheduleKind::step:  // StepLR.get_lr: lr * gamma when last_epoch % step_size == 0
      if (count % spec_.step_size == 0) st_.lr = round(st_.lr * spec_.gamma);
      break;
    case ScheduleKind::multistep: {  // MultiStepLR.get_lr: lr * gamma ** (times count is a milestone)
      const auto hits = std::count(spec_.milestones.begin(), spec_.milestones.end(), count);
      if (hits) st_.lr = round(st_.lr * std::pow(spec_.gamma, static_cast<double>(hits)));
      break;
    }
    case ScheduleKind::exponential: st_.lr = round(st_.lr * spec_.gamma); break;
    default: break;
  }
}

void LrSchedule::after_step() {
  ++st_.steps;
  if (spec_.per_batch) tick(st_.steps);
}

void LrSchedule::after_epoch(double val_loss) {
  ++st_.epochs;
  if (!spec_.per_batch) tick(st_.epochs);
  if (spec_.kind != ScheduleKind::plateau) return;
  check(!std::isnan(val_loss), "schedule: plateau watches the validation loss, and epoch ", st_.epochs,
        " has none");
  if (rule_ == PlateauRule::torch) {
    // lr_scheduler.py ReduceLROnPlateau.step (mode='min', threshold_mode='rel'), eps 1e-8
    if (val_loss < st_.best * (1.0 - spec_.threshold)) {
      st_.best = val_loss;
      st_.bad = 0;
    } else {
      ++st_.bad;
    }
    if (st_.cooldown > 0) {
      --st_.cooldown;
      st_.bad = 0;
    }
    if (st_.bad > spec_.patience) {
      const double next = std::max(st_.lr * spec_.factor, spec_.min_lr);
      if (st_.lr - next > 1e-8) st_.lr = round(next);
      st_.cooldown = spec_.cooldown;
      st_.bad = 0;
    }
    return;
  }
  // keras/callbacks.py@2.2.4 ReduceLROnPlateau.on_epoch_end (mode 'auto' on val_loss: min)
  if (st_.cooldown > 0) {
    --st_.cooldown;
    st_.bad = 0;
  }
  if (val_loss < st_.best - spec_.threshold) {
    st_.best = val_loss;
    st_.bad = 0;
  } else if (st_.cooldown == 0) {
    if (++st_.bad >= spec_.patience) {
      const double old = double(static_cast<float>(st_.lr));  // K.get_value of a float32 variable
      if (old > spec_.min_lr) {
        st_.lr = round(std::max(old * spec_.factor, spec_.min_lr));
        st_.cooldown = spec_.cooldown;
        st_.bad = 0;
      }
    }
  }
}

}  // namespace driftlab
