// Checkpoints and resume, end to end: `driftlab train` killed with SIGKILL at chosen points (the
// DRIFTLAB_TEST_KILL hook: mid-epoch, right after a checkpoint, halfway through writing one),
// interrupted by SIGINT/SIGTERM (from the hook and from this process at a moment it does not
// choose), then `driftlab train --resume` until the run ends: model.dlm must be byte-identical
// to the uninterrupted run's. Also --init (model file and .npy folder, converted or raw) and
// --shuffle's recorded data order. LeNet-5 on 512 Fashion-MNIST images, batch 32 (16 steps an
// epoch), 3 epochs, 1 thread, Adam with a step schedule, so that the optimiser's moments and
// counters and the schedule's state must come back exactly.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/checkpoint.h"
#include "models/reparam.h"
#include "models/model_file.h"
#include "tests/cli/cli_util.h"
#include "tests/require_util.h"

namespace {

using namespace driftlab::cli_test;
namespace fs = std::filesystem;
using nlohmann::json;

bool have_fashion_mnist() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

#define REQUIRE_FASHION_MNIST() \
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")

// The run every test interrupts: 16 steps an epoch, 48 in all.
const std::string kRun =
    "train --model lenet5 --limit 512 --batch 32 --epochs 3 --threads 1 --optimizer adam --lr 0.001 "
    "--schedule step:step=1,gamma=0.5 --no-progress";

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// driftlab ARGS with DRIFTLAB_TEST_KILL=kill in its environment ("" for none).
CliRun run_with_kill(const std::string& kill, const std::string& args) {
  return run_driftlab_env(kill.empty() ? "" : "DRIFTLAB_TEST_KILL=" + kill, args);
}

// The reference: the same run, never interrupted (run twice: the bytes do not depend on the
// run, or no comparison below would mean anything).
std::string reference_model(const fs::path& dir) {
  CliRun a = run_driftlab(kRun + " --out " + (dir / "ref").string());
  EXPECT_EQ(a.code, 0) << a.out;
  CliRun b = run_driftlab(kRun + " --out " + (dir / "ref2").string());
  EXPECT_EQ(b.code, 0) << b.out;
  const std::string bytes = read_all(dir / "ref" / "model.dlm");
  EXPECT_GT(bytes.size(), 100000u);
  EXPECT_EQ(bytes, read_all(dir / "ref2" / "model.dlm")) << "two uninterrupted runs differ";
  return bytes;
}

// Resumes run_dir until it ends, each attempt under the next kill point ("" for none); returns
// the number of attempts that were killed.
int resume_until_done(const fs::path& run_dir, const std::vector<std::string>& kills) {
  int killed = 0;
  for (std::size_t i = 0;; ++i) {
    const std::string kill = i < kills.size() ? kills[i] : "";
    CliRun r = run_with_kill(kill, "train --resume " + run_dir.string() + " --no-progress");
    if (r.code == 0) {
      EXPECT_NE(r.out.find("resuming " + run_dir.string() + " at epoch"), std::string::npos) << r.out;
      return killed;
    }
    EXPECT_EQ(r.code, 128 + SIGKILL) << "resume under " << kill << ": " << r.out;
    EXPECT_FALSE(kill.empty()) << r.out;
    if (kill.empty() || ++killed > 10) return killed;
  }
}

TEST(CliResume, KilledMidEpochResumesByteIdentical) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("resume_mid");
  const std::string ref = reference_model(d);
  // Step 23 is the 7th step of epoch 2; with a checkpoint every 5 steps the resume starts from step 20.
  const fs::path run = d / "run";
  CliRun k = run_with_kill("step:23", kRun + " --checkpoint-every 5 --out " + run.string());
  ASSERT_EQ(k.code, 128 + SIGKILL) << k.out;
  ASSERT_FALSE(fs::exists(run / "model.dlm"));
  const driftlab::Checkpoint c = driftlab::read_checkpoint((run / "checkpoint.dlc").string());
  EXPECT_EQ(c.state.step_index, 20);
  EXPECT_EQ(c.state.epoch, 1);
  EXPECT_TRUE(c.state.progress.active);
  EXPECT_EQ(c.state.progress.next_batch, 4);
  EXPECT_EQ(resume_until_done(run, {}), 0);
  EXPECT_EQ(read_all(run / "model.dlm"), ref) << "model.dlm differs from the uninterrupted run's";
  // metrics.json says where the run was resumed, and the epochs' numbers are the reference's.
  const json m = json::parse(read_all(run / "metrics.json")), mr = json::parse(read_all(d / "ref" / "metrics.json"));
  ASSERT_EQ(m["resumed"].size(), 1u) << m.dump(1);
  EXPECT_EQ(m["resumed"][0]["epoch"], 2);
  EXPECT_EQ(m["resumed"][0]["batch_in_epoch"], 4);
  EXPECT_EQ(m["resumed"][0]["step"], 20);
  EXPECT_TRUE(mr["resumed"].empty());
  for (int e = 0; e < 3; ++e)
    for (const char* f : {"train_loss", "train_acc", "val_loss", "val_acc", "lr"})
      EXPECT_EQ(m["epochs"][e][f], mr["epochs"][e][f]) << "epoch " << e + 1 << " " << f;
  EXPECT_EQ(m["data_order"], mr["data_order"]);

