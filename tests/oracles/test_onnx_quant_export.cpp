// ONNX export of int8 models: driftlab's quantized models written by
// convert/onnx_export.h in QDQ and QOperator form, checked by ONNX's checker (python3-onnx) and run
// in ONNX Runtime 1.23 (onnxruntime-node, CPU, default graph optimizations 'all', one thread;
// tests/oracles/ort/run_models.sh), against driftlab's own int8 run of the same model file.
//
// Under quant_scheme=ort the two must agree bit for bit: every integer of every activation point
// (QOperator, whose points are graph outputs) and every float logit (the DequantizeLinear of the
// last layer's integers), tolerance 0. The scheme's arithmetic is ORT's (docs/QUANT.md: the ORT
// oracle ran it layer by layer on graphs written by make_models.py); here the graph is driftlab's
// own exporter's, so this checks the exporter: every tensor, attribute, axis and layout it writes.
// On a CPU without VNNI the model takes the product rule ORT's MLAS runs there
// (oracle::ort_dot_knobs), as the ORT int8 oracle does.
//
// Information only (printed, not asserted): a model quantized under another toolchain's scheme
// (torch_qnnpack: quantize by the reciprocal, its own multiplier, qnnpack's fixed-point residual
// add) exported and run by ORT: how many outputs move and by how many steps, beside the notes the
// exporter wrote about each difference; and ResNet-20 with int8 activations in QDQ form, which
// ORT on x86 runs partly in float (docs/QUANT.md, "ResNet-20 under ONNX Runtime").
//
// Inputs: LeNet-1/5 the first 1,000 Fashion-MNIST test images, calibrated on 256 others (test
// images 5,000-5,255); ResNet-20 64 synthetic CIFAR-shaped images, calibrated on 64 others (CIFAR-10
// is not installable here), with random BatchNorm statistics so that the folding is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>

#include "convert/onnx_export.h"
#include "engine/data/cifar.h"
#include "engine/data/idx.h"
#include "models/models.h"
#include "quant/ptq.h"
#include "quant/report.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;
using Form = convert::OnnxExportOptions::QuantForm;

struct QCase {
  const char* name;
  const char* arch;
  const char* preset;  // the fp32 model's
  const char* quant;   // the quant knobs
  bool exact;          // asserted bit for bit; else printed only
};
const QCase kCases[] = {
    {"lenet1_ort_u8", "lenet1", "torch", "quant_scheme=ort,quant_act_dtype=uint8", true},
    {"lenet5_ort_i8", "lenet5", "torch", "quant_scheme=ort", true},
    {"lenet5_ort_u8_per_channel", "lenet5", "torch",
     "quant_scheme=ort,quant_act_dtype=uint8,quant_conv_weights=per_channel,quant_dense_weights=per_channel", true},
    {"lenet5_tf_ort_u8", "lenet5", "tensorflow", "quant_scheme=ort,quant_act_dtype=uint8", true},  // channels-last flatten
    {"resnet20_ort_u8", "resnet20", "torch", "quant_scheme=ort,quant_act_dtype=uint8", true},
    {"resnet20_ort_i8", "resnet20", "torch", "quant_scheme=ort", false},
    {"lenet5_torch_qnnpack", "lenet5", "torch", "quant_scheme=torch_qnnpack", false},
};
const Form kForms[] = {Form::qdq, Form::qoperator};
const char* form_name(Form f) { return f == Form::qdq ? "qdq" : "qop"; }

bool is_lenet(const std::string& arch) { return arch == "lenet1" || arch == "lenet5"; }

Tensor fashion_rows(int64_t first, int64_t n) {
  static const Tensor all = load_mnist_like("/usr/share/datasets/fashion-mnist", false, "fashion-mnist").images;
  Tensor x({n, 1, 28, 28}, DType::f32);
  std::copy_n(all.data<float>() + first * 784, x.numel(), x.data<float>());
  return x;
}
Tensor inputs(const std::string& arch) { return is_lenet(arch) ? fashion_rows(0, 1000) : synthetic_cifar10(64, 11).images; }
Tensor calibration(const std::string& arch) {
  return is_lenet(arch) ? fashion_rows(5000, 256) : synthetic_cifar10(64, 12).images;
}

