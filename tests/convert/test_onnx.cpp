// convert/onnx_export.h and onnx_import.h without ONNX Runtime or PyTorch: a model exported under
// the torch preset imports back to the same model (the same logits, bit for bit: the graph
// carries every weight and op parameter, nothing is refolded), and bad input is refused by name.
// The agreement with ONNX Runtime and with torch.onnx.export's files is checked in
// tests/oracles/test_onnx_oracle.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "convert/onnx_export.h"
#include "convert/onnx_import.h"
#include "core/error.h"
#include "engine/train/cpu_runner.h"
#include "models/model_file.h"
#include "models/models.h"
#include "quant/model_io.h"
#include "quant/ptq.h"
#include "quant/report.h"
#include "tests/cli/cli_util.h"
#include "tests/oracles/oracle_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;
using cli_test::CliRun;
using cli_test::fresh_dir;
using cli_test::run_driftlab;

Tensor input_for(const Model& m, int64_t n) {
  Shape s{n};
  s.insert(s.end(), m.input_shape.begin(), m.input_shape.end());
  if (m.num_ids > 0) {
    Tensor ids(s, DType::f32);
    for (int64_t i = 0; i < ids.numel(); ++i) ids.data<float>()[i] = static_cast<float>((i * 7919) % m.num_ids);
    return ids;
  }
  return random_tensor(s, DType::f32, 5, 0.0, 1.0);
}

TEST(OnnxRoundTrip, ExportThenImportGivesTheSameModelUnderTheTorchPreset) {
  for (const char* arch : {"lenet1", "lenet5", "resnet20", "resnet20b", "lstm", "gru", "gru-imdb"}) {
    SCOPED_TRACE(arch);
    ModelArgs args;
    if (std::string(arch) == "gru-imdb") args.num_ids = 500, args.steps = 12;  // a small table
    Model m = oracle::model_with_random_state(arch, Policy::torch(), 3);
    if (args.num_ids) m = build_model(arch, Policy::torch(), 3, args);
    const convert::OnnxExport ex = convert::export_onnx(m, {});
    EXPECT_EQ(convert::check_onnx(ex.bytes), "");
    convert::OnnxImport im = convert::import_onnx_bytes(ex.bytes, std::string(arch) + ".onnx");
    EXPECT_EQ(im.model.name, m.name);
    EXPECT_EQ(im.opset, 13);
    const Tensor x = input_for(m, 3);
    CpuRunner a(m), b(im.model);
    EXPECT_TRUE(bitwise_equal(a.logits(x), b.logits(x)));
  }
}

// A model that flattens channels-last (the tensorflow and theano presets' flatten_order=hwc) is
// exported as Transpose(0,2,3,1) + Flatten; it imports as the same zoo model under the torch
// preset with flatten_order=hwc and computes what the original does, bit for bit: no other knob
// in which these presets differ acts on a LeNet's inference (theano's kernel flip is in the
// exported weights; the conv and dense kernels are the same ones).
TEST(OnnxRoundTrip, AChannelsLastFlattenImportsWithFlattenOrderHwc) {
  for (const char* preset : {"tensorflow", "theano"})
    for (const char* arch : {"lenet1", "lenet5"}) {
      SCOPED_TRACE(std::string(preset) + " " + arch);
      Model m = oracle::model_with_random_state(arch, Policy::parse(preset), 3);
      ASSERT_EQ(m.policy.flatten_order, FlattenOrder::hwc);
      convert::OnnxImport im = convert::import_onnx_bytes(convert::export_onnx(m, {}).bytes, "hwc.onnx");
      EXPECT_EQ(im.model.name, m.name);
      EXPECT_EQ(im.model.policy.flatten_order, FlattenOrder::hwc);
      EXPECT_EQ(im.model.policy.to_string(), "torch,flatten_order=hwc");
      bool named = false;
      for (const std::string& line : im.mapping) named = named || line.find("(Transpose 0,2,3,1) and the Flatten after it") != std::string::npos;
      EXPECT_TRUE(named) << ::testing::PrintToString(im.mapping);
      const Tensor x = input_for(m, 4);
      CpuRunner a(m), b(im.model);
      EXPECT_TRUE(bitwise_equal(a.logits(x), b.logits(x)));
    }
}

