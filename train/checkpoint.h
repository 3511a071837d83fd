// The checkpoint of a training run (RUN_DIR/checkpoint.dlc): everything `driftlab train --resume
// RUN_DIR` needs to go on as if the run had never stopped, so that it ends with the same bytes in
// model.dlm. Version 1, all integers little-endian:
//   offset 0   8 bytes   magic "DLCKPT\r\n" (the line ending catches a text-mode copy)
//   offset 8   uint32    format version (1)
//   offset 12  uint64    H, length of the JSON header
//   offset 20  H bytes   JSON: spec (model, canonical policy, data, train config with optimiser,
//                        schedule, seed, batch, epochs; normalize, device, init, checkpoint_every),
//                        threads, init (where the first weights came from), state (epoch, step,
//                        both RNG streams as text, schedule state, optimiser counters, the epoch
//                        under way: next batch, loss/correct/skipped sums, elapsed time, its stats
//                        so far), epochs (the finished epochs' stats), resumed (earlier resumptions),
//                        tensors [{name, dtype, shape, offset, nbytes}]
//   then       tensor data back to back in header order: "model/<name>" for every parameter then
//              every buffer (Sequential's names), "optim.slot0/<i>" and "optim.slot1/<i>" per
//              parameter once the optimiser has stepped, "progress.order" (int64, the epoch's
//              sample order) while an epoch is under way
//   last 4     uint32    CRC-32 (zlib) of every byte before it
// Doubles that can be NaN or infinite (a skipped epoch's loss, the plateau schedule's best) are
// written as "nan" / "inf" / "-inf"; the others as JSON numbers, which round-trip exactly.
// Written with write_file_atomic (temporary in the same folder, fsync, rename): a kill at any
// moment leaves the previous checkpoint whole.
#pragma once
#include <functional>
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/run.h"

namespace driftlab {

constexpr uint32_t kCheckpointVersion = 1;
constexpr const char* kCheckpointFile = "checkpoint.dlc";

struct Checkpoint {
  TrainRunSpec spec;      // spec.out is not saved: the run folder is where the file lies
  int threads = 0;        // CPU threads the run computes with (results are reproducible per count)
  nlohmann::json init;    // run_training's init record (null: the model's own initialisation)
  std::vector<std::pair<std::string, Tensor>> tensors;  // the model's parameters, then its buffers
  TrainState state;
  std::vector<EpochStats> epochs;  // finished epochs
  nlohmann::json resumed = nlohmann::json::array();  // [{from_epoch, from_step}] of earlier resumptions
};

// The bytes of a checkpoint file, and the file written atomically (halfway: write_file_atomic's
// test hook).
std::string checkpoint_bytes(const Checkpoint& c);
void write_checkpoint(const std::string& path, const Checkpoint& c, const std::function<void()>& halfway = {});

// Throws naming the file and the offset on a bad magic, version, size, CRC, header field or
// tensor: "checkpoint: RUN/checkpoint.dlc: CRC mismatch at offset 8012 (file is corrupt or truncated)".
Checkpoint read_checkpoint(const std::string& path);
// The same from a stream (the fuzz target's entry); `path` names it in the errors.
Checkpoint read_checkpoint(std::istream& in, const std::string& path);

// The run spec as the checkpoint's header holds it, and back (throws naming the field).
nlohmann::json train_spec_json(const TrainRunSpec& spec);
TrainRunSpec train_spec_from_json(const nlohmann::json& j);

}  // namespace driftlab
