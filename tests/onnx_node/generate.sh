#!/usr/bin/env bash
# Writes the ONNX backend node tests into DIR/node/test_<case>/ (model.onnx, test_data_set_0/
# input_N.pb, output_N.pb) with the generators Debian's python3-onnx ships (the data is not
# packaged). The generator predates NumPy 1.24's removal of np.float & co; the aliases are put
# back for it. Exit 77 when python3-onnx is missing (the suite skips, or fails under
# DRIFTLAB_REQUIRE_ORACLES=1).
set -euo pipefail
out=${1:?usage: generate.sh DIR}
/usr/bin/python3 -c 'import onnx.backend.test' 2>/dev/null || { echo "python3 cannot import onnx.backend.test"; exit 77; }
mkdir -p "$out"
/usr/bin/python3 - "$out" <<'PY' > "$out/generate.log" 2>&1 || { tail -20 "$out/generate.log"; exit 1; }
import runpy, sys
import numpy as np
for a, b in (("float", float), ("int", int), ("bool", bool), ("object", object), ("complex", complex), ("str", str)):
    if not hasattr(np, a):
        setattr(np, a, b)
sys.argv = ["onnx.backend.test.cmd_tools", "generate-data", "-o", sys.argv[1]]
runpy.run_module("onnx.backend.test.cmd_tools", run_name="__main__")
PY
test -d "$out/node" || { echo "no node cases written in $out"; exit 1; }
