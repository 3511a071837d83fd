// ONNX Runtime (onnxruntime-node, CPU execution provider) running float and int8 models that driftlab
// exported or that torch.onnx.export wrote: the round-trip and import oracles
// (tests/oracles/test_onnx_oracle.cpp) and `driftlab convert` (its ONNX Runtime side).
//
// Usage: node ort_run.js CASE_DIR [K/N]
//          every case of kind 'run' in CASE_DIR/cases.json: {name, model: file.onnx, x: file.npy,
//          threads (default 1), level (default 'all': ORT_ENABLE_ALL, an InferenceSession's default)};
//          writes CASE_DIR/out/<name>.<output>.npy for each graph output.
//        node ort_run.js --model M.onnx --x X.npy --out Y.npy [--threads T] [--repeats R] [--batch B]
//          runs X in batches of B (default: all at once) R times (default 1), writes the first
//          output of the last run, and prints one JSON line: load_ms (session creation), run_ms
//          (each repeat's total over the batches), outputs, the ORT version.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const { readNpyF32, writeNpy } = require('./npy');

const writeNpyF32 = (file, dims, data) => writeNpy(file, 'float32', dims, data);

function options(threads, level) {
  return { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
           graphOptimizationLevel: level || 'all' };
}

async function create(file, opts) {
  try {
    return await ort.InferenceSession.create(file, opts);
  } catch (e) {
    throw new Error(`${file}: InferenceSession.create: ${e.message}`);
  }
}

async function runCase(dir, c) {
  const session = await create(path.join(dir, c.model), options(c.threads || 1, c.level));
  const x = readNpyF32(path.join(dir, c.x));
  const res = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape) });
  fs.mkdirSync(path.join(dir, 'out'), { recursive: true });
  for (const name of session.outputNames) {  // float logits; an int8 model's points are int8/uint8
    const t = res[name];
    if (!['float32', 'int8', 'uint8'].includes(t.type)) throw new Error(`${c.model}: output ${name} is ${t.type}`);
    writeNpy(path.join(dir, 'out', `${c.name}.${name}.npy`), t.type, t.dims, t.data);
  }
}

async function timed(args) {
  const get = (k, d) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1] : d; };
  const threads = Number(get('--threads', 1)), repeats = Number(get('--repeats', 1));
  const t0 = process.hrtime.bigint();
  const session = await create(get('--model'), options(threads));
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const x = readNpyF32(get('--x'));
  const n = x.shape[0], per = x.data.length / n, batch = Number(get('--batch', n));
  const runMs = [];
  let out = null, dims = null;
  for (let r = 0; r < repeats; ++r) {
    const parts = [];
    const s = process.hrtime.bigint();
    for (let i = 0; i < n; i += batch) {
      const b = Math.min(batch, n - i);
      const t = new ort.Tensor('float32', x.data.subarray(i * per, (i + b) * per), [b, ...x.shape.slice(1)]);
      const res = await session.run({ [session.inputNames[0]]: t });
      parts.push(res[session.outputNames[0]]);
    }
    runMs.push(Number(process.hrtime.bigint() - s) / 1e6);
    const classes = parts[0].dims.slice(1);
    const width = classes.reduce((a, b) => a * b, 1);
    out = new Float32Array(n * width);
    let off = 0;
    for (const p of parts) { out.set(p.data, off); off += p.data.length; }
    dims = [n, ...classes];
  }
  writeNpyF32(get('--out'), dims, out);
  console.log(JSON.stringify({ load_ms: loadMs, run_ms: runMs, outputs: session.outputNames, threads,
                               ort: require('onnxruntime-node/package.json').version }));
}

async function main() {
  if (process.argv[2] === '--model') return timed(process.argv.slice(2));
  const dir = process.argv[2];
  const [k, n] = process.argv[3] ? process.argv[3].split('/').map(Number) : [0, 1];
  const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8')).cases;
  let ran = 0;
  for (const c of cases) {
    if ((c.shard || 0) % n !== k || c.kind !== 'run') continue;
    await runCase(dir, c);
    ++ran;
  }
  console.log(`onnxruntime-node ${require('onnxruntime-node/package.json').version}: ran ${ran} models of ${dir}`);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
