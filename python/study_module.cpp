// The Python module's study calls (study/: the runner `driftlab study` drives): plan, run, status,
// each step's table, and the report folder.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/build_info.h"
#include "python/module_common.h"
#include "study/report.h"
#include "study/report_files.h"
#include "study/run.h"
#include "study/spec.h"

namespace driftlab {
namespace pymodule {
namespace {


study::Plan plan_of(const std::string& spec, bool any_build) {
  return study::plan(study::read_spec(spec), any_build ? "any" : build_commit());
}

py::list study_plan_py(const std::string& spec, bool any_build) {
  const study::Plan p = plan_of(spec, any_build);
  py::list out;
  for (const study::Cell& c : p.cells) out.append(from_json(study::cell_json(p, c).dump()));
  return out;
}

py::dict study_run_py(const std::string& spec, const std::string& out, int jobs, bool any_build,
                      const std::vector<std::string>& reuse, const py::object& on_progress) {
  const study::Plan p = plan_of(spec, any_build);
  ::setenv("DRIFTLAB_ORT_DIR", ort_dir().c_str(), /*overwrite=*/0);  // convert cells run ONNX Runtime from there
  study::StudyRunOptions o;
  o.out = out;
  o.jobs = jobs;
  o.reuse = reuse;
  Interrupt stop;
  o.stop = [&stop] { return stop.check(); };
  if (!on_progress.is_none())
    o.progress = [&stop, on_progress](const study::StudyProgress& g) {
      stop.call([&] {
        py::dict d;
        d["total"] = g.total;
        d["reused"] = g.reused;
        d["done"] = g.done;
        d["running"] = g.running;
        d["failed"] = g.failed;
        d["blocked"] = g.blocked;
        d["eta_s"] = g.eta_s;
        d["event"] = g.event;
        on_progress(d);
      });
    };
  study::StudyRunResult r;
  {
    py::gil_scoped_release nogil;
    r = study::run_study(p, o);
  }
  raise_if_stopped(stop, "driftlab.study_run: stopped; run it again to finish " + out);
  py::dict d;
  d["total"] = r.total;
  d["reused"] = r.reused;
  d["adopted"] = r.adopted;
  d["ran"] = r.ran;
  d["resumed"] = r.resumed;
  d["failed"] = r.failed;
  d["blocked"] = r.blocked;
  d["failures"] = r.failures;
  return d;
}

py::list study_status_py(const std::string& dir) {
  py::list out;
  for (const study::CellState& c : study::study_status(dir)) {
    py::dict d;
    d["hash"] = c.hash;
    d["step"] = c.step;
    d["state"] = c.state;
    d["detail"] = c.detail;
    out.append(d);
  }
  return out;
}

// Each step's table as `driftlab study report` groups it: rows of settings with mean, sd and n of
// every measure over the seeds.
py::list study_tables_py(const std::string& dir) {
  py::list out;
  for (const study::ReportTable& t : study::study_tables(dir)) {
    py::dict d;
    d["step"] = t.step;
    d["kind"] = t.kind;
    d["keys"] = t.keys;
    d["measures"] = t.measures;
    d["cells"] = t.cells;
    d["missing"] = t.missing;
    py::list rows;
    for (const study::ReportRow& r : t.rows) {
      py::dict row;
      for (std::size_t k = 0; k < t.keys.size(); ++k) row[py::str(t.keys[k])] = r.values[k];
      for (const study::Stat& s : r.stats)
        if (s.n > 0) row[py::str(s.measure)] = py::dict(py::arg("mean") = s.mean, py::arg("sd") = s.sd, py::arg("n") = s.n);
      row["seeds"] = r.seeds;
      rows.append(row);
    }
    d["rows"] = rows;
    out.append(d);
  }
  return out;
}

// The report folder (driftlab study report): tables, figures, index.html; with explain, the gaps'
// explanation studies run first (Ctrl-C stops them at a checkpoint: run it again to finish).
py::dict study_report_py(const std::string& dir, const std::string& out, bool figures, bool explain, int jobs) {
  study::ReportOptions o;
  o.out = out;
  o.figures = figures;
  o.explain = explain;
  o.jobs = jobs;
  Interrupt stop;
  o.stop = [&stop] { return stop.check(); };
  study::ReportFiles f;
  try {
    py::gil_scoped_release nogil;
    f = study::write_report(dir, o);
  } catch (const Error&) {
    raise_if_stopped(stop, "driftlab.study_report: stopped; run it again to finish the explanation studies in " + dir +
                               "/explain");
    throw;
  }
  py::dict d;
  d["out"] = f.out;
  d["markdown"] = f.markdown;
  d["figures"] = f.figures;
  d["files"] = f.files;
  return d;
}

}  // namespace

void bind_study(py::module_& m) {
  m.def("study_plan", &study_plan_py, py::arg("spec"), py::arg("any_build") = false,
        "A study spec's cells (each as its cell.json: hash, step, kind, parameters, inputs), as `driftlab study plan` "
        "lists them; a bad spec raises driftlab.Error naming the file and line.");
  m.def("study_run", &study_run_py, py::arg("spec"), py::arg("out"), py::arg("jobs") = 1, py::arg("any_build") = false,
        py::arg("reuse") = std::vector<std::string>{}, py::arg("on_progress") = py::none(),
        "Runs a study's cells into `out` as `driftlab study run` does (cells already done are kept); "
        "on_progress(dict) after each event; Ctrl-C stops it (run it again to finish). Returns the counts.");
  m.def("study_status", &study_status_py, py::arg("dir"), "Where each cell stands: done, failed, partial, missing.");
  m.def("study_tables", &study_tables_py, py::arg("dir"),
        "Each step's table as `driftlab study report` groups it: settings, then mean/sd/n of each measure over seeds.");
  m.def("study_report", &study_report_py, py::arg("dir"), py::arg("out") = "", py::arg("figures") = true,
        py::arg("explain") = false, py::arg("jobs") = 1,
        "Writes a study's report as `driftlab study report` does (out: default DIR/report): tables.md/.csv/.json, "
        "the figures (SVG and PNG, figures=False: none) and index.html; explain=True first runs each gap's "
        "explanation study (one knob flipped at a time) into DIR/explain/. Returns {out, markdown, figures, files}.");
}

}  // namespace pymodule
}  // namespace driftlab
