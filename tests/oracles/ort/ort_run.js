// ONNX Runtime (onnxruntime-node, CPU execution provider) running float models that driftlab
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

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);

function readNpyF32(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) throw new Error(`npy: ${file}: bad magic`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  if (!/'descr'\s*:\s*'<f4'/.test(header)) throw new Error(`npy: ${file}: expected '<f4', header ${header.trim()}`);
  if (!/'fortran_order'\s*:\s*False/.test(header)) throw new Error(`npy: ${file}: Fortran order`);
  const m = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  const shape = m[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const numel = shape.reduce((a, b) => a * b, 1);
  const dataStart = start + headerLen;
  if (buf.length - dataStart !== 4 * numel) throw new Error(`npy: ${file}: ${buf.length - dataStart} data bytes for shape (${shape})`);
  const bytes = new Uint8Array(4 * numel);
  bytes.set(buf.subarray(dataStart));
  return { shape, data: new Float32Array(bytes.buffer) };
}

function writeNpyF32(file, dims, data) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let dict = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + dict.length + 1;
  dict += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  MAGIC.copy(head, 0);
  head[6] = 1;
  head.writeUInt16LE(dict.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, 'latin1'), body]));
}

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
  for (const name of session.outputNames) {
    const t = res[name];
    if (t.type !== 'float32') throw new Error(`${c.model}: output ${name} is ${t.type}`);
    writeNpyF32(path.join(dir, 'out', `${c.name}.${name}.npy`), t.dims, t.data);
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
