// Running a planned study (study/spec.h) into its folder with the local executor:
//
//   DIR/manifest.jsonl            the plan's cells (rewritten at each run)
//   DIR/study.json                the spec's name, title, adaptations and the build
//   DIR/cells/<hash>/cell.json    the cell: step, kind, parameters, inputs, canonical text
//   DIR/cells/<hash>/results.json what it measured (written last, atomically: a cell is done
//                                 when this file exists)
//   DIR/cells/<hash>/timings.json its times
//   DIR/cells/<hash>/error.txt    why it failed (removed when it succeeds)
//   DIR/cells/<hash>/log.txt      what a worker process printed (--jobs > 1)
//   DIR/cells/<hash>/attempts.txt every start, resume and end of the cell (time, host, pid)
//   DIR/cells/<hash>/run/...      a train cell's run folder (model.dlm, metrics, checkpoint.dlc)
//
// A cell whose results.json exists is not run again: rerunning a finished study does no work,
// and a study killed part way finishes what is missing (a train cell goes on from its
// checkpoint). A cell that fails leaves error.txt; the cells that need it are not run (blocked)
// and every other cell is. One run at a time per folder (DIR/.lock).
//
// jobs = 1 runs the cells one after another in this process, each with its `threads`. jobs > 1
// runs up to that many cells at once, each in a worker process forked from this one: the
// process that forks must not have computed anything yet (GNU OpenMP does not survive a fork
// once its thread pool exists), which holds for `driftlab study run`.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "study/spec.h"

namespace driftlab {
namespace study {

struct StudyProgress {
  std::size_t total = 0, reused = 0, done = 0, running = 0, failed = 0, blocked = 0;
  double eta_s = -1;  // from the mean time of the cells run so far; -1 until one finished
  std::string event;  // what just happened: "done <hash> <step> ...", "failed ...", "start ..."
};

struct StudyRunOptions {
  std::string out;  // the study folder
  int jobs = 1;
  std::function<void(const StudyProgress&)> progress;
  // Asked between cells and between training steps: true stops the study (a running train cell
  // at its next checkpoint); what is missing is run by the next call.
  std::function<bool()> stop;
  // Other study folders whose finished cells are taken for this study's cells of the same hash (the
  // same computation: parameters, inputs and build), copied in before anything runs.
  std::vector<std::string> reuse;
};

struct StudyRunResult {
  std::size_t total = 0;
  std::size_t reused = 0;   // done by an earlier run (results.json found), here or (adopted) in a --reuse folder
  std::size_t adopted = 0;  // of those, copied from a --reuse folder by this run
  std::size_t ran = 0;      // run now, to the end
  std::size_t resumed = 0;  // of those, train cells that went on from a checkpoint
  std::size_t failed = 0, blocked = 0;
  bool stopped = false;
  std::vector<std::string> failures;  // "<hash> <step>: <error>"
};

StudyRunResult run_study(const Plan& plan, const StudyRunOptions& options);

// How both executors start: DIR/cells made, DIR/.lock taken (one run per folder; released with the
// object; throws naming the folder when another run holds it), manifest.jsonl and study.json written.
// With `reuse`, the cells not done in DIR but done in one of those folders are then copied in
// (adopted(): how many), each through a temporary folder renamed into place.
class OpenedStudy {
 public:
  OpenedStudy(const Plan& plan, const std::string& dir, const std::vector<std::string>& reuse = {});
  std::size_t adopted() const { return adopted_; }
  ~OpenedStudy();
  OpenedStudy(const OpenedStudy&) = delete;
  OpenedStudy& operator=(const OpenedStudy&) = delete;

 private:
  int fd_ = -1;
  std::size_t adopted_ = 0;
};

// The pieces the executors share. run_one_cell runs cell i here (its inputs done): cell.json,
// then the cell, then timings.json and results.json; every start and end is a line of the cell's
// attempts.txt. Returns true when a train cell went on from its checkpoint; throws what the cell
// threw. record_failure writes its error.txt. read_plan reads DIR/manifest.jsonl back into the
// cells (no spec: what a worker on another node needs).
bool run_one_cell(const Plan& plan, std::size_t i, const std::string& dir, const std::function<bool()>& stop);
void record_failure(const std::string& dir, const Cell& c, const std::string& what);
Plan read_plan(const std::string& dir);

// Where each cell of DIR's manifest stands: done, failed (its error, and its log), partial (a train
// run with a checkpoint to go on from), or missing.
struct CellState {
  std::string hash, step, state, detail;
};
std::vector<CellState> study_status(const std::string& dir);

}  // namespace study
}  // namespace driftlab
