// The library face (driftlab/model.h says what the face is): one saved model's weights under
// several policies (drift/drift.h cross_policy_drift: accuracy, output errors, the first layer
// where two policies part), and which knob between two policies explains the difference
// (drift/drift.h attribute), at inference, through training, or over int8 models. The results
// are drift/'s structs; report/drift.h writes them as JSON.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "drift/drift.h"
#include "engine/data/datasets.h"

namespace driftlab {

struct DriftRequest {
  std::string weights;              // an fp32 model file (.dlm)
  std::string model;                // when set, the model the file must hold
  std::string policies = "tensorflow,theano,torch";  // split_policies' syntax (driftlab/policy.h)
  bool convert = true;              // convert the weights between conventions (false: raw tensors)
  double tolerance = 1e-5;          // localisation: max|d|/max|b| beyond which a layer diverges
  int64_t localise_batch = 100;     // localise on the first N test images
  std::string device = "cpu";       // cpu | cuda
  // > 0: the fp32 model and each policy's int8 model, calibrated on the first N training samples
  // (calib_batch per forward)
  int64_t quantize = 0, calib_batch = 32;
  DataSpec data;
};

// What a drift run says before its first evaluation: the model and the test split.
struct DriftStart {
  std::string model, weights, weights_policy;  // the file's model, path and training policy
  std::string dataset;                         // the test split's name
  int64_t n = 0;                               // its size
};
struct DriftResult : DriftStart {
  bool converted = true;
  std::string device;
  bool int8 = false;  // compared the fp32 model and int8 models (DriftRequest::quantize)
  CrossPolicyDrift drift;
};
struct DriftHooks {
  std::function<void(const DriftStart&)> on_start;              // data loaded, no policy parsed yet
  std::function<void(const std::string& from)> on_calibration;  // quantize: the calibration samples
  std::function<void(const PolicyAccuracy&)> on_policy;         // each policy's accuracy when known
};
// Every policy is parsed (after on_start) before the first is run, so a misspelt knob costs no
// evaluation.
DriftResult drift(const DriftRequest& r, DatasetLoader& loader, const DriftHooks& hooks = {});

struct AttributeRequest {
  std::string weights;              // an fp32 model file (.dlm)
  std::string model;                // when set, the model the file must hold
  std::string from = "tensorflow", to = "torch";  // policy strings
  bool convert = true;
  int train = 0;                    // > 0: also train N epochs from the same weights under each policy
  int64_t batch = 128;              // training batch
  double lr = 0.01, momentum = 0.9;  // training: SGD
  uint64_t seed = 1;
  std::string device = "cpu";
  int64_t quantize = 0, calib_batch = 32;  // > 0: int8 models calibrated on the first N training samples
  DataSpec data;
};
struct AttributeResult {
  std::string model;                // the model the file holds
  std::string dataset;              // the test split's name
  int64_t n = 0;                    // its size
  int64_t train_n = 0;              // training images (train > 0)
  Attribution attribution;
};
struct AttributeHooks {
  std::function<void(const std::string& from)> on_calibration;  // quantize: the calibration samples
};
AttributeResult attribute(const AttributeRequest& r, DatasetLoader& loader, const AttributeHooks& hooks = {});

}  // namespace driftlab
