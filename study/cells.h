// What one study cell computes, through the library face (driftlab/*.h): each kind of step as a
// request built from the cell's resolved parameters. A cell writes only inside its own folder
// (a train cell's run, a quantize cell's int8 model) and returns two JSON objects: `results`,
// what it measured (the same bytes on every machine that computes the same bits: no times, no
// paths), and `timings` (seconds, images per second).
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/data/datasets.h"
#include "study/spec.h"

namespace driftlab {
namespace study {

struct CellOutput {
  nlohmann::ordered_json results, timings;
  bool resumed = false;  // a train cell that went on from its checkpoint
};

// The folder of cell i under the study folder: DIR/cells/<hash>.
std::string cell_dir(const std::string& study_dir, const Cell& c);
// A cell is done when its results.json is in place (written last, atomically).
bool cell_done(const std::string& study_dir, const Cell& c);
// The model file a train or quantize cell leaves in its folder (what cells that need it read).
std::string cell_model(const std::string& study_dir, const Cell& c);

// Runs cell `i` of the plan (its inputs finished) in DIR/cells/<hash>. A train cell whose run
// folder holds a checkpoint goes on from it (driftlab/train.h resume). `stop` is asked between
// training steps: true ends a train cell at its next checkpoint (CellOutput is then not complete:
// the caller sees TrainRunResult::interrupted as an Error "interrupted").
CellOutput run_cell(const Plan& plan, std::size_t i, const std::string& study_dir, DatasetLoader& loader,
                    const std::function<bool()>& stop = {});

}  // namespace study
}  // namespace driftlab
