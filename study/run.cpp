#include "study/run.h"

#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "engine/build_info.h"
#include "engine/io/container.h"
#include "study/cells.h"
#include "study/files.h"

namespace driftlab {
namespace study {

namespace fs = std::filesystem;

namespace {

void write_cell_json(const Plan& p, const Cell& c, const std::string& dir) {
  nlohmann::ordered_json j = cell_json(p, c);
  j["canonical"] = c.canonical;
  write_file_atomic(cell_dir(dir, c) + "/cell.json", j.dump(2) + "\n");
}

// One line appended to the cell's attempts.txt: when, where and what (a record of every start,
// resume and end, for status and for the requeue check of the Slurm executor).
void note_attempt(const std::string& dir, const Cell& c, const std::string& what) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::ofstream f(cell_dir(dir, c) + "/attempts.txt", std::ios::app);
  f << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()
    << " " << host << " pid " << ::getpid() << " build " << build_commit() << ": " << what << "\n";
}

}  // namespace

bool run_one_cell(const Plan& p, std::size_t i, const std::string& dir, const std::function<bool()>& stop) {
  const Cell& c = p.cells.at(i);
  fs::create_directories(cell_dir(dir, c));
  write_cell_json(p, c, dir);
  const bool partial = fs::exists(cell_dir(dir, c) + "/run/checkpoint.dlc");
  note_attempt(dir, c, partial ? "start (a checkpoint is there)" : "start");
  auto it = c.params.find("threads");
  if (it != c.params.end()) omp_set_num_threads(std::stoi(it->second));
  DatasetLoader loader;
  CellOutput out;
  try {
    out = run_cell(p, i, dir, loader, stop);
  } catch (const std::exception& e) {
    note_attempt(dir, c, std::string("ended: ") + e.what());
    throw;
  }
  write_file_atomic(cell_dir(dir, c) + "/timings.json", out.timings.dump(2) + "\n");
  write_file_atomic(cell_dir(dir, c) + "/results.json", out.results.dump(2) + "\n");
  fs::remove(cell_dir(dir, c) + "/error.txt");
  note_attempt(dir, c, out.resumed ? "done (resumed from its checkpoint)" : "done");
  return out.resumed;
}

void record_failure(const std::string& dir, const Cell& c, const std::string& what) {
  fs::create_directories(cell_dir(dir, c));
  write_file_atomic(cell_dir(dir, c) + "/error.txt", what + "\n");
}

namespace {


volatile std::sig_atomic_t g_worker_stop = 0;
extern "C" void on_worker_term(int) { g_worker_stop = 1; }

// "<hash> <step> model=... policy=...": the cell's telling values, its inputs' first and kept (the
// seed and batch of an attack are its trained model's, not the attack's own defaults).
std::string describe(const Plan& p, const Cell& c) {
  std::map<std::string, std::string> shown;
  std::function<void(const Cell&)> take = [&](const Cell& x) {
    for (std::size_t in : x.inputs) take(p.cells[in]);
    for (const char* k : {"model", "policy", "batch", "seed", "scheme", "attack", "eps"}) {
      auto it = x.params.find(k);
      if (it != x.params.end() && !it->second.empty()) shown.emplace(k, it->second);
    }
  };
  take(c);
  std::string s = c.hash + " " + c.step;
  for (const char* k : {"model", "policy", "batch", "seed", "scheme", "attack", "eps"})
    if (shown.count(k)) s += " " + std::string(k) + "=" + shown[k];
  return s;
}

}  // namespace

OpenedStudy::OpenedStudy(const Plan& p, const std::string& dir, const std::vector<std::string>& reuse) {
  for (const std::string& from : reuse)
    check(fs::is_directory(from + "/cells"), "study run --reuse ", from, ": not a study folder (no cells/)");
  fs::create_directories(dir + "/cells");
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  check(fd_ >= 0, path, ": cannot open the study's lock file");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fail(dir, ": another study run is using this folder (", path, " is locked)");
  }
  write_file_atomic(dir + "/manifest.jsonl", manifest_jsonl(p));
  nlohmann::ordered_json s;
  s["study"] = p.spec.name;
  s["title"] = p.spec.title;
  s["adaptations"] = p.spec.adaptations;
  s["spec"] = p.spec.file;
  s["build"] = p.build;
  s["cells"] = p.cells.size();
  write_file_atomic(dir + "/study.json", s.dump(2) + "\n");
  for (const std::string& from : reuse) {
    if (fs::equivalent(from, dir)) continue;
    for (const Cell& c : p.cells) {
      if (cell_done(dir, c) || !cell_done(from, c)) continue;
      // The same hash is the same computation: its folder copied whole (a train cell's run with its
      // model), beside the cell's place and then renamed over whatever a partial run left there.
      const std::string dst = cell_dir(dir, c), tmp = dir + "/cells/.adopt-" + c.hash;
      fs::remove_all(tmp);
      fs::copy(cell_dir(from, c), tmp, fs::copy_options::recursive);
      fs::remove_all(dst);
      fs::rename(tmp, dst);
      note_attempt(dir, c, "adopted from " + from);
      ++adopted_;
    }
  }
}

