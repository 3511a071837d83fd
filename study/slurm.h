// The Slurm executor (docs/STUDIES.md, "On a cluster"): a planned study's cells as sbatch job
// arrays on a shared folder. The cells are cut into levels (a cell's level is one more than its
// inputs' highest), each level one job array whose tasks take `cells_per_task` cells each, every
// array after the previous one (--dependency=afterany: a failed cell blocks only its dependants,
// which its worker finds and records). Each task runs `driftlab study worker DIR --tasks FILE
// --task N`, which reads the manifest and runs its cells through the library face as the local
// executor does (study/run.h run_one_cell): a cell already done is skipped, a train cell goes on
// from its checkpoint. Arrays are submitted with --requeue: a task that Slurm preempts or
// requeues is started again and resumes; SIGTERM (what Slurm sends first) stops a train cell at
// its next step with a checkpoint. The submitting process follows the jobs with squeue until
// none is left, then counts the cells from their files: the folder holds the results, so
// collecting twice gives the same answer. The submitting process holds the folder's lock
// (study/run.h OpenedStudy) from the manifest to the collection.
#pragma once
#include <functional>
#include <string>

#include "study/run.h"

namespace driftlab {
namespace study {

struct SlurmOptions {
  int cells_per_task = 1;
  int max_parallel = 0;           // --array=0-N%P (0: Slurm's own limit)
  std::string partition;          // "": the default partition
  std::string driftlab;           // the binary the tasks run ("": this process's, /proc/self/exe)
  std::string extra;              // more sbatch options, e.g. "--gres=gpu:1 --time=02:00:00"
  double poll_seconds = 2;
  // Called with each submitted array's job id and level (a test requeues a task by it).
  std::function<void(const std::string& job, int level)> on_submit;
};

StudyRunResult run_study_slurm(const Plan& plan, const StudyRunOptions& options, const SlurmOptions& slurm);

// A task of an array: runs the cells on line `task` (0-based) of `tasks_file`, skipping those
// done and recording as failed those whose inputs are not done. `stop` as in StudyRunOptions.
// Returns the number of its cells that failed.
int run_worker(const std::string& dir, const std::string& tasks_file, int task, const std::function<bool()>& stop);

}  // namespace study
}  // namespace driftlab
