// A hand-written Keras functional model in TF.js's layers format (model.json + one float32 shard),
// shared by the Keras importer's tests: keras#19291's case (Conv2D padding='same', strides 2, on
// an even input) twice, with the layers a MobileNet-style block uses around it. Input 32x32x3
// (synthetic-cifar10's size), 10 logits.
#pragma once
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "tests/test_util.h"

namespace driftlab {
namespace keras_cases {

struct KerasFile {
  std::string model_json;  // model.json
  std::string weights;     // the shard "group1-shard1of1.bin"
};

class KerasWriter {
 public:
  explicit KerasWriter(uint64_t seed) : seed_(seed) {}
  // A layer reading `inputs` (layer names); returns its name.
  std::string layer(const std::string& cls, const std::string& name, nlohmann::json cfg,
                    const std::vector<std::string>& inputs) {
    cfg["name"] = name;
    nlohmann::json in = nlohmann::json::array();
    for (const std::string& i : inputs) in.push_back({i, 0, 0, nlohmann::json::object()});
    layers_.push_back({{"class_name", cls}, {"name", name}, {"config", cfg},
                       {"inbound_nodes", inputs.empty() ? nlohmann::json::array() : nlohmann::json::array({in})}});
    return name;
  }
  // A float32 weight drawn uniformly from [lo, hi).
  void weight(const std::string& name, const Shape& shape, double lo, double hi) {
    const Tensor t = random_tensor(shape, DType::f32, ++seed_, lo, hi);
    manifest_.push_back({{"name", name}, {"shape", shape}, {"dtype", "float32"}});
    bytes_.append(reinterpret_cast<const char*>(t.data<float>()), static_cast<std::size_t>(t.numel()) * 4);
  }
  KerasFile file(const std::string& input, const std::string& output) const {
    const nlohmann::json j = {
        {"format", "layers-model"},
        {"generatedBy", "driftlab tests (hand-written Keras functional model)"},
        {"convertedBy", nullptr},
        {"modelTopology",
         {{"class_name", "Model"},
          {"config", {{"name", "keras_same_stride2"}, {"layers", layers_}, {"input_layers", {{input, 0, 0}}},
                      {"output_layers", {{output, 0, 0}}}}},
          {"keras_version", "tfjs-layers 4.22.0"},
          {"backend", "tensor_flow.js"}}},
        {"weightsManifest", {{{"paths", {"group1-shard1of1.bin"}}, {"weights", manifest_}}}}};
    return {j.dump(1), bytes_};
  }

