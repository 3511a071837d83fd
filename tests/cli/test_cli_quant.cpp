// driftlab quantize end to end: a trained LeNet-1 quantized under a toolchain's scheme into an int8
// model file that eval and predict run; the report (JSON/Markdown) with sizes, accuracy, SQNR and
// time; calibration from an .npy; refusals by name (an int8 model given again, a bad report
// extension, calibration data of the wrong dtype).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/io/npy.h"
#include "tests/cli/cli_util.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab::cli_test;
namespace fs = std::filesystem;
using nlohmann::json;

TEST(CliQuant, QuantizeReportEvalPredictAndRefusals) {
  const fs::path d = fresh_dir("cli_quant");
  write_idx(d, "train", 96);
  write_idx(d, "t10k", 32);
  const std::string data = " --data-dir " + d.string() + " --threads 1";
  CliRun r = run_driftlab("train --model lenet1 --epochs 1 --batch 32 --no-progress --out " + (d / "run").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string fp = (d / "run" / "model.dlm").string(), q = (d / "q.dlm").string();
  r = run_driftlab("quantize --weights " + fp + " --scheme tflite --calib 64 --calib-batch 16 --out " + q +
                   " --report " + (d / "rep.json").string() + " --report-inputs 32" + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("calibrated on first 64 of"), std::string::npos) << r.out;
  std::ifstream rf(d / "rep.json");
  const json rep = json::parse(rf);
  EXPECT_EQ(rep["scheme"], "tflite");
  EXPECT_LT(rep["file_bytes"]["int8"].get<double>(), rep["file_bytes"]["fp32"].get<double>());
  EXPECT_EQ(rep["accuracy"]["n"], 32);
  ASSERT_EQ(rep["sqnr"].size(), 4u);  // input, conv1+relu, conv2+relu, dense
  EXPECT_EQ(rep["sqnr"][0]["point"], "input");
  EXPECT_GT(rep["inference_s"]["int8"].get<double>(), 0.0);
  // the int8 file runs under eval and predict
  r = run_driftlab("eval --weights " + q + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("quant_scheme=tflite"), std::string::npos) << r.out;
  driftlab::write_npy((d / "x.npy").string(), driftlab::random_tensor({3, 1, 28, 28}, driftlab::DType::f32, 5, 0, 1));
  r = run_driftlab("predict --weights " + q + " --input " + (d / "x.npy").string() + " --output " +
                   (d / "y.npy").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(driftlab::read_npy((d / "y.npy").string()).shape(), (driftlab::Shape{3, 10}));
  // calibration from an .npy, a Markdown report
  r = run_driftlab("quantize --weights " + fp + " --scheme ort --calib-data " + (d / "x.npy").string() + " --out " +
                   (d / "q2.dlm").string() + " --report " + (d / "rep.md").string() + " --report-inputs 8" + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| point | SQNR (dB) |"), std::string::npos) << r.out;
  // drift over int8 forms: fp32, then each policy's int8 model; localisation by activation point
  r = run_driftlab("drift --weights " + fp + " --policies \"torch;torch,quant_scheme=tflite\" --quantize 32 --json " +
                   (d / "drift.json").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("int8 tflite"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("point 1.relu"), std::string::npos) << r.out;
  {
    std::ifstream df(d / "drift.json");
    const json dj = json::parse(df);
    ASSERT_EQ(dj["accuracy"].size(), 3u);  // fp32, int8 torch_qnnpack, int8 tflite
    EXPECT_EQ(dj["accuracy"][0]["label"].get<std::string>().rfind("fp32", 0), 0u);
    ASSERT_EQ(dj["pairs"].size(), 3u);
    EXPECT_EQ(dj["pairs"][0]["localisation"]["layers"].size(), 4u);  // input, conv1, conv2, dense
  }
  r = run_driftlab("drift --weights " + q + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("is an int8 model"), std::string::npos) << r.out;
  // attribute over the quant knobs names them
  r = run_driftlab("attribute --weights " + fp + " --from torch,quant_scheme=torch_qnnpack --to torch,quant_scheme=tflite "
                   "--quantize 32" + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("quant_conv_weights"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("quant_scheme "), std::string::npos) << r.out;  // the group label is not flipped
  // refusals
  r = run_driftlab("quantize --weights " + q + " --out " + (d / "q3.dlm").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("already an int8 model"), std::string::npos) << r.out;
  r = run_driftlab("quantize --weights " + fp + " --calib 8 --out " + (d / "q4.dlm").string() + " --report " +
                   (d / "rep.txt").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("must end in .json, .csv or .md"), std::string::npos) << r.out;
  driftlab::write_npy((d / "xi.npy").string(), driftlab::Tensor::zeros({2, 1, 28, 28}, driftlab::DType::i32));
  r = run_driftlab("quantize --weights " + fp + " --calib-data " + (d / "xi.npy").string() + " --out " +
                   (d / "q5.dlm").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("must be float32"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "q5.dlm"));
  r = run_driftlab("quantize --weights " + fp + " --scheme tensorrt --out " + (d / "q6.dlm").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("quant_scheme"), std::string::npos) << r.out;
  // a truncated int8 file names itself
  {
    std::ifstream in(q, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(d / "cut.dlm", std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  r = run_driftlab("eval --weights " + (d / "cut.dlm").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("cut.dlm"), std::string::npos) << r.out;
  fs::remove_all(d);
}

}  // namespace

namespace {

// Dynamic (weights-only) quantization from the command line: an LSTM trained for one epoch on
// sequential IDX images is quantized without calibration (--mode auto picks dynamic for recurrent
// models), reported (one SQNR row per layer), run by eval and predict; static mode and calibration
// data are refused for it by name.
TEST(CliQuant, DynamicLstmQuantizeReportEvalPredictAndRefusals) {
  const fs::path d = fresh_dir("cli_quant_dyn");
  write_idx(d, "train", 64);
  write_idx(d, "t10k", 24);
  const std::string data = " --data-dir " + d.string() + " --dataset seq-fashion-mnist --threads 1";
  CliRun r = run_driftlab("train --model lstm --epochs 1 --batch 32 --no-progress --out " + (d / "run").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string fp = (d / "run" / "model.dlm").string(), q = (d / "q.dlm").string();
  r = run_driftlab("quantize --weights " + fp + " --scheme torch_onednn --out " + q + " --report " +
                   (d / "rep.json").string() + " --report-inputs 16" + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("dynamic int8 (weights only)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lstm_dynamic 128 units"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0,127]"), std::string::npos) << r.out;  // onednn honours reduce_range
  std::ifstream rf(d / "rep.json");
  const json rep = json::parse(rf);
  EXPECT_EQ(rep["mode"], "dynamic");
  ASSERT_EQ(rep["sqnr"].size(), 2u);  // the lstm's output, the dense head's
  EXPECT_EQ(rep["sqnr"][0]["point"], "0.lstm");
  EXPECT_LT(rep["file_bytes"]["int8"].get<double>(), rep["file_bytes"]["fp32"].get<double>());
  r = run_driftlab("eval --weights " + q + data);
  ASSERT_EQ(r.code, 0) << r.out;
  driftlab::write_npy((d / "x.npy").string(), driftlab::random_tensor({3, 28, 28}, driftlab::DType::f32, 6, 0, 1));
  r = run_driftlab("predict --weights " + q + " --input " + (d / "x.npy").string() + " --output " +
                   (d / "y.npy").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(driftlab::read_npy((d / "y.npy").string()).shape(), (driftlab::Shape{3, 10}));
  // drift: fp32, then each scheme's dynamic int8 model, localised layer by layer
  r = run_driftlab("drift --weights " + fp + " --policies \"torch;torch,quant_scheme=tflite\" --quantize 16 --json " +
                   (d / "drift.json").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  {
    std::ifstream df(d / "drift.json");
    const json dj = json::parse(df);
    ASSERT_EQ(dj["accuracy"].size(), 3u);
    ASSERT_EQ(dj["pairs"].size(), 3u);
    EXPECT_EQ(dj["pairs"][0]["localisation"]["layers"].size(), 2u);  // the lstm, the dense head
  }
  // attribute over the dynamic knobs names them
  r = run_driftlab("attribute --weights " + fp + " --from torch,quant_scheme=torch_qnnpack --to torch,quant_scheme=tflite "
                   "--quantize 16" + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("quant_dyn_act"), std::string::npos) << r.out;
  r = run_driftlab("quantize --weights " + fp + " --mode static --out " + (d / "q2.dlm").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("use --mode dynamic"), std::string::npos) << r.out;
  r = run_driftlab("quantize --weights " + fp + " --calib-data " + (d / "x.npy").string() + " --out " +
                   (d / "q3.dlm").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("--calib-data is for static quantization"), std::string::npos) << r.out;
  r = run_driftlab("quantize --weights " + fp + " --mode sometimes --out " + (d / "q4.dlm").string() + data);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code;
  EXPECT_NE(r.out.find("--mode sometimes"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "q2.dlm") || fs::exists(d / "q3.dlm") || fs::exists(d / "q4.dlm"));
}

}  // namespace