  // Without --checkpoint-every a kill mid-epoch goes back to the last epoch's end.
  const fs::path run2 = d / "run2";
  ASSERT_EQ(run_with_kill("step:40", kRun + " --out " + run2.string()).code, 128 + SIGKILL);
  EXPECT_EQ(driftlab::read_checkpoint((run2 / "checkpoint.dlc").string()).state.step_index, 32);
  EXPECT_EQ(resume_until_done(run2, {}), 0);
  EXPECT_EQ(read_all(run2 / "model.dlm"), ref);
}

// Loss scaling's state is training state: a float16 run under Keras's LossScaleOptimizer rule
// (tensorflow preset: a skipped step counts in Adam's step count, the scale's floor 1) whose
// initial scale of 2^40 overflows the float16 gradients for its first steps, killed mid-epoch and
// resumed from the checkpoint of step 20, must end byte-identical to the uninterrupted run: the
// scale, its count of finite steps and the optimizer's count of skipped steps come back from the
// checkpoint (without any of them the resumed steps would differ).
TEST(CliResume, LossScalingKilledMidEpochResumesByteIdentical) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("resume_loss_scale");
  const std::string run_args =
      kRun + " --policy tensorflow,autocast=float16,loss_scale=dynamic,loss_scale_init=1099511627776,"
             "loss_scale_growth_interval=4";
  CliRun a = run_driftlab(run_args + " --out " + (d / "ref").string());
  ASSERT_EQ(a.code, 0) << a.out;
  const std::string ref = read_all(d / "ref" / "model.dlm");
  ASSERT_GT(ref.size(), 100000u);
  const json mr = json::parse(read_all(d / "ref" / "metrics.json"));
  int64_t overflows = 0;
  for (const json& e : mr["epochs"]) overflows += e["overflow_steps"].get<int64_t>();
  EXPECT_GT(overflows, 10) << "the run must skip steps, or the state under test is trivial";
  const fs::path run = d / "run";
  ASSERT_EQ(run_with_kill("step:23", run_args + " --checkpoint-every 5 --out " + run.string()).code, 128 + SIGKILL);
  const driftlab::Checkpoint c = driftlab::read_checkpoint((run / "checkpoint.dlc").string());
  EXPECT_EQ(c.state.step_index, 20);
  EXPECT_GT(c.state.optim.skipped, 0) << "skipped steps counted in the optimizer's step count";
  EXPECT_LT(c.state.loss_scale, 1099511627776.0) << "the scale has backed off";
  EXPECT_EQ(resume_until_done(run, {}), 0);
  EXPECT_EQ(read_all(run / "model.dlm"), ref) << "model.dlm differs from the uninterrupted run's";
  const json m = json::parse(read_all(run / "metrics.json"));
  for (int e = 0; e < 3; ++e)
    for (const char* f : {"train_loss", "overflow_steps", "loss_scale"})
      EXPECT_EQ(m["epochs"][e][f], mr["epochs"][e][f]) << "epoch " << e + 1 << " " << f;
}

