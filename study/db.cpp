#include "study/db.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "study/files.h"
#include "study/run.h"

namespace driftlab {
namespace study {

namespace fs = std::filesystem;

namespace {

class Db {
 public:
  Db(const std::string& path, int flags) : path_(path) {
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      fail(path, ": cannot open the results database: ", why);
    }
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string why = err ? err : "?";
      sqlite3_free(err);
      fail(path_, ": ", why, " (in: ", sql.substr(0, 200), ")");
    }
  }
  sqlite3* get() { return db_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

class Stmt {
 public:
  Stmt(Db& db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &st_, nullptr) != SQLITE_OK)
      fail(db.path(), ": ", sqlite3_errmsg(db.get()), " (in: ", sql.substr(0, 200), ")");
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& text(int i, const std::string& v) {
    sqlite3_bind_text(st_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& real(int i, double v) {
    sqlite3_bind_double(st_, i, v);
    return *this;
  }
  Stmt& integer(int i, long long v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  void run() {
    const int rc = sqlite3_step(st_);
    if (rc != SQLITE_DONE) fail(db_.path(), ": ", sqlite3_errmsg(db_.get()));
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  sqlite3_stmt* get() { return st_; }

 private:
  Db& db_;
  sqlite3_stmt* st_ = nullptr;
};

// Every number (and bool, as 0/1) under j, by JSON pointer.
void numbers(const nlohmann::json& j, const std::string& at, const std::function<void(const std::string&, double)>& f) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) numbers(v, at + "/" + k, f);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) numbers(j[i], at + "/" + std::to_string(i), f);
  } else if (j.is_number()) {
    f(at, j.get<double>());
  } else if (j.is_boolean()) {
    f(at, j.get<bool>() ? 1.0 : 0.0);
  }
}

}  // namespace

int collect_results(const std::string& dir) {
  const Plan p = read_plan(dir);
  std::map<std::string, std::string> state;
  for (const CellState& s : study_status(dir)) state[s.hash] = s.state;
  const std::string path = dir + "/results.sqlite", tmp = path + ".tmp." + std::to_string(::getpid());
  fs::remove(tmp);
  {
    Db db(tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;"
            "CREATE TABLE cells(hash TEXT PRIMARY KEY, step TEXT, kind TEXT, state TEXT, error TEXT, params TEXT,"
            " inputs TEXT);"
            "CREATE TABLE params(hash TEXT, key TEXT, value TEXT);"
            "CREATE TABLE measures(hash TEXT, path TEXT, value REAL);"
            "CREATE TABLE timings(hash TEXT, path TEXT, value REAL);"
            "CREATE TABLE inputs(hash TEXT, input TEXT, position INTEGER);");
    Stmt cell(db, "INSERT INTO cells VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    Stmt par(db, "INSERT INTO params VALUES (?1, ?2, ?3)");
    Stmt mea(db, "INSERT INTO measures VALUES (?1, ?2, ?3)");
    Stmt tim(db, "INSERT INTO timings VALUES (?1, ?2, ?3)");
    Stmt inp(db, "INSERT INTO inputs VALUES (?1, ?2, ?3)");
    for (const Cell& c : p.cells) {
      const std::string cdir = dir + "/cells/" + c.hash;
      std::string error;
      if (state[c.hash] == "failed") {
        std::ifstream e(cdir + "/error.txt");
        std::getline(e, error);
      }
      nlohmann::json inputs = nlohmann::json::array();
      for (std::size_t k = 0; k < c.inputs.size(); ++k) {
        inputs.push_back(p.cells[c.inputs[k]].hash);
        inp.text(1, c.hash).text(2, p.cells[c.inputs[k]].hash).integer(3, static_cast<long long>(k)).run();
      }
      cell.text(1, c.hash).text(2, c.step).text(3, c.kind).text(4, state[c.hash]).text(5, error)
          .text(6, nlohmann::json(c.params).dump()).text(7, inputs.dump()).run();
      for (const auto& [k, v] : c.params) par.text(1, c.hash).text(2, k).text(3, v).run();
      if (state[c.hash] != "done") continue;
      numbers(read_json_if_any(cdir + "/results.json"), "", [&](const std::string& at, double v) {
        mea.text(1, c.hash).text(2, at).real(3, v).run();
      });
      numbers(read_json_if_any(cdir + "/timings.json"), "", [&](const std::string& at, double v) {
        tim.text(1, c.hash).text(2, at).real(3, v).run();
      });
    }
    db.exec("CREATE INDEX measures_path ON measures(path); CREATE INDEX params_key ON params(key, value); COMMIT;");
  }
  fs::rename(tmp, path);
  return static_cast<int>(p.cells.size());
}

QueryResult query_results(const std::string& dir, const std::string& sql) {
  const std::string path = dir + "/results.sqlite";
  check(fs::exists(path), path, ": no results database (`driftlab study collect ", dir, "` makes it)");
  Db db(path, SQLITE_OPEN_READONLY);
  Stmt st(db, sql);
  QueryResult q;
  const int n = sqlite3_column_count(st.get());
  for (int i = 0; i < n; ++i) q.columns.push_back(sqlite3_column_name(st.get(), i));
  for (;;) {
    const int rc = sqlite3_step(st.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) fail(path, ": ", sqlite3_errmsg(db.get()));
    std::vector<std::string> row;
    for (int i = 0; i < n; ++i) {
      const unsigned char* t = sqlite3_column_text(st.get(), i);
      row.push_back(t ? reinterpret_cast<const char*>(t) : "");
    }
    q.rows.push_back(std::move(row));
  }
  return q;
}

}  // namespace study
}  // namespace driftlab
