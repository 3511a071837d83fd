// Loads a TF.js layers model that `driftlab export --format tfjs` wrote (model.json + shard) the
// way tf.loadLayersModel does, through tf.io.fromMemory (@tensorflow/tfjs 4.22, pure-JS CPU
// backend in node), and predicts.
//
// Usage: node run_layers_model.js MODEL_DIR X.npy OUT.npy [--nchw] [--time N,M,...]
//   X: float32 .npy in the model's input layout (NHWC images, (N,T,F) sequences, (N,T) token ids);
//   --nchw: X holds NCHW images (driftlab's layout), transposed to NHWC here;
//   OUT: the predictions (N, classes). --time: also time model.predict on the first N inputs
//   (cycled when X has fewer), printed as one JSON line {"sizes": [...], "ms": [...]}.
//        node run_layers_model.js CASE_DIR [K/N]
//   every case of kind 'layers_model' in CASE_DIR/cases.json ({name, dir, x, nchw}; paths relative
//   to CASE_DIR): writes CASE_DIR/out/<name>.y.npy (tests/oracles/test_tfjs_export.cpp).
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const { readNpy, writeNpy } = require('./npy');

async function load(dir) {
  const j = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
  const specs = [];
  const buffers = [];
  for (const group of j.weightsManifest) {
    for (const p of group.paths) buffers.push(fs.readFileSync(path.join(dir, p)));
    specs.push(...group.weights);
  }
  const all = Buffer.concat(buffers);
  const data = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
  return tf.loadLayersModel(tf.io.fromMemory({ modelTopology: j.modelTopology, weightSpecs: specs, weightData: data }));
}

async function runCases(caseDir, shard) {
  const [k, n] = shard ? shard.split('/').map(Number) : [0, 1];
  const cases = JSON.parse(fs.readFileSync(path.join(caseDir, 'cases.json'), 'utf8')).cases;
  fs.mkdirSync(path.join(caseDir, 'out'), { recursive: true });
  let ran = 0;
  for (const c of cases) {
    if ((c.shard || 0) % n !== k || c.kind !== 'layers_model') continue;
    const model = await load(path.join(caseDir, c.dir));
    const a = readNpy(path.join(caseDir, c.x));
    let x = tf.tensor(a.data, a.shape, 'float32');
    if (c.nchw) x = tf.transpose(x, [0, 2, 3, 1]);
    const y = model.predict(x);
    writeNpy(path.join(caseDir, 'out', `${c.name}.y.npy`), y.shape, Float32Array.from(y.dataSync()));
    tf.dispose([x, y]);
    model.dispose();
    ++ran;
  }
  console.log(`tfjs ${tf.version.tfjs} (${tf.getBackend()}): loaded and ran ${ran} layers models`);
}

async function main() {
  const [dir, xFile, outFile] = process.argv.slice(2);
  await tf.setBackend('cpu');
  if (fs.existsSync(path.join(dir, 'cases.json'))) return runCases(dir, xFile);
  const model = await load(dir);
  const a = readNpy(xFile);
  let x = tf.tensor(a.data, a.shape, 'float32');
  if (process.argv.includes('--nchw')) x = tf.transpose(x, [0, 2, 3, 1]);
  const y = model.predict(x);
  writeNpy(outFile, y.shape, Float32Array.from(y.dataSync()));
  const t = process.argv.indexOf('--time');
  if (t > 0) {
    const sizes = process.argv[t + 1].split(',').map(Number);
    const ms = [];
    for (const n of sizes) {
      const idx = tf.tensor1d(Array.from({ length: n }, (_, i) => i % a.shape[0]), 'int32');
      const xn = tf.gather(x, idx);
      model.predict(xn.slice(0, Math.min(n, 8))).dispose();  // warm-up
      const s = process.hrtime.bigint();
      const yn = model.predict(xn);
      yn.dataSync();
      ms.push(Number(process.hrtime.bigint() - s) / 1e6);
      yn.dispose();
      xn.dispose();
    }
    console.log(JSON.stringify({ sizes, ms, tfjs: tf.version.tfjs, backend: tf.getBackend() }));
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
