#include "study/report_files.h"

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include "core/error.h"
#include "engine/io/container.h"
#include "study/explain.h"
#include "study/figures.h"
#include "study/files.h"
#include "study/report.h"
#include "study/run.h"
#include "study/spec.h"

namespace driftlab {
namespace study {
namespace {

// Each gap's explanation study, run and reported in DIR/explain/<slug>; their shares.
std::vector<GapExplanation> run_explanations(const std::string& dir, const std::vector<ReportTable>& t,
                                             const ReportOptions& o) {
  const nlohmann::json sj = read_json_if_any(dir + "/study.json");
  check(!sj.is_null(), dir, "/study.json: cannot read the study (run it first)");
  check(sj.is_object() && sj.contains("spec") && sj["spec"].is_string() && sj.contains("build") &&
            sj["build"].is_string(),
        dir, "/study.json: names no spec or build");
  const std::string spec_path = sj["spec"].get<std::string>(), build = sj["build"].get<std::string>();
  check(std::filesystem::exists(spec_path), "study report --explain: the study's spec ", spec_path, " (from ", dir,
        "/study.json) is not there: run the report from the folder the study was run from");
  const Spec spec = read_spec(spec_path);
  std::vector<GapExplanation> out;
  for (const GapToExplain& g : gaps_to_explain(read_plan(dir), t)) {
    std::string slug = g.step + "-" + g.model + "-" + g.a + "-" + g.b;
    for (char& c : slug)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
    const std::string sub = dir + "/explain/" + slug;
    std::filesystem::create_directories(sub);
    const std::string yaml = explain_spec(spec, g.step, g.a, g.b, {}, g.model);
    write_file_atomic(sub + "/spec.yaml", yaml);
    const Plan p = plan(parse_spec(yaml, sub + "/spec.yaml"), build);
    if (o.note)
      o.note("explain: " + g.step + " " + g.model + ", " + g.a + " against " + g.b + ": " +
             std::to_string(p.cells.size()) + " cells in " + sub);
    StudyRunOptions ro;
    ro.out = sub;
    ro.jobs = o.jobs;
    ro.reuse = {dir};
    ro.stop = o.stop;
    const StudyRunResult r = run_study(p, ro);
    check(!r.stopped, "study report --explain: stopped (run it again to finish ", sub, ")");
    check(r.failed == 0 && r.blocked == 0, "study report --explain: ", r.failed, " cells of ", sub,
          " failed (`driftlab study status ", sub, "`)");
    ReportOptions plain;
    plain.out = sub;
    plain.figures = o.figures;
    write_report(sub, plain);
    const std::vector<GapExplanation> e = explain_shares(study_tables(sub));
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

}  // namespace

ReportFiles write_report(const std::string& dir, const ReportOptions& o) {
  ReportFiles f;
  f.out = o.out.empty() ? dir + "/report" : o.out;
  const std::vector<ReportTable> t = study_tables(dir);
  std::filesystem::create_directories(f.out);
  std::vector<Comparison> cmp = study_comparisons(t);
  const std::vector<Comparison> judged = judge_comparisons(t);
  std::vector<GapExplanation> shares = explain_shares(t);
  if (o.explain) {
    const std::vector<GapExplanation> run = run_explanations(dir, t, o);
    shares.insert(shares.end(), run.begin(), run.end());
  }
  const std::string explained = explain_markdown(shares);
  f.markdown = tables_markdown(t) + batch_tables_markdown(t) + comparisons_markdown(cmp) +
               comparisons_markdown(judged) + explained;
  cmp.insert(cmp.end(), judged.begin(), judged.end());
  auto put = [&](const std::string& name, const std::string& text) {
    write_file_atomic(f.out + "/" + name, text);
    f.files.push_back(f.out + "/" + name);
  };
  put("tables.md", f.markdown);
  put("tables.csv", tables_csv(t));
  put("tables.json", tables_json(t));
  if (o.figures) f.figures = write_study_figures(dir, t, f.out, shares);
  for (const std::string& s : f.figures) {
    f.files.push_back(f.out + "/" + s);
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".svg") == 0)
      f.files.push_back(f.out + "/" + s.substr(0, s.size() - 4) + ".png");
  }
  put("index.html", study_html(dir, t, f.figures, cmp, explained));
  return f;
}

}  // namespace study
}  // namespace driftlab
