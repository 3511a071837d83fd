// driftlab study plan / kinds: a study spec's cells and their hashes (study/spec.h), and the kinds
// of step a spec can use with their parameters (study/kinds.h).
#include "cli/commands.h"
#include "cli/common.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/build_info.h"
#include "engine/io/container.h"
#include "study/db.h"
#include "study/explain.h"
#include "study/figures.h"
#include "study/files.h"
#include "study/kinds.h"
#include "study/report.h"
#include "study/report_files.h"
#include "study/run.h"
#include "study/slurm.h"
#include "study/spec.h"

namespace driftlab {
namespace cli {
namespace {

// The build a plan's hashes include: this binary's commit, or "any" under --any-build (cells
// computed by other builds are then reused; each cell's attempts.txt names the build that ran it).
std::string hash_build(bool any) { return any ? "any" : build_commit(); }

void study_plan(const std::string& spec_path, const std::string& manifest, bool any_build) {
  const study::Plan p = study::plan(study::read_spec(spec_path), hash_build(any_build));
  std::map<std::string, int> per_step;
  for (const study::Cell& c : p.cells) ++per_step[c.step];
  std::cout << "study " << p.spec.name << (p.spec.title.empty() ? "" : ": " + p.spec.title) << "\n"
            << p.cells.size() << " cells in " << p.spec.steps.size() << " steps (build " << p.build << ")\n";
  std::size_t name_w = 0, kind_w = 0;  // the columns as wide as their longest entry
  for (const study::StepSpec& s : p.spec.steps) {
    name_w = std::max(name_w, s.name.size());
    kind_w = std::max(kind_w, s.kind.size());
  }
  for (const study::StepSpec& s : p.spec.steps) {
    std::cout << "  " << std::left << std::setw(static_cast<int>(name_w + 2)) << s.name
              << std::setw(static_cast<int>(kind_w + 2)) << s.kind << std::right << std::setw(6)
              << per_step[s.name] << " cells";
    for (std::size_t i = 0; i < s.needs.size(); ++i) std::cout << (i ? ", " : "  needs ") << s.needs[i].text;
    std::cout << "\n";
  }
  if (manifest.empty()) return;
  write_file_atomic(manifest, study::manifest_jsonl(p));
  std::cout << "manifest: " << manifest << "\n";
}

const char* type_name(study::ParamType t) {
  switch (t) {
    case study::ParamType::text: return "text";
    case study::ParamType::integer: return "integer";
    case study::ParamType::real: return "number";
    case study::ParamType::boolean: return "true|false";
    case study::ParamType::choice: return "one of";
    case study::ParamType::policy: return "policy string";
    case study::ParamType::model: return "model name";
    case study::ParamType::dataset: return "dataset name";
    case study::ParamType::int_list: return "integers, comma-separated";
  }
  return "";
}

void study_kinds() {
  for (const study::KindDef& k : study::kind_table()) {
    std::cout << k.name << ": " << k.what << "\n";
    if (k.max_needs) {
      std::cout << "  needs " << k.min_needs;
      if (k.max_needs != k.min_needs) std::cout << " to " << k.max_needs;
      std::cout << " step(s) of kind";
      for (std::size_t i = 0; i < k.inputs.size(); ++i) std::cout << (i ? " or " : " ") << k.inputs[i];
      std::cout << "\n";
    }
    for (const study::ParamDef& d : k.params) {
      std::cout << "  " << std::left << std::setw(18) << d.key << type_name(d.type);
      for (std::size_t i = 0; i < d.choices.size(); ++i) std::cout << (i ? "|" : " ") << d.choices[i];
      std::cout << "  (default: " << (d.fallback.empty() ? "unset" : d.fallback) << ")\n";
    }
  }
}

std::string eta(double s) {
  if (s < 0) return "";
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, ", ETA %.0f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, ", ETA %.0f min", s / 60);
  else std::snprintf(buf, sizeof buf, ", ETA %.1f h", s / 3600);
  return buf;
}

struct RunArgs {
  std::string spec, out;
  int jobs = 1;
  bool quiet = false;
  bool any_build = false;
  std::vector<std::string> reuse;
  std::string executor = "local";
  study::SlurmOptions slurm;
};

// A study's convert cells run ONNX Runtime from DRIFTLAB_ORT_DIR (study/cells.cpp): this command's
// folder for it unless the environment names one (workers, local or Slurm, inherit it).
void export_ort_dir() { ::setenv("DRIFTLAB_ORT_DIR", ort_dir().c_str(), /*overwrite=*/0); }

int study_run(const RunArgs& a) {
  const study::Plan p = study::plan(study::read_spec(a.spec), hash_build(a.any_build));
  export_ort_dir();
  study::StudyRunOptions o;
  o.out = a.out;
  o.jobs = a.jobs;
  o.reuse = a.reuse;
  if (!a.quiet)
    o.progress = [](const study::StudyProgress& g) {
      std::cerr << "[" << g.reused + g.done << "/" << g.total << " done, " << g.running << " running, " << g.failed
                << " failed" << (g.blocked ? ", " + std::to_string(g.blocked) + " blocked" : "") << eta(g.eta_s)
                << "] " << g.event << "\n";
    };
  // SIGINT / SIGTERM stop the study at its cells' next checkpoint (the next run finishes what is
  // missing). Not restarted, so that the wait for workers sees the signal; a second one does not
  // kill this process (its workers would be left behind).
  study::StudyRunResult r;
  int stopped_by = 0;
  {
    const StopSignals signals(/*restart=*/false, /*second_kills=*/false);
    o.stop = [] { return StopSignals::caught() != 0; };
    if (a.executor == "slurm")
      r = study::run_study_slurm(p, o, a.slurm);
    else
      r = study::run_study(p, o);
    stopped_by = StopSignals::caught();
  }
  const int collected = study::collect_results(a.out);
  std::cout << "study " << p.spec.name << " in " << a.out << ": " << r.total << " cells: " << r.reused
            << " done before" << (r.adopted ? " (" + std::to_string(r.adopted) + " taken from --reuse folders)" : "")
            << ", " << r.ran << " run now (" << r.resumed << " resumed from a checkpoint), " << r.failed
            << " failed, " << r.blocked << " blocked by a failed input"
            << (r.stopped ? "; stopped by a signal: run it again to finish" : "") << "\n";
  for (const std::string& f : r.failures) std::cout << "  failed: " << f << "\n";
  std::cout << "results: " << a.out << "/results.sqlite (" << collected << " cells; `driftlab study query`)\n";
  if (r.stopped) return stopped_by == SIGINT ? 130 : 143;
  return r.failed ? 1 : 0;
}

void study_status(const std::string& dir) {
  std::map<std::string, std::map<std::string, int>> per_step;  // step -> state -> count
  std::vector<std::string> steps;
  std::vector<study::CellState> failed;
  for (const study::CellState& s : study::study_status(dir)) {
    if (!per_step.count(s.step)) steps.push_back(s.step);
    ++per_step[s.step][s.state];
    if (s.state == "failed" || s.state == "partial") failed.push_back(s);
  }
  for (const std::string& st : steps) {
    std::cout << std::left << std::setw(16) << st;
    for (const char* k : {"done", "partial", "failed", "missing"}) std::cout << " " << k << " " << per_step[st][k];
    std::cout << "\n";
  }
  for (const study::CellState& s : failed) std::cout << "  " << s.state << " " << s.hash << " " << s.step << ": " << s.detail << "\n";
}

// study report: the library's report folder (study/report_files.h), its tables printed; SIGINT /
// SIGTERM stop the explanation studies at their cells' next checkpoint.
void study_report(const std::string& dir, const std::string& out, bool figures, bool explain, int jobs) {
  study::ReportOptions o;
  o.out = out;
  o.figures = figures;
  o.explain = explain;
  o.jobs = jobs;
  o.stop = [] { return StopSignals::caught() != 0; };
  o.note = [](const std::string& line) { std::cerr << line << "\n"; };
  study::ReportFiles f;
  {
    const StopSignals signals(/*restart=*/false, /*second_kills=*/false);
    f = study::write_report(dir, o);
  }
  std::cout << f.markdown << "written: " << f.out << "/index.html, tables.md, tables.csv, tables.json";
  for (const std::string& fig : f.figures) std::cout << ", " << fig << " (and .png)";
  std::cout << "\n";
}

}  // namespace

void register_study(CLI::App& app) {
  auto* st = app.add_subcommand("study", "studies: a spec's grid of measurements, its cells and their hashes");
  st->require_subcommand(1);
  auto* pl = st->add_subcommand("plan", "read a study spec, check it, and list its cells (with --manifest: one JSON line per cell)");
  auto spec = std::make_shared<std::string>(), manifest = std::make_shared<std::string>();
  pl->add_option("spec", *spec, "the study spec (YAML, docs/STUDIES.md)")->required();
  pl->add_option("--manifest", *manifest, "write the cells here: hash, step, kind, params, inputs");
  auto plan_any = std::make_shared<bool>(false);
  pl->add_flag("--any-build", *plan_any, "leave the build out of the cells' hashes (see study run)");
  pl->callback([spec, manifest, plan_any] { study_plan(*spec, *manifest, *plan_any); });
  auto* run = st->add_subcommand("run", "run a study's cells into a folder; cells already done are not run again");
  auto ra = std::make_shared<RunArgs>();
  run->add_option("spec", ra->spec, "the study spec (YAML)")->required();
  run->add_option("--out", ra->out, "the study folder (docs/STUDIES.md: its layout)")->required();
  run->add_option("--reuse", ra->reuse, "another study folder whose finished cells of the same hash this study takes "
                 "(copied in, not run again; with --any-build on both runs, across builds); repeatable");
  run->add_option("--jobs", ra->jobs, "cells at once, each in a worker process")->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_flag("--quiet", ra->quiet, "no progress lines");
  run->add_flag("--any-build", ra->any_build,
                "leave the build (commit) out of the cells' hashes, so that cells another build computed are "
                "reused (long studies across code changes; each cell's attempts.txt names its build)");
  run->callback([ra] {
    const int code = study_run(*ra);
    if (code != 0) throw ExitStatus{code};
  });
  run->add_option("--executor", ra->executor, "local (this machine) | slurm (sbatch job arrays on a shared folder)")
      ->check(CLI::IsMember({"local", "slurm"}))->capture_default_str();
  run->add_option("--cells-per-task", ra->slurm.cells_per_task, "slurm: cells per array task")
      ->check(CLI::PositiveNumber)->capture_default_str();
  run->add_option("--max-parallel", ra->slurm.max_parallel, "slurm: at most this many tasks at once (--array=...%P)");
  run->add_option("--partition", ra->slurm.partition, "slurm: the partition");
  run->add_option("--sbatch", ra->slurm.extra, "slurm: more sbatch options, e.g. \"--gres=gpu:1 --time=02:00:00\"");
  auto* worker = st->add_subcommand("worker", "(what a Slurm array task runs) the cells of one task of a study");
  auto wa = std::make_shared<std::tuple<std::string, std::string, int>>();
  worker->add_option("dir", std::get<0>(*wa), "the study folder")->required();
  worker->add_option("--tasks", std::get<1>(*wa), "the array's task file (one line of cell hashes per task)")->required();
  worker->add_option("--task", std::get<2>(*wa), "the task's line, from 0 ($SLURM_ARRAY_TASK_ID)")->required();
  worker->callback([wa] {
    // SIGTERM (Slurm's requeue and preemption) stops the task's cell at its next checkpoint.
    const StopSignals signals(/*restart=*/false, /*second_kills=*/false);
    export_ort_dir();
    const int failed = study::run_worker(std::get<0>(*wa), std::get<1>(*wa), std::get<2>(*wa),
                                         [] { return StopSignals::caught() != 0; });
    if (failed) throw ExitStatus{1};
  });
  auto* ex = st->add_subcommand("explain", "write a spec that flips each knob where two presets differ, one at a "
                                            "time from either side, on one train step (run it into the same folder; "
                                            "the report then says which knob moves the gap)");
  auto ea = std::make_shared<std::array<std::string, 6>>();  // spec, step, from, to, knobs, out
  ex->add_option("spec", (*ea)[0], "the study spec")->required();
  ex->add_option("--step", (*ea)[1], "its train step")->required();
  ex->add_option("--from", (*ea)[2], "the first preset (policy string)")->required();
  ex->add_option("--to", (*ea)[3], "the second")->required();
  ex->add_option("--knobs", (*ea)[4], "comma-separated knobs (default: every knob that can act on that training)");
  ex->add_option("--out", (*ea)[5], "write the spec here (default: standard output)");
  ex->callback([ea] {
    std::vector<std::string> knobs;
    std::stringstream ks((*ea)[4]);
    for (std::string k; std::getline(ks, k, ',');)
      if (!k.empty()) knobs.push_back(k);
    const std::string y = study::explain_spec(study::read_spec((*ea)[0]), (*ea)[1], (*ea)[2], (*ea)[3], knobs);
    if ((*ea)[5].empty()) {
      std::cout << y;
    } else {
      write_file_atomic((*ea)[5], y);
      std::cout << "written: " << (*ea)[5] << "\n";
    }
  });
  auto* collect = st->add_subcommand("collect", "rebuild DIR/results.sqlite from the cells' files");
  auto cdir = std::make_shared<std::string>();
  collect->add_option("dir", *cdir, "the study folder")->required();
  collect->callback([cdir] {
    std::cout << study::collect_results(*cdir) << " cells in " << *cdir << "/results.sqlite\n";
  });
  auto* query = st->add_subcommand("query", "one SQL statement on DIR/results.sqlite (read-only), tab-separated");
  auto qa = std::make_shared<std::pair<std::string, std::string>>();
  query->add_option("dir", qa->first, "the study folder")->required();
  query->add_option("sql", qa->second, "e.g. \"SELECT step, state, count(*) FROM cells GROUP BY 1, 2\"")->required();
  query->callback([qa] {
    const study::QueryResult q = study::query_results(qa->first, qa->second);
    for (std::size_t i = 0; i < q.columns.size(); ++i) std::cout << (i ? "\t" : "") << q.columns[i];
    std::cout << "\n";
    for (const auto& row : q.rows) {
      for (std::size_t i = 0; i < row.size(); ++i) std::cout << (i ? "\t" : "") << row[i];
      std::cout << "\n";
    }
  });
  auto* status = st->add_subcommand("status", "where each step's cells stand in a study folder");
  auto sdir = std::make_shared<std::string>();
  status->add_option("dir", *sdir, "the study folder")->required();
  status->callback([sdir] { study_status(*sdir); });
  auto* rep = st->add_subcommand("report", "each step's cells grouped by what varies, mean +- sd over the seeds");
  auto rdir = std::make_shared<std::string>(), rout = std::make_shared<std::string>();
  rep->add_option("dir", *rdir, "the study folder")->required();
  rep->add_option("--out", *rout, "where the tables go (default: DIR/report)");
  auto nofig = std::make_shared<bool>(false), rexplain = std::make_shared<bool>(false);
  auto rjobs = std::make_shared<int>(1);
  rep->add_flag("--no-figures", *nofig, "tables and page only (no matplotlib)");
  rep->add_flag("--explain", *rexplain, "for each gap beyond the seeds' spread between two presets, run the study "
                "that flips each knob one at a time (`study explain`'s spec, into DIR/explain/..., the study's own "
                "cells taken from DIR) and say which knobs move it");
  rep->add_option("--jobs", *rjobs, "--explain: cells at once")->check(CLI::PositiveNumber);
  rep->callback([rdir, rout, nofig, rexplain, rjobs] { study_report(*rdir, *rout, !*nofig, *rexplain, *rjobs); });
  auto* kinds = st->add_subcommand("kinds", "the kinds of step a spec can use and the parameters of each");
  kinds->callback([] { study_kinds(); });
}

}  // namespace cli
}  // namespace driftlab