OpenedStudy::~OpenedStudy() {
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

StudyRunResult run_study(const Plan& p, const StudyRunOptions& o) {
  check(!o.out.empty(), "study run: no output folder");
  check(o.jobs >= 1, "study run: --jobs ", o.jobs, " (at least 1)");
  const OpenedStudy opened(p, o.out, o.reuse);
  StudyRunResult r;
  r.total = p.cells.size();
  r.adopted = opened.adopted();
  enum State { waiting, running, finished, failed_state, blocked_state };
  std::vector<State> state(p.cells.size(), waiting);
  StudyProgress prog;
  prog.total = r.total;
  for (std::size_t i = 0; i < p.cells.size(); ++i)
    if (cell_done(o.out, p.cells[i])) state[i] = finished, ++r.reused;
  prog.reused = r.reused;
  double run_seconds = 0;
  auto report = [&](const std::string& event) {
    prog.event = event;
    prog.done = r.ran;
    prog.failed = r.failed;
    prog.blocked = r.blocked;
    std::size_t left = 0;
    for (State s : state) left += s == waiting || s == running;
    prog.eta_s = r.ran ? run_seconds / static_cast<double>(r.ran) * static_cast<double>(left) / o.jobs : -1;
    if (o.progress) o.progress(prog);
  };
  // A cell can start when every input finished; it is blocked when one failed or is blocked.
  auto ready = [&](std::size_t i) {
    for (std::size_t in : p.cells[i].inputs)
      if (state[in] != finished) return false;
    return true;
  };
  auto block_dependants = [&]() {
    for (std::size_t i = 0; i < p.cells.size(); ++i) {
      if (state[i] != waiting) continue;
      for (std::size_t in : p.cells[i].inputs)
        if (state[in] == failed_state || state[in] == blocked_state) {
          state[i] = blocked_state;
          ++r.blocked;
          break;
        }
    }
  };
  auto fail_cell = [&](std::size_t i, const std::string& what) {
    state[i] = failed_state;
    ++r.failed;
    r.failures.push_back(p.cells[i].hash + " " + p.cells[i].step + ": " + what);
    block_dependants();
    report("failed " + describe(p, p.cells[i]) + ": " + what);
  };
  const auto stop = [&] { return o.stop && o.stop(); };
  using clock = std::chrono::steady_clock;

  if (o.jobs == 1) {
    for (std::size_t i = 0; i < p.cells.size(); ++i) {  // inputs come first in the plan
      if (state[i] != waiting) continue;
      if (stop()) {
        r.stopped = true;
        break;
      }
      if (!ready(i)) continue;  // (blocked cells were marked when their input failed)
      state[i] = running;
      prog.running = 1;
      report("start " + describe(p, p.cells[i]));
      const auto t0 = clock::now();
      try {
        const bool resumed = run_one_cell(p, i, o.out, stop);
        state[i] = finished;
        ++r.ran;
        r.resumed += resumed;
        run_seconds += std::chrono::duration<double>(clock::now() - t0).count();
        prog.running = 0;
        report("done " + describe(p, p.cells[i]) + (resumed ? " (resumed from its checkpoint)" : ""));
      } catch (const std::exception& e) {
        prog.running = 0;
        if (stop()) {  // an interrupted train cell: its checkpoint stays for the next run
          state[i] = waiting;
          r.stopped = true;
          report("stopped " + describe(p, p.cells[i]));
          break;
        }
        record_failure(o.out, p.cells[i], e.what());
        fail_cell(i, e.what());
      }
    }
    return r;
  }

  // Worker processes: one per running cell, up to `jobs`.
  std::map<pid_t, std::pair<std::size_t, clock::time_point>> workers;
  auto launch = [&](std::size_t i) {
    const Cell& c = p.cells[i];
    fs::create_directories(cell_dir(o.out, c));
    const std::string log = cell_dir(o.out, c) + "/log.txt";
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = ::fork();
    check(pid >= 0, "study run: fork failed for cell ", c.hash);
    if (pid == 0) {
      // The worker: its output into the cell's log, SIGTERM asks its training to stop at a checkpoint.
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      std::signal(SIGTERM, on_worker_term);
      std::signal(SIGINT, SIG_IGN);  // the parent decides (it forwards SIGTERM)
      int rc = 0;
      try {
        const bool resumed = run_one_cell(p, i, o.out, [] { return g_worker_stop != 0; });
        rc = resumed ? 3 : 0;
      } catch (const std::exception& e) {
        if (g_worker_stop) {
          rc = 4;
        } else {
          try {
            record_failure(o.out, c, e.what());
          } catch (...) {
          }
          std::fprintf(stderr, "%s\n", e.what());
          rc = 1;
        }
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    workers[pid] = {i, clock::now()};
    state[i] = running;
    prog.running = workers.size();
    report("start " + describe(p, c));
  };
  for (;;) {
    if (stop() && !r.stopped) {
      r.stopped = true;
      for (const auto& w : workers) ::kill(w.first, SIGTERM);
    }
    if (!r.stopped) {
      for (std::size_t i = 0; i < p.cells.size() && static_cast<int>(workers.size()) < o.jobs; ++i)
        if (state[i] == waiting && ready(i)) launch(i);
    }
    if (workers.empty()) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      fail("study run: waitpid: ", std::strerror(errno));
    }
    auto it = workers.find(pid);
    if (it == workers.end()) continue;
    const std::size_t i = it->second.first;
    const double secs = std::chrono::duration<double>(clock::now() - it->second.second).count();
    workers.erase(it);
    prog.running = workers.size();
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 0 || code == 3) {
      state[i] = finished;
      ++r.ran;
      r.resumed += code == 3;
      run_seconds += secs;
      report("done " + describe(p, p.cells[i]) + (code == 3 ? " (resumed from its checkpoint)" : ""));
    } else if (code == 4 || (r.stopped && !WIFEXITED(status))) {
      state[i] = waiting;
      report("stopped " + describe(p, p.cells[i]));
    } else {
      std::string what = read_text(cell_dir(o.out, p.cells[i]) + "/error.txt");
      while (!what.empty() && what.back() == '\n') what.pop_back();
      if (what.empty()) what = "the worker ended with status " + std::to_string(code) + " (log: " +
                               cell_dir(o.out, p.cells[i]) + "/log.txt)";
      fail_cell(i, what);
    }
  }
  return r;
}

Plan read_plan(const std::string& dir) {
  const std::string manifest = dir + "/manifest.jsonl";
  std::ifstream f(manifest);
  check(f.good(), manifest, ": cannot read (is ", dir, " a study folder? `driftlab study run` writes it)");
  Plan p;
  std::map<std::string, std::size_t> index;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      Cell c;
      c.hash = j.at("hash").get<std::string>();
      c.step = j.at("step").get<std::string>();
      c.kind = j.at("kind").get<std::string>();
      c.params = j.at("params").get<std::map<std::string, std::string>>();
      for (const auto& h : j.at("inputs")) c.inputs.push_back(index.at(h.get<std::string>()));
      index[c.hash] = p.cells.size();
      p.cells.push_back(std::move(c));
    } catch (const std::exception& e) {
      fail(manifest, ":", n, ": not a manifest line (", e.what(), ")");
    }
  }
  p.spec.file = manifest;
  return p;
}

std::vector<CellState> study_status(const std::string& dir) {
  std::vector<CellState> out;
  for (const Cell& c : read_plan(dir).cells) {
    CellState s{c.hash, c.step, "missing", ""};
    const std::string d = cell_dir(dir, c);
    if (cell_done(dir, c)) {
      s.state = "done";
    } else if (fs::exists(d + "/error.txt")) {
      s.state = "failed";
      s.detail = read_text(d + "/error.txt");
      while (!s.detail.empty() && s.detail.back() == '\n') s.detail.pop_back();
      if (fs::exists(d + "/log.txt")) s.detail += " (log: " + d + "/log.txt)";
    } else if (fs::exists(d + "/run/checkpoint.dlc")) {
      s.state = "partial";
      s.detail = "goes on from " + d + "/run/checkpoint.dlc";
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace study
}  // namespace driftlab
