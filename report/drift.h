// drift/'s results as JSON: the structs of drift/drift.h (output errors, localisation, a cross-
// policy drift, an attribution), and the files `driftlab drift --json` and `driftlab attribute
// --json` write (driftlab/drift.h's results).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "driftlab/drift.h"

namespace driftlab {

// In drift/'s namespace, beside the structs, so that a call finds them by its argument's type.
nlohmann::json to_json(const OutputDrift& d);
nlohmann::json to_json(const Localisation& l);
nlohmann::json to_json(const Attribution& a);
// {"accuracy": [{policy, label, accuracy}], "pairs": [{a, b, a_label, b_label, outputs, localisation}]},
// policies as strings.
nlohmann::json to_json(const CrossPolicyDrift& d);

namespace report {

// The model, its file, the data and the device, then to_json(r.drift)'s keys; indented, one
// newline at the end.
std::string drift_json(const DriftResult& r);
// to_json(r.attribution), indented, one newline at the end.
std::string attribute_json(const AttributeResult& r);

}  // namespace report
}  // namespace driftlab
