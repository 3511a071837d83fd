// ONNX Runtime (onnxruntime-node, CPU execution provider, MLAS kernels) side of driftlab's int8
// oracle (tests/oracles/test_quant_oracle_ort.cpp); run by oracle.sh after make_models.py.
//
// Usage: node ort_oracle.js CASE_DIR [K/N]
//
// For each case of kind 'model' in CASE_DIR/cases.json (the protocol of tests/oracles/oracle_util.h)
// it reads CASE_DIR/<name>.models.json {x: input file, models: {variant: [onnx files]}} written by
// make_models.py, runs every model on x under each graph optimization level below, one thread, and
// writes each graph output as CASE_DIR/out/<name>.<variant>.<level>.<output>.npy (the dtype ORT
// returned: float32 for the QDQ models' dequantized outputs, int8/uint8 for the QOperator model's
// y0, y1, ...). The optimized graphs are saved next to the models (<model>.<level>.opt.onnx), so
// that make_models.py --summary can list which kernels ORT actually ran (QLinearConv, QGemm, ...).
//
// Levels: 'all' (ORT_ENABLE_ALL, the default of an InferenceSession: on x86 the int8 activations of
// a QDQ model become uint8 with zero point + 128 (QDQS8ToU8Transformer), then QDQ node groups are
// fused into QLinearConv / QGemm and the Q/DQ pairs around MaxPool/Reshape dropped), 'all_s8' (the
// same with session.qdqisint8allowed=1: int8 kept, as on ARM) and 'disabled' (every node runs as
// written: a QDQ model then computes in float, DequantizeLinear -> float Conv/Gemm -> QuantizeLinear).
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const LEVELS = ['all', 'all_s8', 'disabled'];

const { readNpyF32, writeNpy } = require('./npy');

// ---------------------------------------------------------------------------------------------

function sessionOptions(level) {
  const o = { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' };
  if (level === 'disabled') return { ...o, graphOptimizationLevel: 'disabled' };
  o.graphOptimizationLevel = 'all';
  // The ARM path on x86: session.qdqisint8allowed=1 keeps int8 activations in the fused kernels
  // instead of QDQS8ToU8Transformer's uint8 (+128) conversion.
  if (level === 'all_s8') o.extra = { session: { qdqisint8allowed: '1' } };
  return o;
}

async function runCase(dir, c) {
  const spec = JSON.parse(fs.readFileSync(path.join(dir, `${c.name}.models.json`), 'utf8'));
  const x = readNpyF32(path.join(dir, spec.x));
  const outDir = path.join(dir, 'out');
  fs.mkdirSync(outDir, { recursive: true });
  for (const [variant, files] of Object.entries(spec.models)) {
    for (const file of files) {
      for (const level of LEVELS) {
        const opts = sessionOptions(level);
        if (level !== 'disabled') opts.optimizedModelFilePath = path.join(dir, file.replace(/\.onnx$/, `.${level}.opt.onnx`));
        let session;
        try {
          session = await ort.InferenceSession.create(path.join(dir, file), opts);
        } catch (e) {
          throw new Error(`${file} (${level}): InferenceSession.create: ${e.message}`);
        }
        const res = await session.run({ x: new ort.Tensor('float32', x.data, x.shape) });
        for (const name of session.outputNames) {
          const t = res[name];
          writeNpy(path.join(outDir, `${c.name}.${variant}.${level}.${name}.npy`), t.type, t.dims, t.data);
        }
        if (session.release) await session.release();
      }
    }
  }
}

async function main() {
  const dir = process.argv[2];
  const [k, n] = process.argv[3] ? process.argv[3].split('/').map(Number) : [0, 1];
  const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8')).cases;
  for (const c of cases) {
    if ((c.shard || 0) % n !== k || c.kind !== 'model') continue;
    await runCase(dir, c);
  }
  console.log(`onnxruntime-node ${require('onnxruntime-node/package.json').version}: ran ${dir}`);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
