// The --device switch end to end: without a usable CUDA device, train / eval / predict with
// --device cuda stop with one line "no CUDA device: <reason>" and exit code 1 (this is what CI
// checks); with a device (the GPU run) the same commands train, evaluate and predict on it,
// with --max-batch. An unknown device or switch value is a one-line error either way.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "kernels/cuda/device.h"

namespace {

namespace fs = std::filesystem;

struct CliResult {
  int code;
  std::string out;
};

// The built binary, or $DRIFTLAB_CLI_PATH where the tests run away from their build folder
// (scripts/gpu-run.sh remote).
std::string cli_path() {
  const char* env = std::getenv("DRIFTLAB_CLI_PATH");
  return env && *env ? env : DRIFTLAB_CLI_PATH;
}

CliResult driftlab(const std::string& args) {
  std::string cmd = cli_path() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

bool have_device() {
  std::string why;
  return driftlab::cuda::device_count(&why) > 0;
}

// Synthetic CIFAR-shaped data, 16 images: ResNet-20 trains in a second on the CPU.
const std::string kData = " --dataset synthetic-cifar10 --limit 16 --batch 8 --no-progress";

TEST(CliDevice, CudaWithoutDeviceIsOneLineErrorElseRuns) {
  fs::path d = fs::temp_directory_path() / ("driftlab_cli_device_" + std::to_string(::getpid()));
  fs::remove_all(d);
  CliResult cpu = driftlab("train --model resnet20 --threads 1" + kData + " --out " + d.string());
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  const std::string w = " --weights " + (d / "model.dlm").string();
  CliResult t = driftlab("train --model resnet20 --device cuda" + kData + " --out " + (d / "gpu").string());
  CliResult e = driftlab("eval --device cuda --dataset synthetic-cifar10 --limit 16" + w);
  CliResult p = driftlab("predict --device cuda --dataset synthetic-cifar10 --limit 16 --sizes 16 --max-batch 5" + w);
  if (!have_device()) {
    for (const CliResult* r : {&t, &e, &p}) {
      EXPECT_EQ(r->code, 1) << r->out;
      EXPECT_TRUE(one_line(r->out)) << r->out;
      EXPECT_NE(r->out.find("no CUDA device: "), std::string::npos) << r->out;
    }
  } else {
    EXPECT_EQ(t.code, 0) << t.out;
    EXPECT_NE(t.out.find(", cuda)"), std::string::npos) << t.out;
    EXPECT_TRUE(fs::exists(d / "gpu" / "model.dlm"));
    EXPECT_EQ(e.code, 0) << e.out;
    EXPECT_NE(e.out.find("on 16 images"), std::string::npos) << e.out;
    EXPECT_EQ(p.code, 0) << p.out;
    EXPECT_NE(p.out.find("16 inputs:"), std::string::npos) << p.out;
    EXPECT_NE(p.out.find("at most 5 inputs at a time"), std::string::npos) << p.out;
  }
  // Attacks through the same switch: FGSM's gradients and judging on the device; an int8
  // model's straight-through gradient has no device layers and is refused by name, device or not.
  CliResult a = driftlab("attack --attack fgsm --eps 0.05 --device cuda --dataset synthetic-cifar10 --limit 16 --out " +
                         (d / "adv").string() + w);
  CliResult q = driftlab("quantize --scheme torch_qnnpack --dataset synthetic-cifar10 --limit 16 --calib 16 --out " +
                         (d / "q.dlm").string() + w);
  ASSERT_EQ(q.code, 0) << q.out;
  CliResult aq = driftlab("attack --attack bim --device cuda --dataset synthetic-cifar10 --limit 16 --out " +
                          (d / "advq").string() + " --weights " + (d / "q.dlm").string());
  EXPECT_EQ(aq.code, 1) << aq.out;
  EXPECT_TRUE(one_line(aq.out)) << aq.out;
  EXPECT_NE(aq.out.find("differentiates its fake-quantized graph"), std::string::npos) << aq.out;
  CliResult rq = driftlab("robustness --model q=" + (d / "q.dlm").string() + " --model fp=" +
                          (d / "model.dlm").string() + " --attacks fgsm --device cuda --no-chart --dataset synthetic-cifar10 "
                          "--limit 16 --out " + (d / "rob").string());
  EXPECT_EQ(rq.code, 1) << rq.out;
  EXPECT_TRUE(one_line(rq.out)) << rq.out;
  EXPECT_NE(rq.out.find("has no device layers"), std::string::npos) << rq.out;  // checked before any device opens
  if (!have_device()) {
    EXPECT_EQ(a.code, 1) << a.out;
    EXPECT_TRUE(one_line(a.out)) << a.out;
    EXPECT_NE(a.out.find("no CUDA device: "), std::string::npos) << a.out;
  } else {
    EXPECT_EQ(a.code, 0) << a.out;
    EXPECT_NE(a.out.find(", cuda)"), std::string::npos) << a.out;
    EXPECT_TRUE(fs::exists(d / "adv" / "adversarial.npy"));
  }
  CliResult bad = driftlab("eval --device gpu --dataset synthetic-cifar10 --limit 16" + w);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("unknown device 'gpu'"), std::string::npos) << bad.out;
  // The CUDA switches are Policy knobs: an unknown value is refused naming the knob.
  CliResult bad_backend = driftlab("train --device cuda --policy torch,cuda_kernels=cudnn" + kData + " --out " +
                                   (d / "bad").string());
  EXPECT_EQ(bad_backend.code, 1) << bad_backend.out;
  EXPECT_NE(bad_backend.out.find("cuda_kernels"), std::string::npos) << bad_backend.out;
  CliResult cpu_max = driftlab("predict --sizes 4 --max-batch 2 --dataset synthetic-cifar10 --limit 16" + w);
  EXPECT_EQ(cpu_max.code, 1) << cpu_max.out;
  EXPECT_NE(cpu_max.out.find("--max-batch is for --device cuda"), std::string::npos) << cpu_max.out;
  fs::remove_all(d);
}

// The recurrent models on the device: train under the torch preset (cuDNN's RNN) and
// with cuda_kernels=own, then eval and predict the CPU-trained model there; without a device
// the same one-line "no CUDA device" as every other model (they are not refused by layer).
TEST(CliDevice, RecurrentModelsOnCuda) {
  fs::path d = fs::temp_directory_path() / ("driftlab_cli_device_rnn_" + std::to_string(::getpid()));
  fs::remove_all(d);
  const std::string data = " --dataset seq-fashion-mnist --limit 64 --batch 16 --no-progress";
  CliResult cpu = driftlab("train --model gru --threads 1" + data + " --out " + d.string());
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  const std::string w = " --weights " + (d / "model.dlm").string();
  CliResult t = driftlab("train --model lstm --device cuda" + data + " --out " + (d / "gpu").string());
  CliResult own = driftlab("train --model lstm --device cuda --policy torch,cuda_kernels=own" + data + " --out " +
                           (d / "own").string());
  CliResult e = driftlab("eval --device cuda --dataset seq-fashion-mnist --limit 64" + w);
  CliResult p = driftlab("predict --device cuda --dataset seq-fashion-mnist --limit 64 --sizes 64 --max-batch 20" + w);
  for (const CliResult* r : {&t, &own, &e, &p}) {
    if (!have_device()) {
      EXPECT_EQ(r->code, 1) << r->out;
      EXPECT_TRUE(one_line(r->out)) << r->out;
      EXPECT_NE(r->out.find("no CUDA device: "), std::string::npos) << r->out;
    } else {
      EXPECT_EQ(r->code, 0) << r->out;
    }
  }
  if (have_device()) {
    EXPECT_NE(t.out.find(", cuda)"), std::string::npos) << t.out;
    EXPECT_TRUE(fs::exists(d / "own" / "model.dlm"));
    EXPECT_NE(e.out.find("on 64 images"), std::string::npos) << e.out;
    EXPECT_NE(p.out.find("at most 20 inputs at a time"), std::string::npos) << p.out;
  }
  fs::remove_all(d);
}

}  // namespace