TEST(CliResume, KilledRightAfterCheckpointAndRepeatedlyResumesByteIdentical) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("resume_repeat");
  const std::string ref = reference_model(d);
  // Right after the 2nd checkpoint (step 14), then each resume killed again: mid-epoch, right
  // after its first checkpoint (which is an epoch's end), halfway through its second write.
  const fs::path run = d / "run";
  ASSERT_EQ(run_with_kill("checkpoint:2", kRun + " --checkpoint-every 7 --out " + run.string()).code,
            128 + SIGKILL);
  EXPECT_EQ(driftlab::read_checkpoint((run / "checkpoint.dlc").string()).state.step_index, 14);
  EXPECT_EQ(resume_until_done(run, {"step:19", "checkpoint:2", "checkpoint-write:2", "step:47"}), 4);
  EXPECT_EQ(read_all(run / "model.dlm"), ref) << "model.dlm differs from the uninterrupted run's";
  const json m = json::parse(read_all(run / "metrics.json"));
  EXPECT_EQ(m["resumed"].size(), 5u) << m["resumed"].dump();
}

TEST(CliResume, KillDuringCheckpointWriteKeepsThePreviousCheckpoint) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("resume_write");
  const std::string ref = reference_model(d);
  const fs::path run = d / "run";
  // The 3rd checkpoint (step 15) is killed halfway through its temporary file.
  ASSERT_EQ(run_with_kill("checkpoint-write:3", kRun + " --checkpoint-every 5 --out " + run.string()).code,
            128 + SIGKILL);
  std::vector<fs::path> temps;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("checkpoint.dlc.tmp.", 0) == 0) temps.push_back(e.path());
  ASSERT_EQ(temps.size(), 1u) << "the killed write's temporary should be there";
  const std::string whole = read_all(run / "checkpoint.dlc");
  EXPECT_LT(fs::file_size(temps[0]), whole.size()) << "the temporary holds half a checkpoint";
  // The previous checkpoint is whole and is the 2nd (step 10); the temporary is no checkpoint.
  const driftlab::Checkpoint c = driftlab::read_checkpoint((run / "checkpoint.dlc").string());
  EXPECT_EQ(c.state.step_index, 10);
  EXPECT_EQ(c.state.progress.next_batch, 10);
  EXPECT_THROW(driftlab::read_checkpoint(temps[0].string()), driftlab::Error);
  CliRun r = run_driftlab("train --resume " + run.string() + " --no-progress");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("removed " + temps[0].string()), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(temps[0]));
  EXPECT_EQ(read_all(run / "model.dlm"), ref);
}

