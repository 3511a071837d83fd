// Policy as a value: presets, parse <-> print round trips, get/set of every knob value, error
// messages that name the bad knob/value and list what is allowed, and diff between presets.
// The tests walk knob_table(), so a new knob is covered by adding its row (no edit here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/policy.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

const char* const kPresets[] = {"tensorflow", "theano", "torch"};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Candidate spellings tried on numeric knobs (their ranges differ; each knob accepts some).
const char* const kNumbers[] = {"0", "0.5", "1", "0.25", "1e-7", "1e-3", "0.1", "0.30000000000000004"};

TEST(PolicyPresets, NamesAndCanonicalStrings) {
  for (const char* name : kPresets) {
    const Policy p = Policy::preset_named(name);
    EXPECT_EQ(p.preset, name);
    EXPECT_EQ(p.to_string(), name);  // an unmodified preset prints as its name alone
    EXPECT_EQ(Policy::parse(name).to_full_string(), p.to_full_string());
  }
  EXPECT_EQ(Policy::torch().to_full_string(), Policy::preset_named("torch").to_full_string());
  EXPECT_EQ(Policy::tensorflow().to_full_string(), Policy::preset_named("tensorflow").to_full_string());
  EXPECT_EQ(Policy::theano().to_full_string(), Policy::preset_named("theano").to_full_string());
  EXPECT_EQ(Policy().to_full_string(), Policy::torch().to_full_string());  // defaults are torch's
}

TEST(PolicyPresets, FullStringListsEveryKnobInTableOrder) {
  const Policy p = Policy::theano();
  std::string want = "theano";
  for (const KnobInfo& k : knob_table()) want += "," + k.name + "=" + p.get(k.name);
  EXPECT_EQ(p.to_full_string(), want);
  // And it parses back to the same policy.
  EXPECT_EQ(Policy::parse(p.to_full_string()).to_full_string(), p.to_full_string());
  EXPECT_EQ(Policy::parse(p.to_full_string()).to_string(), "theano");
}

TEST(PolicyParse, ModifiedPresetRoundTrip) {
  const char* specs[] = {"torch,conv_backend=reference,relu_grad_at_zero=0.5",
                         "tensorflow,conv_kernel_flip=true,dtype=float64",
                         "theano,conv_kernel_flip=false,shuffle=none,ce_clip_eps=0.001",
                         "torch,ce_formulation=softmax_log,loss_reduction=sum,acc_order=pairwise"};
  for (const char* spec : specs) {
    const Policy p = Policy::parse(spec);
    const Policy q = Policy::parse(p.to_string());
    EXPECT_EQ(q.to_full_string(), p.to_full_string()) << spec;
    EXPECT_EQ(q.to_string(), p.to_string()) << spec;  // canonical form is a fixed point
  }
  // Canonical order is the knob table's, whatever order the spec used.
  const Policy p = Policy::parse("torch,conv_backend=reference,relu_grad_at_zero=0.5");
  std::string want = "torch";
  for (const KnobInfo& k : knob_table()) {
    if (k.name == "relu_grad_at_zero") want += ",relu_grad_at_zero=0.5";
    if (k.name == "conv_backend") want += ",conv_backend=reference";
  }
  EXPECT_EQ(p.to_string(), want);
  EXPECT_EQ(p.relu_grad_at_zero, 0.5);
  EXPECT_EQ(p.conv_backend, KernelBackend::reference);
}

TEST(PolicyParse, SettingThePresetValuePrintsNothing) {
  EXPECT_EQ(Policy::parse("torch,relu_grad_at_zero=0").to_string(), "torch");
  EXPECT_EQ(Policy::parse("theano,relu_grad_at_zero=0.5,conv_kernel_flip=true").to_string(), "theano");
  EXPECT_EQ(Policy::parse("tensorflow, weight_layout = hwio").to_string(), "tensorflow");  // spaces ignored
}