// driftlab's side of one case under one product rule (the two forms share it where their rules
// agree): the quantized model and its outputs on the inputs.
struct Side {
  quant::PtqResult q;
  std::vector<Tensor> points;  // quant/report.h int8_activations
  Tensor logits;
};

Side& side(const QCase& c, const std::string& knobs) {
  static std::map<std::string, Side> sides;
  const std::string key = std::string(c.name) + knobs;
  auto it = sides.find(key);
  if (it != sides.end()) return it->second;
  Model fp32 = oracle::model_with_random_state(c.arch, Policy::preset_named(c.preset), 7);
  quant::PtqOptions po;
  po.calib_batch = 64;
  // the fast int8 kernels (bit-exact to the reference: tests/ops/test_quant_fast.cpp) for the 1,000 inputs
  Side s{quant::quantize_model(fp32, Policy::parse(std::string(c.preset) + "," + c.quant + knobs + ",quant_backend=fast"),
                               calibration(c.arch), po),
         {}, {}};
  const Tensor x = inputs(c.arch);
  s.points = quant::int8_activations(s.q.model, x);
  // the logits: the model's last layer (its DequantizeLayer) on the last point, as its forward does
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  Sequential& net = *s.q.model.net;
  EXPECT_EQ(net.layer(net.size() - 1).kind(), "dequantize");
  s.logits = net.layer(net.size() - 1).forward(ctx, s.points.back());
  return sides.emplace(key, std::move(s)).first->second;
}

// One case in one form: the product rule ORT runs for it on this CPU, what the exporter wrote.
struct QRun {
  std::string name, knobs;
  convert::OnnxExport ex;
  Side* side = nullptr;
};

const QRun& qrun(const QCase& c, Form f) {
  static std::map<std::string, QRun> runs;
  const std::string name = std::string(c.name) + "." + form_name(f);
  auto it = runs.find(name);
  if (it != runs.end()) return it->second;
  QRun r;
  r.name = name;
  const Policy p = Policy::parse(std::string(c.preset) + "," + c.quant);
  const DType act = p.quant_act_dtype == QuantActDtype::uint8 ? DType::u8 : DType::i8;
  r.knobs = p.quant_scheme == QuantToolchain::ort ? oracle::ort_dot_knobs(act, form_name(f), "all") : "";
  r.side = &side(c, r.knobs);
  convert::OnnxExportOptions o;
  o.quant_form = f;
  o.expose_points = f == Form::qoperator;
  r.ex = convert::export_onnx(r.side->q.model, o);
  return runs.emplace(name, std::move(r)).first->second;
}

const CaseDir& quant_export_run() {
  static const CaseDir run(oracle::ort_oracle("run_models.sh"), "onnx_quant_export", [](CaseDir& d) {
    for (const QCase& c : kCases) {
      const std::string x = d.input(std::string(c.name) + ".x", inputs(c.arch));
      for (Form f : kForms) {
        const QRun& r = qrun(c, f);
        convert::write_onnx((d.dir() / (r.name + ".onnx")).string(), r.ex.bytes);
        d.add_case({{"name", r.name}, {"kind", "run"}, {"model", r.name + ".onnx"}, {"x", x}});
      }
    }
  });
  return run;
}

// Elements that differ (bitwise: -0 and +0 differ too) and the largest |difference|.
struct Diff {
  int64_t n = 0, numel = 0;
  double max = 0;
};
Diff diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return {a.numel(), a.numel(), INFINITY};
  Diff d{0, a.numel(), 0};
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.at(i), y = b.at(i);
    if (x != y || std::signbit(x) != std::signbit(y)) ++d.n, d.max = std::max(d.max, std::fabs(x - y));
  }
  return d;
}

