// What several command files share (defined in cli/commands.cpp): the data options, --threads,
// and the check that a dataset fits a saved model.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "engine/data/datasets.h"
#include "models/model_file.h"

namespace driftlab {
namespace cli {

// Shows the summary of an IMDb corpus when a command's loader reads one.
void print_imdb_read(const std::string& dir, const ImdbOptions& o, const ImdbData& d);

// A command's data options and the loader its splits come from. Copies share the loader:
// compare runs run_train on copies of one TrainOptions, and a command reads (and summarises)
// an IMDb corpus once for all its splits and runs.
struct DataOptions : DataSpec {
  std::shared_ptr<DatasetLoader> loader = std::make_shared<DatasetLoader>(print_imdb_read);
};

void add_data_options(CLI::App* c, DataOptions& o);
// Runs a shell command, returns what it printed (stdout; append 2>&1 for stderr) and sets *rc to
// pclose's status.
std::string run_capture(const std::string& cmd, int* rc);
// s as one single-quoted shell word (a ' inside becomes '\'').
std::string shell_quoted(const std::string& s);
void set_threads(int threads);
void add_threads_option(CLI::App* c, int& threads);
// A saved model's data must have its input shape: says so naming the file.
void check_data_fits(const LoadedModel& lm, const std::string& weights, const Dataset& data);

}  // namespace cli
}  // namespace driftlab