// A knob given twice is refused (until 2026-11-24 the later value silently won): a study spec
// that sets a knob in two places has a mistake in one of them. The same value twice too.
TEST(PolicyParse, KnobGivenTwiceIsAnErrorNamingIt) {
  for (const char* spec : {"torch,relu_grad_at_zero=0.5,relu_grad_at_zero=0.25",
                           "torch,relu_grad_at_zero=0.5,dtype=float64,relu_grad_at_zero=0.5"}) {
    const std::string msg = error_of([&] { Policy::parse(spec); });
    EXPECT_TRUE(contains(msg, "knob 'relu_grad_at_zero' given twice")) << spec << ": " << msg;
    EXPECT_TRUE(contains(msg, spec)) << msg;
  }
}

TEST(PolicyKnobs, NamesUniqueAndDocumented) {
  std::set<std::string> names;
  for (const KnobInfo& k : knob_table()) {
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate knob " << k.name;
    EXPECT_FALSE(k.group.empty()) << k.name;
    EXPECT_FALSE(k.what.empty()) << k.name;
    EXPECT_FALSE(k.tensorflow.empty()) << k.name;
    EXPECT_FALSE(k.theano.empty()) << k.name;
    EXPECT_FALSE(k.torch.empty()) << k.name;
    EXPECT_FALSE(k.source.empty()) << k.name;
    std::set<std::string> values(k.values.begin(), k.values.end());
    EXPECT_EQ(values.size(), k.values.size()) << "duplicate value in " << k.name;
    EXPECT_EQ(&knob_info(k.name), &knob_info(k.name));
    EXPECT_EQ(knob_info(k.name).name, k.name);
  }
  EXPECT_GE(names.size(), 22u);  // the knobs of layers.md section 10 and training A.1-A.6 we model
}

TEST(PolicyKnobs, PresetValuesAreAllowedValues) {
  for (const char* preset : kPresets) {
    const Policy p = Policy::preset_named(preset);
    for (const KnobInfo& k : knob_table()) {
      const std::string v = p.get(k.name);
      if (k.values.empty()) {
        char* end = nullptr;
        std::strtod(v.c_str(), &end);
        EXPECT_TRUE(!v.empty() && *end == '\0') << preset << " " << k.name << "=" << v << " is not a number";
      } else {
        EXPECT_NE(std::find(k.values.begin(), k.values.end(), v), k.values.end()) << preset << " " << k.name << "=" << v;
      }
    }
  }
}

TEST(PolicyKnobs, EveryValueSettableGettableAndRoundTrips) {
  for (const char* preset : kPresets) {
    for (const KnobInfo& k : knob_table()) {
      std::vector<std::string> values(k.values.begin(), k.values.end());
      int accepted = 0;
      if (values.empty()) {
        for (const char* n : kNumbers) {
          Policy p = Policy::preset_named(preset);
          try {
            p.set(k.name, n);
          } catch (const Error& e) {
            EXPECT_TRUE(contains(e.what(), k.name)) << e.what();  // out of this knob's range
            continue;
          }
          ++accepted;
          // Printed in the shortest form that reads back to the same double, bit for bit.
          EXPECT_EQ(std::strtod(p.get(k.name).c_str(), nullptr), std::strtod(n, nullptr)) << k.name << "=" << n;
          const Policy q = Policy::parse(p.to_string());
          EXPECT_EQ(q.to_full_string(), p.to_full_string()) << k.name << "=" << n;
          EXPECT_EQ(q.get(k.name), p.get(k.name));
        }
        EXPECT_GE(accepted, 2) << k.name << " accepted too few of the candidate numbers";
        continue;
      }
      for (const std::string& v : values) {
        Policy p = Policy::preset_named(preset);
        p.set(k.name, v);
        EXPECT_EQ(p.get(k.name), v) << preset << " " << k.name;
        const Policy base = Policy::preset_named(preset);
        const bool differs = base.get(k.name) != v;
        EXPECT_EQ(contains(p.to_string(), "," + k.name + "=" + v), differs) << p.to_string();
        const Policy q = Policy::parse(p.to_string());
        EXPECT_EQ(q.to_full_string(), p.to_full_string()) << p.to_string();
        // Changing one knob changes exactly that knob.
        const std::vector<KnobDiff> d = diff(base, p);
        if (k.name == "quant_scheme") {  // the group knob: it changes itself and quant_* knobs only
          for (const KnobDiff& kd : d) EXPECT_EQ(kd.knob.rfind("quant_", 0), 0u) << kd.knob;
          continue;
        }
        ASSERT_EQ(d.size(), differs ? 1u : 0u) << p.to_string();
        if (differs) {
          EXPECT_EQ(d[0].knob, k.name);
          EXPECT_EQ(d[0].b, v);
        }
      }
    }
  }
}