TEST(CliResume, SigintAndSigtermFinishTheStepCheckpointAndSayHowToResume) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("resume_signal");
  const std::string ref = reference_model(d);
  const fs::path run = d / "run";
  // SIGINT after step 13: the step is finished, a checkpoint written at step 13 (none was due).
  CliRun r = run_with_kill("sigint:13", kRun + " --out " + run.string());
  EXPECT_EQ(r.code, 130) << r.out;
  const std::string ckpt = (run / "checkpoint.dlc").string();
  EXPECT_NE(r.out.find("interrupted at epoch 1 step 13 (step 13 of the run); checkpoint " + ckpt +
                       "; resume with: driftlab train --resume " + run.string() + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(run / "model.dlm"));
  EXPECT_EQ(driftlab::read_checkpoint(ckpt).state.step_index, 13);
  // SIGTERM during the resumed run, at the last step of epoch 2.
  CliRun t = run_with_kill("sigterm:32", "train --resume " + run.string() + " --no-progress");
  EXPECT_EQ(t.code, 143) << t.out;
  EXPECT_NE(t.out.find("interrupted at epoch 2 step 16 (step 32 of the run)"), std::string::npos) << t.out;
  EXPECT_EQ(resume_until_done(run, {}), 0);
  EXPECT_EQ(read_all(run / "model.dlm"), ref);

  // Without --out there is nowhere to checkpoint: it says so, and still exits 130.
  CliRun n = run_with_kill("sigint:3", kRun);
  EXPECT_EQ(n.code, 130) << n.out;
  EXPECT_NE(n.out.find("no checkpoint: a run without --out keeps none"), std::string::npos) << n.out;
}

// A SIGINT sent by another process at a moment it does not choose: as soon as the run prints
// its first progress line of epoch 2 (progress lines go to a pipe: one per tenth of an epoch).
TEST(CliResume, ExternalSigintAtAnUnchosenMomentResumesByteIdentical) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("resume_external");
  // 12 epochs, so that the signal arrives with most of the run still to go.
  const std::string args = "train --model lenet5 --limit 512 --batch 32 --epochs 12 --threads 1 --optimizer adam "
                           "--lr 0.001 --schedule step:step=3,gamma=0.5";
  const fs::path ref = d / "ref", run = d / "run";
  ASSERT_EQ(run_driftlab(args + " --no-progress --out " + ref.string()).code, 0);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    const std::string cmd = std::string("exec ") + DRIFTLAB_CLI_PATH + " " + args + " --out " + run.string();
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  bool sent = false;
  for (ssize_t k; (k = ::read(fds[0], buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<std::size_t>(k));
    if (!sent && out.find("epoch 2/12 [") != std::string::npos) {
      ::kill(pid, SIGINT);
      sent = true;
    }
  }
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(sent) << out;
  ASSERT_TRUE(WIFEXITED(status)) << out;
  ASSERT_EQ(WEXITSTATUS(status), 130) << "the run ended before the signal was handled?\n" << out;
  EXPECT_NE(out.find("resume with: driftlab train --resume " + run.string()), std::string::npos) << out;
  EXPECT_EQ(resume_until_done(run, {}), 0);
  EXPECT_EQ(read_all(run / "model.dlm"), read_all(ref / "model.dlm"));
}

TEST(CliResume, CorruptTruncatedOrMissingCheckpointIsAClearError) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("resume_corrupt");
  const fs::path run = d / "run";
  ASSERT_EQ(run_with_kill("step:20", kRun + " --out " + run.string()).code, 128 + SIGKILL);
  const fs::path ck = run / "checkpoint.dlc";
  const std::string good = read_all(ck);
  auto resume_error = [&](const std::string& bytes) {
    std::ofstream(ck, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CliRun r = run_driftlab("train --resume " + run.string());
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("driftlab: error: checkpoint: " + ck.string() + ": "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
    return r.out;
  };
  EXPECT_NE(resume_error(good.substr(0, good.size() / 2)).find("CRC mismatch at offset"), std::string::npos);
  EXPECT_NE(resume_error(good.substr(0, 10)).find("truncated at offset 10"), std::string::npos);
  std::string flipped = good;
  flipped[good.size() / 3] ^= 0x20;
  EXPECT_NE(resume_error(flipped).find("CRC mismatch"), std::string::npos);
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_NE(resume_error(magic).find("bad magic at offset 0"), std::string::npos);
  // The good file back: the run goes on (a failed resume changed nothing).
  std::ofstream(ck, std::ios::binary | std::ios::trunc).write(good.data(), static_cast<std::streamsize>(good.size()));
  CliRun refused = run_driftlab("train --resume " + run.string() + " --lr 0.1");
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.out.find("--lr cannot be given with --resume"), std::string::npos) << refused.out;
  CliRun none = run_driftlab("train --resume " + d.string());
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.out.find("no checkpoint.dlc in it"), std::string::npos) << none.out;
  EXPECT_EQ(run_driftlab("train --resume " + run.string() + " --no-progress").code, 0);
  EXPECT_TRUE(fs::exists(run / "model.dlm"));
}

