// Learning-rate schedules: the rate of each optimiser step, moved per epoch or per batch the way
// each framework moves it (docs/TRAINING.md has each formula and its source):
//   constant
//   step:step=S,gamma=G         torch StepLR: lr *= G after every S epochs (chained, in double)
//   multistep:milestones=A;B,gamma=G   torch MultiStepLR: lr *= G after epochs A, B, ...
//   exponential:gamma=G         torch ExponentialLR: lr *= G after every epoch
//   inverse_time:decay=D        Keras's `decay`: lr_t = lr * (1 / (1 + D*iterations)) every batch,
//                               iterations = steps taken before this one
//   plateau:factor=F,patience=P,threshold=T,cooldown=C,min_lr=M
//                               ReduceLROnPlateau on the validation loss, under the Policy's
//                               plateau_rule (torch or keras conventions)
// step, multistep and exponential take every=batch to count batches instead of epochs.
// Rates are formed in the Policy's optim_scalar_precision (float32: Keras's graph variables).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/policy.h"

namespace driftlab {

enum class ScheduleKind { constant, step, multistep, exponential, inverse_time, plateau };

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::constant;
  int64_t step_size = 1;                  // step
  std::vector<int64_t> milestones;        // multistep, increasing
  double gamma = 0.1;                     // step, multistep, exponential
  double decay = 0;                       // inverse_time
  double factor = 0.1, threshold = 1e-4, min_lr = 0;  // plateau
  int64_t patience = 10, cooldown = 0;    // plateau
  bool per_batch = false;                 // every=batch
};
// "step:step=30,gamma=0.1"; throws naming the bad field ("schedule: ..."). "" or "constant": none.
ScheduleSpec parse_schedule(const std::string& text);
std::string schedule_string(const ScheduleSpec& s);  // canonical, parse_schedule's inverse

// What a checkpoint saves of a schedule.
struct ScheduleState {
  double lr = 0;
  int64_t epochs = 0, steps = 0;  // epochs ended, steps taken
  double best = 0;                // plateau: best validation loss so far (inf at the start)
  int64_t bad = 0, cooldown = 0;  // plateau: bad (torch) / waiting (Keras) epochs, cooldown left
};

class LrSchedule {
 public:
  LrSchedule(const ScheduleSpec& spec, double base_lr, const Policy& policy);
  // The rate of the next optimiser step.
  double lr() const;
  void after_step();                      // one optimiser step taken
  void after_epoch(double val_loss);      // an epoch ended (val_loss: NaN when there is none)
  bool needs_validation() const { return spec_.kind == ScheduleKind::plateau; }
  const ScheduleSpec& spec() const { return spec_; }
  ScheduleState state() const { return st_; }
  void set_state(const ScheduleState& s) { st_ = s; }

 private:
  void tick(int64_t count);  // step / multistep / exponential after `count` epochs or batches
  double round(double v) const;  // to the scalar precision
  ScheduleSpec spec_;
  double base_;
  PlateauRule rule_;
  ScalarPrecision precision_;
  ScheduleState st_;
};

}  // namespace driftlab