TEST(PolicyKnobs, AwkwardDoublesRoundTripBitExact) {
  for (const char* v : {"0.30000000000000004", "0.1", "1e-7", "1.0000000000000002e-7", "0.49999999999999994"}) {
    Policy p = Policy::torch();
    p.set("ce_clip_eps", v);
    const Policy q = Policy::parse(p.to_string());
    EXPECT_EQ(q.ce_clip_eps, p.ce_clip_eps) << v << " printed as " << p.get("ce_clip_eps");
    EXPECT_EQ(q.ce_clip_eps, std::strtod(v, nullptr)) << v;
  }
}

TEST(PolicyErrors, UnknownKnobNamesItAndListsKnownKnobs) {
  for (auto f : {+[] { Policy::parse("torch,relu_grad_at_0=0.5"); },
                 +[] { Policy p; p.set("relu_grad_at_0", "0.5"); },
                 +[] { Policy::torch().get("relu_grad_at_0"); }, +[] { knob_info("relu_grad_at_0"); }}) {
    const std::string msg = error_of(f);
    EXPECT_TRUE(contains(msg, "relu_grad_at_0")) << msg;
    for (const KnobInfo& k : knob_table()) EXPECT_TRUE(contains(msg, k.name)) << msg << " lacks " << k.name;
  }
}

TEST(PolicyErrors, BadEnumValueNamesKnobValueAndAllowed) {
  const std::string msg = error_of([] { Policy::parse("torch,conv_same_pad=middle"); });
  EXPECT_TRUE(contains(msg, "conv_same_pad")) << msg;
  EXPECT_TRUE(contains(msg, "middle")) << msg;
  for (const std::string& v : knob_info("conv_same_pad").values) EXPECT_TRUE(contains(msg, v)) << msg;

  const std::string bmsg = error_of([] { Policy::parse("theano,conv_kernel_flip=yes"); });
  EXPECT_TRUE(contains(bmsg, "conv_kernel_flip")) << bmsg;
  EXPECT_TRUE(contains(bmsg, "yes")) << bmsg;
  EXPECT_TRUE(contains(bmsg, "true")) << bmsg;
  EXPECT_TRUE(contains(bmsg, "false")) << bmsg;

  // Values are case-sensitive, as printed.
  EXPECT_TRUE(contains(error_of([] { Policy::parse("torch,dtype=Float64"); }), "Float64"));
}

TEST(PolicyErrors, BadNumbers) {
  for (const char* v : {"abc", "", "0.5x", "1,5"}) {
    const std::string spec = std::string("torch,relu_grad_at_zero=") + v;
    const std::string msg = error_of([&] { Policy::parse(spec); });
    EXPECT_TRUE(contains(msg, "relu_grad_at_zero")) << spec << ": " << msg;
  }
  const std::string msg = error_of([] { Policy::parse("torch,relu_grad_at_zero=abc"); });
  EXPECT_TRUE(contains(msg, "abc")) << msg;
  // Out of range (a gradient at 0 outside [0,1]; a clip epsilon above 0.5 would invert the clip),
  // and NaN, which no range contains.
  for (const char* spec : {"torch,relu_grad_at_zero=2", "torch,relu_grad_at_zero=-0.5", "torch,ce_clip_eps=0.7",
                           "torch,relu_grad_at_zero=nan", "torch,ce_clip_eps=inf"}) {
    const std::string m = error_of([&] { Policy::parse(spec); });
    EXPECT_FALSE(m.empty()) << spec;
  }
  EXPECT_TRUE(contains(error_of([] { Policy::parse("torch,relu_grad_at_zero=2"); }), "outside"));
}