// --init from one model file under two presets, each with --shuffle none: the same weights and
// the same batches (equal order hashes); the presets' own shuffles see different orders.
TEST(CliInit, SameInitAndShuffleGiveTheSameDataOrderAcrossPresets) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("init_order");
  const std::string base = "train --model lenet5 --limit 256 --batch 32 --threads 1 --no-progress";
  ASSERT_EQ(run_driftlab(base + " --epochs 1 --out " + (d / "src").string()).code, 0);
  const std::string init = (d / "src" / "model.dlm").string();
  auto order = [&](const std::string& policy, const std::string& extra) {
    const fs::path out = d / (policy + extra.substr(extra.rfind(' ') + 1));
    CliRun r = run_driftlab(base + " --epochs 2 --policy " + policy + " --init " + init + " " + extra + " --out " +
                            out.string());
    EXPECT_EQ(r.code, 0) << r.out;
    return json::parse(read_all(out / "metrics.json"));
  };
  const json torch_none = order("torch", "--shuffle none"), tf_none = order("tensorflow", "--shuffle none");
  const json torch_own = order("torch", "--shuffle forward_modulo"), tf_own = order("tensorflow", "--seed 1");
  ASSERT_EQ(torch_none["data_order"]["epochs"].size(), 2u);
  EXPECT_EQ(torch_none["data_order"]["epochs"], tf_none["data_order"]["epochs"]);
  EXPECT_EQ(torch_none["data_order"]["shuffle"], "none");
  EXPECT_EQ(tf_own["data_order"]["shuffle"], "backward_rejection");
  EXPECT_NE(torch_own["data_order"]["epochs"], tf_own["data_order"]["epochs"]);
  EXPECT_NE(torch_own["data_order"]["epochs"][0], torch_own["data_order"]["epochs"][1]) << "epochs reshuffle";
  // The same source recorded for both, with one content hash.
  EXPECT_EQ(torch_none["init"]["path"], init);
  EXPECT_EQ(torch_none["init"]["fnv1a64"], tf_none["init"]["fnv1a64"]);
  EXPECT_EQ(tf_none["init"]["from_policy"], "torch");
  EXPECT_EQ(torch_none["init"]["fnv1a64"].get<std::string>().size(), 16u);
}