TEST(OrtQuantExport, OrtSchemeModelsRunBitForBitInOnnxRuntime) {
  ORACLE_GROUP(run, quant_export_run);
  std::cout << run.log();
  std::cout << "| model | form | points | integers that differ | logits that differ | nodes |\n|---|---|---|---|---|---|\n";
  for (const QCase& c : kCases) {
    for (Form f : kForms) {
      const QRun& r = qrun(c, f);
      SCOPED_TRACE(r.name);
      Diff ints;
      if (f == Form::qoperator) {
        ASSERT_EQ(r.ex.num_points, static_cast<int64_t>(r.side->points.size()));
        for (std::size_t k = 0; k < r.side->points.size(); ++k) {
          const Tensor theirs = run.out(r.name, "point_" + std::to_string(k));
          EXPECT_EQ(theirs.dtype(), r.side->points[k].dtype()) << "point " << k;
          const Diff d = diff(theirs, r.side->points[k]);
          ints.n += d.n, ints.numel += d.numel, ints.max = std::max(ints.max, d.max);
        }
      }
      const Diff lg = diff(run.out(r.name, "logits"), r.side->logits);
      std::ostringstream row;
      row << "| " << c.name << (r.knobs.empty() ? "" : " (" + r.knobs.substr(1) + ")") << " | " << form_name(f)
          << " | " << (f == Form::qoperator ? std::to_string(r.side->points.size()) : "-") << " | "
          << (f == Form::qoperator ? std::to_string(ints.n) + " of " + std::to_string(ints.numel) +
                                         (ints.n ? ", up to " + std::to_string(static_cast<int>(ints.max)) + " steps" : "")
                                   : "-")
          << " | "
          << lg.n << " of " << lg.numel << " | " << r.ex.num_nodes << (c.exact ? "" : " (information only)") << " |";
      std::cout << row.str() << "\n";
      for (const std::string& note : r.ex.notes) std::cout << "    ORT differs: " << note << "\n";
      if (c.exact) {
        // ORT's arithmetic: no note, but the one on the product rule where this CPU needs it
        EXPECT_EQ(r.ex.notes.size(), r.knobs.empty() ? 0u : 1u) << r.ex.notes.front();
        if (!r.knobs.empty()) EXPECT_NE(r.ex.notes.front().find("(quant_u8s8_dot)"), std::string::npos);
        EXPECT_EQ(ints.n, 0) << row.str();
        EXPECT_EQ(lg.n, 0) << row.str();
      }
    }
  }
}

// The other toolchain's model is not ORT's arithmetic: the exporter says where (notes), and ORT's
// run shows how much that moves (information; a test that some output moves would depend on data).
TEST(OrtQuantExport, AnotherSchemesModelRunsInOnnxRuntimeWithTheDifferencesNamed) {
  ORACLE_GROUP(run, quant_export_run);
  const QCase& c = kCases[6];
  ASSERT_EQ(std::string(c.name), "lenet5_torch_qnnpack");
  for (Form f : kForms) {
    const QRun& r = qrun(c, f);
    // qnnpack quantizes by the float32 reciprocal and forms the multiplier as (s_w*s_in)*(1/s_out)
    ASSERT_GE(r.ex.notes.size(), 2u);
    EXPECT_NE(r.ex.notes[0].find("quant_act_scale_op"), std::string::npos) << r.ex.notes[0];
    const Tensor theirs = run.out(r.name, "logits");
    const Diff lg = diff(theirs, r.side->logits);
    const oracle::LogitAgreement g = oracle::logit_agreement(theirs, r.side->logits);
    std::cout << r.name << ": " << lg.n << " of " << lg.numel << " logits differ, max |d|/max|logit| " << g.rel
              << ", " << g.flips << " of 1000 predictions differ\n";
  }
}

}  // namespace
}  // namespace driftlab