TEST(OnnxRoundTrip, BadInputIsRefusedByName) {
  Model m = build_model("lenet1", Policy::torch(), 1);
  const std::string bytes = convert::export_onnx(m, {}).bytes;
  // truncated and garbage files
  std::string e = error_of([&] { convert::import_onnx_bytes(bytes.substr(0, bytes.size() / 2), "half.onnx"); });
  EXPECT_NE(e.find("half.onnx"), std::string::npos) << e;
  e = error_of([&] { convert::import_onnx_bytes("not a model at all", "junk.onnx"); });
  EXPECT_NE(e.find("junk.onnx"), std::string::npos) << e;
  e = error_of([&] { convert::import_onnx("/nonexistent/m.onnx"); });
  EXPECT_NE(e.find("cannot open /nonexistent/m.onnx"), std::string::npos) << e;
  // a transpose of a feature map that no driftlab layer performs is named, not mapped silently:
  // a Keras-preset export's Transpose(0,2,3,1) before its Flatten, its perm rewritten to (0,3,2,1)
  // (H and W swapped). AttributeProto.ints (field 8, varint) is written unpacked: 0x40 v per value.
  Model tf = build_model("lenet1", Policy::tensorflow(), 1);
  std::string swapped = convert::export_onnx(tf, {}).bytes;
  const std::string perm("\x40\x00\x40\x02\x40\x03\x40\x01", 8);
  ASSERT_EQ(swapped.find(perm), swapped.rfind(perm));
  ASSERT_NE(swapped.find(perm), std::string::npos);
  swapped.replace(swapped.find(perm), perm.size(), std::string("\x40\x00\x40\x03\x40\x02\x40\x01", 8));
  e = error_of([&] { convert::import_onnx_bytes(swapped, "tf.onnx"); });
  EXPECT_NE(e.find("(Transpose; perm=[0,3,2,1])"), std::string::npos) << e;
  EXPECT_NE(e.find("a (0,2,3,1) transpose into a Flatten"), std::string::npos) << e;
  // export refusals
  convert::OnnxExportOptions old;
  old.opset = 11;
  e = error_of([&] { convert::export_onnx(m, old); });
  EXPECT_NE(e.find("--opset 11"), std::string::npos) << e;
  Model f64 = build_model("lenet1", Policy::parse("torch,dtype=float64"), 1);
  e = error_of([&] { convert::export_onnx(f64, {}); });
  EXPECT_NE(e.find("float64"), std::string::npos) << e;
  Model masked = build_model("lstm-imdb", Policy::parse("tensorflow,rnn_mask=carry"), 1, {500, 10});
  e = error_of([&] { convert::export_onnx(masked, {}); });
  EXPECT_NE(e.find("rnn_mask=carry"), std::string::npos) << e;
  // a write that cannot happen leaves nothing behind
  e = error_of([&] { convert::write_onnx("/nonexistent/dir/m.onnx", bytes); });
  EXPECT_NE(e.find("/nonexistent/dir/m.onnx"), std::string::npos) << e;
}