// --epochs 0 writes the weights the run would start from: the source's under the same policy,
// drift's conversion under another (or the raw tensors with --no-convert), and the same from a
// .npy folder `weights export` wrote.
TEST(CliInit, StartsFromTheGivenWeightsConvertedLikeDrift) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("init_weights");
  const std::string base = "train --model lenet5 --limit 64 --batch 32 --threads 1 --no-progress";
  ASSERT_EQ(run_driftlab(base + " --epochs 1 --seed 7 --out " + (d / "src").string()).code, 0);
  const std::string src_path = (d / "src" / "model.dlm").string();
  const driftlab::LoadedModel src = driftlab::load_model(src_path);
  auto start = [&](const std::string& name, const std::string& args) {
    CliRun r = run_driftlab(base + " --epochs 0 " + args + " --out " + (d / name).string());
    EXPECT_EQ(r.code, 0) << r.out;
    return driftlab::load_model((d / name / "model.dlm").string());
  };
  auto same_tensors = [](driftlab::Model& a, driftlab::Model& b) {
    auto pa = a.net->named_params(), pb = b.net->named_params();
    if (pa.size() != pb.size()) return false;
    for (std::size_t i = 0; i < pa.size(); ++i) {
      const driftlab::Tensor &x = pa[i].second->value, &y = pb[i].second->value;
      if (x.shape() != y.shape() || std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0) return false;
    }
    return true;
  };
  driftlab::Model want = driftlab::rebuild_under(src.model, src.model.policy, true);
  driftlab::LoadedModel same = start("same", "--init " + src_path);
  EXPECT_TRUE(same_tensors(same.model, want));
  EXPECT_EQ(same.metadata["init"]["kind"], "model");
  // Under tensorflow the first dense layer's columns follow its flatten order (drift's conversion).
  driftlab::Model tf_want = driftlab::rebuild_under(src.model, driftlab::Policy::tensorflow(), true);
  driftlab::Model tf_raw = driftlab::rebuild_under(src.model, driftlab::Policy::tensorflow(), false);
  ASSERT_FALSE(same_tensors(tf_want, tf_raw)) << "the conversion must matter for this test to say anything";
  driftlab::LoadedModel tf = start("tf", "--policy tensorflow --init " + src_path);
  EXPECT_TRUE(same_tensors(tf.model, tf_want));
  driftlab::LoadedModel raw = start("tf_raw", "--policy tensorflow --no-convert --init " + src_path);
  EXPECT_TRUE(same_tensors(raw.model, tf_raw));
  // A .npy folder in the torch framework layout, loaded under tensorflow.
  CliRun ex = run_driftlab("weights export --weights " + src_path + " --out " + (d / "npy").string());
  ASSERT_EQ(ex.code, 0) << ex.out;
  driftlab::LoadedModel npy =
      start("npy", "--policy tensorflow --init-policy torch --init " + (d / "npy").string());
  EXPECT_TRUE(same_tensors(npy.model, tf_want));
  EXPECT_EQ(npy.metadata["init"]["kind"], "npy");
}

TEST(CliInit, BadInitNamesTheFileAndTensor) {
  REQUIRE_FASHION_MNIST();
  const fs::path d = fresh_dir("init_bad");
  const std::string train = "train --limit 64 --batch 32 --threads 1 --no-progress";
  const std::string base = train + " --epochs 0";
  ASSERT_EQ(run_driftlab(train + " --model lenet1 --epochs 1 --out " + (d / "l1").string()).code, 0);
  const std::string l1 = (d / "l1" / "model.dlm").string();
  CliRun other = run_driftlab(base + " --model lenet5 --init " + l1);
  EXPECT_EQ(other.code, 1);
  EXPECT_NE(other.out.find("train: --init " + l1 + " holds lenet1, this run trains lenet5"), std::string::npos)
      << other.out;
  CliRun missing = run_driftlab(base + " --model lenet5 --init " + (d / "nothing").string());
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("no such file or folder"), std::string::npos) << missing.out;
  // A .npy folder with one tensor missing and one of the wrong shape.
  ASSERT_EQ(run_driftlab("weights export --weights " + l1 + " --out " + (d / "npy").string()).code, 0);
  fs::path victim;
  for (const auto& e : fs::directory_iterator(d / "npy"))
    if (e.path().filename().string().find("weight") != std::string::npos) victim = e.path();
  ASSERT_FALSE(victim.empty());
  fs::rename(victim, d / "moved.npy");
  CliRun gone = run_driftlab(base + " --model lenet1 --init " + (d / "npy").string());
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.out.find(victim.string()), std::string::npos) << gone.out;
  CliRun lenet5_files = run_driftlab(base + " --model lenet5 --init " + (d / "npy").string());
  EXPECT_EQ(lenet5_files.code, 1);
  EXPECT_NE(lenet5_files.out.find("train: --init " + (d / "npy").string() + ": "), std::string::npos)
      << lenet5_files.out;
  CliRun stray = run_driftlab(base + " --model lenet5 --no-convert");
  EXPECT_EQ(stray.code, 1);
  EXPECT_NE(stray.out.find("--no-convert is for --init"), std::string::npos) << stray.out;
}

}  // namespace