TEST(PolicyErrors, UnknownOrMissingPreset) {
  const std::string msg = error_of([] { Policy::parse("caffe"); });
  EXPECT_TRUE(contains(msg, "caffe")) << msg;
  for (const char* p : kPresets) EXPECT_TRUE(contains(msg, p)) << msg;
  EXPECT_FALSE(error_of([] { Policy::preset_named("Torch"); }).empty());
  EXPECT_FALSE(error_of([] { Policy::parse(""); }).empty());
  EXPECT_FALSE(error_of([] { Policy::parse("relu_grad_at_zero=0.5"); }).empty());
  EXPECT_FALSE(error_of([] { Policy::parse(",torch"); }).empty());
}

TEST(PolicyErrors, MalformedPairs) {
  for (const char* spec : {"torch,", "torch,relu_grad_at_zero", "torch,=0.5", "torch,,dtype=float64"}) {
    const std::string msg = error_of([&] { Policy::parse(spec); });
    EXPECT_FALSE(msg.empty()) << spec;
  }
}

TEST(PolicyDiff, TensorflowVsTorchListsExactlyTheDifferingKnobs) {
  const Policy tf = Policy::tensorflow(), pt = Policy::torch();
  const std::vector<KnobDiff> d = diff(tf, pt);
  // Exactly the knobs whose printed values differ, in table order, with both values.
  std::vector<std::string> want;
  for (const KnobInfo& k : knob_table())
    if (tf.get(k.name) != pt.get(k.name)) want.push_back(k.name);
  std::vector<std::string> got;
  for (const KnobDiff& e : d) {
    got.push_back(e.knob);
    EXPECT_EQ(e.a, tf.get(e.knob));
    EXPECT_EQ(e.b, pt.get(e.knob));
    EXPECT_NE(e.a, e.b);
  }
  EXPECT_EQ(got, want);
  // The documented differences (layers.md section 10, training A.1-A.6) are all there ...
  const std::set<std::string> gs(got.begin(), got.end());
  for (const char* k : {"conv_same_pad", "flatten_order", "weight_layout", "init_weight", "init_bias",
                        "hard_sigmoid_kind", "hard_sigmoid_grad_edges", "ce_formulation", "sgd_form",
                        "weight_decay_mode", "weight_decay_on_bias", "rng_engine", "shuffle"})
    EXPECT_TRUE(gs.count(k)) << k << " should differ between tensorflow and torch";
  // ... and what the two share is not.
  for (const char* k : {"conv_kernel_flip", "relu_grad_at_zero", "maxpool_grad_ties", "ce_clip_eps",
                        "loss_reduction", "acc_order", "dtype"})
    EXPECT_FALSE(gs.count(k)) << k << " is the same in tensorflow and torch";
  // And diff is antisymmetric, and empty against itself.
  const std::vector<KnobDiff> r = diff(pt, tf);
  ASSERT_EQ(r.size(), d.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].knob, d[i].knob);
    EXPECT_EQ(r[i].a, d[i].b);
  }
  EXPECT_TRUE(diff(tf, tf).empty());
}

TEST(PolicyDiff, TheanoIsTensorflowPlusTheanoOps) {
  // Keras-on-Theano: Keras's layer code (as tensorflow) with Theano's ops.
  std::set<std::string> got;
  for (const KnobDiff& e : diff(Policy::tensorflow(), Policy::theano())) got.insert(e.knob);
  for (const char* k : {"conv_same_pad", "conv_kernel_flip", "relu_grad_at_zero", "maxpool_grad_ties", "rng_engine"})
    EXPECT_TRUE(got.count(k)) << k;
  for (const char* k : {"flatten_order", "weight_layout", "init_weight", "ce_formulation", "sgd_form", "shuffle"})
    EXPECT_FALSE(got.count(k)) << k;
}

}  // namespace
}  // namespace driftlab
