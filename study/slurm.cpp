#include "study/slurm.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "engine/io/container.h"
#include "engine/io/shell.h"
#include "study/cells.h"

namespace driftlab {
namespace study {

namespace fs = std::filesystem;

namespace {

bool has_failed(const std::string& dir, const Cell& c) { return fs::exists(cell_dir(dir, c) + "/error.txt"); }

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  check(!ec, "study run --executor slurm: cannot find this program (/proc/self/exe): ", ec.message());
  return p.string();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

StudyRunResult run_study_slurm(const Plan& p, const StudyRunOptions& o, const SlurmOptions& so) {
  check(so.cells_per_task >= 1, "study run: --cells-per-task ", so.cells_per_task, " (at least 1)");
  check(!o.out.empty(), "study run: no output folder");
  const OpenedStudy opened(p, o.out, o.reuse);  // held until the jobs are collected
  const std::string dir = fs::absolute(o.out).string();
  StudyRunResult r;
  r.total = p.cells.size();
  r.adopted = opened.adopted();
  std::vector<int> level(p.cells.size(), 0);
  int levels = 0;
  std::vector<bool> was_done(p.cells.size());
  for (std::size_t i = 0; i < p.cells.size(); ++i) {
    for (std::size_t in : p.cells[i].inputs) level[i] = std::max(level[i], level[in] + 1);
    was_done[i] = cell_done(dir, p.cells[i]);
    r.reused += was_done[i];
    if (!was_done[i]) levels = std::max(levels, level[i] + 1);
  }
  fs::create_directories(dir + "/slurm");
  const std::string exe = so.driftlab.empty() ? self_exe() : so.driftlab;
  std::vector<std::string> jobs;
  for (int L = 0; L < levels; ++L) {
    std::vector<std::size_t> todo;
    int threads = 1;
    for (std::size_t i = 0; i < p.cells.size(); ++i)
      if (level[i] == L && !was_done[i]) {
        todo.push_back(i);
        auto it = p.cells[i].params.find("threads");
        if (it != p.cells[i].params.end()) threads = std::max(threads, std::stoi(it->second));
      }
    if (todo.empty()) continue;
    std::ostringstream tasks;
    int n_tasks = 0;
    for (std::size_t k = 0; k < todo.size(); k += static_cast<std::size_t>(so.cells_per_task), ++n_tasks) {
      for (std::size_t j = k; j < std::min(todo.size(), k + static_cast<std::size_t>(so.cells_per_task)); ++j)
        tasks << (j > k ? " " : "") << p.cells[todo[j]].hash;
      tasks << "\n";
    }
    const std::string base = dir + "/slurm/level-" + std::to_string(L);
    write_file_atomic(base + ".tasks", tasks.str());
    std::ostringstream sh;
    sh << "#!/bin/sh\n"
       << "# driftlab study: level " << L << " of " << p.spec.name << " (" << todo.size() << " cells in " << n_tasks
       << " tasks)\n"
       << "#SBATCH --job-name=dl-" << p.spec.name << "-" << L << "\n"
       << "#SBATCH --array=0-" << n_tasks - 1 << (so.max_parallel > 0 ? "%" + std::to_string(so.max_parallel) : "")
       << "\n"
       << "#SBATCH --output=" << base << "-%a.out\n"
       << "#SBATCH --open-mode=append\n"
       << "#SBATCH --requeue\n"
       << "#SBATCH --cpus-per-task=" << threads << "\n";
    if (!so.partition.empty()) sh << "#SBATCH --partition=" << so.partition << "\n";
    sh << "exec " << shell_quoted(exe) << " study worker " << shell_quoted(dir) << " --tasks "
       << shell_quoted(base + ".tasks") << " --task \"$SLURM_ARRAY_TASK_ID\"\n";
    write_file_atomic(base + ".sh", sh.str());
    std::string cmd = "sbatch --parsable";
    if (!jobs.empty()) cmd += " --dependency=afterany:" + jobs.back();
    if (!so.extra.empty()) cmd += " " + so.extra;
    cmd += " " + shell_quoted(base + ".sh") + " 2>&1";
    int rc = 0;
    const std::string said = trim(run_capture(cmd, &rc));
    check(rc == 0 && !said.empty() && said.find_first_not_of("0123456789;") == std::string::npos,
          "study run --executor slurm: ", cmd, " said: ", said);
    const std::string job = said.substr(0, said.find(';'));
    jobs.push_back(job);
    std::ofstream(dir + "/slurm/jobs.txt", std::ios::app) << "level " << L << " job " << job << " tasks " << base
                                                          << ".tasks\n";
    if (so.on_submit) so.on_submit(job, L);
    if (o.progress) {
      StudyProgress g;
      g.total = r.total;
      g.reused = r.reused;
      g.event = "submitted level " + std::to_string(L) + ": job " + job + ", " + std::to_string(todo.size()) +
                " cells in " + std::to_string(n_tasks) + " tasks (" + base + ".sh)";
      o.progress(g);
    }
  }
  // Follow the jobs until none is pending or running.
  std::string ids;
  for (const std::string& j : jobs) ids += (ids.empty() ? "" : ",") + j;
  while (!jobs.empty()) {
    if (o.stop && o.stop()) {
      int rc = 0;
      run_capture("scancel " + ids + " 2>&1", &rc);
      r.stopped = true;
      break;
    }
    int rc = 0;
    const std::string q = trim(run_capture("squeue -h -j " + ids + " -o %i 2>&1", &rc));
    if (rc != 0 && q.find("Invalid job id") == std::string::npos)
      fail("study run --executor slurm: squeue -j ", ids, " said: ", q);
    if (rc != 0 || q.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(so.poll_seconds * 1000)));
  }
  // Collect from the files.
  for (std::size_t i = 0; i < p.cells.size(); ++i) {
    if (was_done[i]) continue;
    const Cell& c = p.cells[i];
    if (cell_done(dir, c)) {
      ++r.ran;
      std::ifstream a(cell_dir(dir, c) + "/attempts.txt");
      std::string line, last;
      while (std::getline(a, line)) last = line;
      r.resumed += last.find("resumed") != std::string::npos;
    } else if (has_failed(dir, c)) {
      ++r.failed;
      std::ifstream e(cell_dir(dir, c) + "/error.txt");
      std::string what;
      std::getline(e, what);
      r.failures.push_back(c.hash + " " + c.step + ": " + what);
    } else {
      ++r.blocked;
    }
  }
  return r;
}

int run_worker(const std::string& dir, const std::string& tasks_file, int task, const std::function<bool()>& stop) {
  const Plan p = read_plan(dir);
  std::ifstream f(tasks_file);
  check(f.good(), tasks_file, ": cannot read");
  std::string line;
  for (int n = 0; std::getline(f, line); ++n)
    if (n == task) break;
  check(f.good() || !line.empty(), tasks_file, ": no task ", task);
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < p.cells.size(); ++i) index[p.cells[i].hash] = i;
  std::istringstream hashes(line);
  int failed = 0;
  for (std::string h; hashes >> h;) {
    auto it = index.find(h);
    check(it != index.end(), tasks_file, ": task ", task, " names cell ", h, ", which ", dir,
          "/manifest.jsonl does not hold");
    const Cell& c = p.cells[it->second];
    if (cell_done(dir, c)) continue;
    bool inputs_done = true;
    for (std::size_t in : c.inputs) inputs_done = inputs_done && cell_done(dir, p.cells[in]);
    if (!inputs_done) {
      std::printf("cell %s (%s): an input is not done (failed or blocked): not run\n", c.hash.c_str(), c.step.c_str());
      continue;
    }
    std::printf("cell %s (%s): start\n", c.hash.c_str(), c.step.c_str());
    std::fflush(stdout);
    try {
      const bool resumed = run_one_cell(p, it->second, dir, stop);
      std::printf("cell %s: done%s\n", c.hash.c_str(), resumed ? " (resumed from its checkpoint)" : "");
    } catch (const std::exception& e) {
      if (stop && stop()) {
        std::printf("cell %s: stopped at a checkpoint (%s)\n", c.hash.c_str(), e.what());
        return failed;  // requeued or cancelled: the next start goes on from the checkpoint
      }
      record_failure(dir, c, e.what());
      std::printf("cell %s: failed: %s\n", c.hash.c_str(), e.what());
      ++failed;
    }
    std::fflush(stdout);
    if (stop && stop()) break;
  }
  return failed;
}

}  // namespace study
}  // namespace driftlab