TEST(CliOnnx, ExportPrintsTheSemanticsAndImportConvertsToAnotherPreset) {
  const fs::path d = fresh_dir("cli_onnx");
  // a model file of the theano preset: the export states the flip
  Model m = build_model("lenet1", Policy::theano(), 2);
  const std::string w = (d / "m.dlm").string(), onnx = (d / "m.onnx").string();
  save_model(w, m, {});
  CliRun r = run_driftlab("export --weights " + w + " --format onnx --out " + onnx);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("weights rotated 180 (filter flip)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Transpose(0,2,3,1) + Flatten"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ONNX checker: passed"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(onnx + ".tmp"));
  // a torch-preset export imports, written under the tensorflow preset with converted weights
  Model t = build_model("lenet5", Policy::torch(), 2);
  const std::string tw = (d / "t.dlm").string(), tonnx = (d / "t.onnx").string();
  save_model(tw, t, {});
  ASSERT_EQ(run_driftlab("export --weights " + tw + " --out " + tonnx).code, 0);
  r = run_driftlab("import " + tonnx + " --policy tensorflow --out " + (d / "imp.dlm").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("is driftlab's lenet5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("converted from the torch preset's conventions to tensorflow's"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d / "imp.dlm"));
  r = run_driftlab("import " + w + " --out " + (d / "bad.dlm").string());  // a .dlm is not ONNX
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(w), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "bad.dlm"));
}

// int8 models (quant/): the two ONNX forms, what each layer became, the notes on a scheme that is not
// ORT's arithmetic, and the refusals. ONNX Runtime running these graphs: tests/oracles/test_onnx_quant_export.cpp.
quant::PtqResult quantized(const std::string& arch, const std::string& policy) {
  Model m = oracle::model_with_random_state(arch, Policy::torch(), 4);
  Shape s{16};
  s.insert(s.end(), m.input_shape.begin(), m.input_shape.end());
  quant::PtqOptions o;
  o.calib_batch = 8;
  return quant::quantize_model(m, Policy::parse(policy), random_tensor(s, DType::f32, 9, 0.0, 1.0), o);
}

bool has_line(const convert::OnnxExport& ex, const std::string& what) {
  for (const std::string& n : ex.nodes)
    if (n.find(what) != std::string::npos) return true;
  return false;
}

TEST(OnnxQuantExport, QdqAndQOperatorFormsOfAnOrtSchemeResnet) {
  quant::PtqResult q = quantized("resnet20", "torch,quant_scheme=ort,quant_act_dtype=uint8");
  const convert::OnnxExport qdq = convert::export_onnx(q.model, {});
  EXPECT_EQ(convert::check_onnx(qdq.bytes), "");
  EXPECT_TRUE(qdq.notes.empty()) << qdq.notes.front();  // the scheme is ORT's arithmetic
  EXPECT_EQ(qdq.num_points, 0);
  EXPECT_TRUE(has_line(qdq, "DequantizeLinear -> Conv -> Relu -> QuantizeLinear")) << qdq.nodes[1];
  EXPECT_TRUE(has_line(qdq, "shortcut option A (Slice step 2, Pad channels 8 before, 8 after with 0.0)"));
  EXPECT_TRUE(has_line(qdq, "GlobalAveragePool between DequantizeLinear/QuantizeLinear + Reshape [0,-1], its own"));
  convert::OnnxExportOptions o;
  o.quant_form = convert::OnnxExportOptions::QuantForm::qoperator;
  o.expose_points = true;
  const convert::OnnxExport qop = convert::export_onnx(q.model, o);
  EXPECT_EQ(convert::check_onnx(qop.bytes), "");
  EXPECT_TRUE(has_line(qop, "QLinearConv"));
  EXPECT_TRUE(has_line(qop, "com.microsoft.QLinearAdd (+ ReLU clamp)"));
  EXPECT_TRUE(has_line(qop, "with the zero point)"));  // option A pads channels with the zero point
  EXPECT_TRUE(has_line(qop, "com.microsoft.QGemm transB=1"));
  // the input, 19 convs, 9 residual outputs, the pool's own scale, the fc: int8_activations' points
  EXPECT_EQ(qop.num_points, static_cast<int64_t>(quant::int8_activations(q.model, random_tensor({1, 3, 32, 32}, DType::f32, 1,
                                                                                               0.0, 1.0)).size()));
  EXPECT_EQ(qop.num_points, 31);
  // neither graph maps back onto a float model: the importer names the first node it cannot take
  const std::string e = error_of([&] { convert::import_onnx_bytes(qdq.bytes, "q.onnx"); });
  EXPECT_NE(e.find("QuantizeLinear"), std::string::npos) << e;
}

TEST(OnnxQuantExport, AnotherSchemeIsWrittenWithItsDifferencesNamedOrRefused) {
  // qnnpack: quantize by the float32 reciprocal and its own multiplier (ORT divides; forms
  // float32(s_in*s_w)/s_out): exported, the differences listed by knob
  quant::PtqResult qnn = quantized("lenet5", "torch,quant_scheme=torch_qnnpack");
  const convert::OnnxExport ex = convert::export_onnx(qnn.model, {});
  ASSERT_EQ(ex.notes.size(), 2u);
  EXPECT_NE(ex.notes[0].find("(quant_act_scale_op, quant_round)"), std::string::npos) << ex.notes[0];
  EXPECT_NE(ex.notes[1].find("(quant_multiplier)"), std::string::npos) << ex.notes[1];
  // onednn keeps the bias in float inside the requantization: no ONNX integer op takes that
  quant::PtqResult one = quantized("lenet5", "torch,quant_scheme=torch_onednn");
  std::string e = error_of([&] { convert::export_onnx(one.model, {}); });
  EXPECT_NE(e.find("quant_bias=float_in_requant"), std::string::npos) << e;
  EXPECT_NE(e.find("1.qconv2d"), std::string::npos) << e;  // the layer, by index and kind
  // points exist as outputs in the QOperator form only
  convert::OnnxExportOptions o;
  o.expose_points = true;
  e = error_of([&] { convert::export_onnx(qnn.model, o); });
  EXPECT_NE(e.find("QOperator form only"), std::string::npos) << e;
}

TEST(CliOnnx, ExportsAnInt8ModelInBothForms) {
  const fs::path d = fresh_dir("cli_onnx_int8");
  quant::PtqResult q = quantized("lenet5", "torch,quant_scheme=ort");
  const std::string w = (d / "q.dlm").string();
  quant::save_quantized_model(w, q.model, {}, {{"scheme", "ort"}});
  CliRun r = run_driftlab("export --weights " + w + " --out " + (d / "q.onnx").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(int8, qdq form)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DequantizeLinear -> Conv -> Relu -> QuantizeLinear"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ONNX Runtime will compute otherwise"), std::string::npos) << r.out;
  r = run_driftlab("export --weights " + w + " --quant-form qop --out " + (d / "qop.onnx").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("QLinearConv"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d / "qop.onnx"));
  r = run_driftlab("export --weights " + w + " --quant-form qlinear --out " + (d / "x.onnx").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--quant-form 'qlinear' (known: qdq, qop)"), std::string::npos) << r.out;
  r = run_driftlab("export --weights " + w + " --format tfjs --out " + (d / "tfjs").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("is an int8 model; a TF.js layers model is float"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace driftlab