 private:
  uint64_t seed_;
  nlohmann::json layers_ = nlohmann::json::array(), manifest_ = nlohmann::json::array();
  std::string bytes_;
};

inline KerasFile same_stride2_model(uint64_t seed) {
  KerasWriter w(seed);
  using nlohmann::json;
  const json cl = "channels_last";
  w.layer("InputLayer", "input_1", {{"batch_input_shape", {nullptr, 32, 32, 3}}, {"dtype", "float32"}, {"sparse", false}}, {});
  // keras#19291: 'same' at stride 2 on an even input (TF pads 0/1, a PyTorch port 1/1)
  w.layer("Conv2D", "down", {{"filters", 8}, {"kernel_size", {3, 3}}, {"strides", {2, 2}}, {"padding", "same"},
                             {"data_format", cl}, {"dilation_rate", {1, 1}}, {"activation", "relu"}, {"use_bias", true}},
          {"input_1"});
  w.weight("down/kernel", {3, 3, 3, 8}, -0.4, 0.4);
  w.weight("down/bias", {8}, -0.1, 0.1);
  w.layer("BatchNormalization", "bn", {{"axis", -1}, {"momentum", 0.99}, {"epsilon", 0.001}, {"center", true}, {"scale", true}},
          {"down"});
  w.weight("bn/gamma", {8}, 0.5, 1.5);
  w.weight("bn/beta", {8}, -0.2, 0.2);
  w.weight("bn/moving_mean", {8}, 0.0, 0.5);
  w.weight("bn/moving_variance", {8}, 0.2, 1.0);
  w.layer("ReLU", "r6", {{"max_value", 6}}, {"bn"});
  w.layer("DepthwiseConv2D", "dw", {{"kernel_size", {3, 3}}, {"strides", {1, 1}}, {"padding", "same"}, {"depth_multiplier", 1},
                                   {"data_format", cl}, {"dilation_rate", {1, 1}}, {"activation", "linear"}, {"use_bias", false}},
          {"r6"});
  w.weight("dw/depthwise_kernel", {3, 3, 8, 1}, -0.5, 0.5);
  w.layer("Conv2D", "pw", {{"filters", 8}, {"kernel_size", {1, 1}}, {"strides", {1, 1}}, {"padding", "valid"},
                           {"data_format", cl}, {"dilation_rate", {1, 1}}, {"activation", "linear"}, {"use_bias", true}},
          {"dw"});
  w.weight("pw/kernel", {1, 1, 8, 8}, -0.5, 0.5);
  w.weight("pw/bias", {8}, -0.1, 0.1);
  w.layer("Add", "add", json::object(), {"r6", "pw"});
  w.layer("ZeroPadding2D", "zp", {{"padding", {{1, 0}, {1, 0}}}, {"data_format", cl}}, {"input_1"});
  w.layer("Conv2D", "side", {{"filters", 4}, {"kernel_size", {3, 3}}, {"strides", {2, 2}}, {"padding", "valid"},
                             {"data_format", cl}, {"dilation_rate", {1, 1}}, {"activation", "tanh"}, {"use_bias", true}},
          {"zp"});
  w.weight("side/kernel", {3, 3, 3, 4}, -0.4, 0.4);
  w.weight("side/bias", {4}, -0.1, 0.1);
  w.layer("Concatenate", "cat", {{"axis", -1}}, {"add", "side"});
  w.layer("MaxPooling2D", "pool", {{"pool_size", {2, 2}}, {"strides", {2, 2}}, {"padding", "valid"}, {"data_format", cl}},
          {"cat"});
  w.layer("Conv2D", "down2", {{"filters", 8}, {"kernel_size", {3, 3}}, {"strides", {2, 2}}, {"padding", "same"},
                              {"data_format", cl}, {"dilation_rate", {1, 1}}, {"activation", "sigmoid"}, {"use_bias", true}},
          {"pool"});
  w.weight("down2/kernel", {3, 3, 12, 8}, -0.3, 0.3);
  w.weight("down2/bias", {8}, -0.1, 0.1);
  w.layer("Flatten", "flat", {{"data_format", cl}}, {"down2"});
  w.layer("Dropout", "drop", {{"rate", 0.25}}, {"flat"});
  w.layer("Dense", "fc", {{"units", 10}, {"activation", "linear"}, {"use_bias", true}}, {"drop"});
  w.weight("fc/kernel", {128, 10}, -0.5, 0.5);
  w.weight("fc/bias", {10}, -0.1, 0.1);
  return w.file("input_1", "fc");
}

// SeparableConv2D (depth multiplier 2, 'same' at stride 2 on an even input, relu) between an input
// of 12x12x3 and GlobalAveragePooling2D + Dense(5): the importer's two-node form of it.
inline KerasFile separable_model(uint64_t seed) {
  KerasWriter w(seed);
  using nlohmann::json;
  w.layer("InputLayer", "input_1", {{"batch_input_shape", {nullptr, 12, 12, 3}}, {"dtype", "float32"}, {"sparse", false}}, {});
  w.layer("SeparableConv2D", "sep", {{"filters", 7}, {"kernel_size", {3, 3}}, {"strides", {2, 2}}, {"padding", "same"},
                                     {"data_format", "channels_last"}, {"dilation_rate", {1, 1}}, {"depth_multiplier", 2},
                                     {"activation", "relu"}, {"use_bias", true}},
          {"input_1"});
  w.weight("sep/depthwise_kernel", {3, 3, 3, 2}, -0.5, 0.5);
  w.weight("sep/pointwise_kernel", {1, 1, 6, 7}, -0.5, 0.5);
  w.weight("sep/bias", {7}, -0.1, 0.1);
  w.layer("GlobalAveragePooling2D", "gap", {{"data_format", "channels_last"}}, {"sep"});
  w.layer("Dense", "fc", {{"units", 5}, {"activation", "linear"}, {"use_bias", true}}, {"gap"});
  w.weight("fc/kernel", {7, 5}, -0.5, 0.5);
  w.weight("fc/bias", {5}, -0.1, 0.1);
  return w.file("input_1", "fc");
}

// Conv2D with activation swish (x * sigmoid(x), TF.js's 'swish') on 6x6x2, Flatten, Dense(3).
inline KerasFile swish_model(uint64_t seed) {
  KerasWriter w(seed);
  w.layer("InputLayer", "input_1", {{"batch_input_shape", {nullptr, 6, 6, 2}}, {"dtype", "float32"}, {"sparse", false}}, {});
  w.layer("Conv2D", "c", {{"filters", 4}, {"kernel_size", {3, 3}}, {"strides", {1, 1}}, {"padding", "same"},
                          {"data_format", "channels_last"}, {"dilation_rate", {1, 1}}, {"activation", "swish"},
                          {"use_bias", true}},
          {"input_1"});
  w.weight("c/kernel", {3, 3, 2, 4}, -1.0, 1.0);
  w.weight("c/bias", {4}, -0.5, 0.5);
  w.layer("Flatten", "f", {{"data_format", "channels_last"}}, {"c"});
  w.layer("Dense", "fc", {{"units", 3}, {"activation", "linear"}, {"use_bias", true}}, {"f"});
  w.weight("fc/kernel", {144, 3}, -0.3, 0.3);
  w.weight("fc/bias", {3}, -0.1, 0.1);
  return w.file("input_1", "fc");
}

}  // namespace keras_cases
}  // namespace driftlab
