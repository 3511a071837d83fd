// The case loop both TensorFlow.js oracle scripts (oracle.js, rnn_oracle.js) share:
//
//   node SCRIPT CASE_DIR [K/N]
//
// reads CASE_DIR/cases.json ({cases: [{name, kind, shard?, ...}]}), sets tfjs's pure-JS CPU
// backend, runs each case whose "shard" field (default 0) is K modulo N (all of them without
// K/N) through the handler named by its "kind", and writes outputs into CASE_DIR/out/. load()
// reads a tensor file named relative to CASE_DIR, save() writes NAME.npy into the output folder
// (inputPath / outputPath name other files there).
// A failing case fails the run naming the case; ORACLE_TIMING=1 prints each case's time.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const { readTensor, writeTensor } = require('./npy');

let caseDir = '';
let outDir = '';

// A file of the case folder; a file of its output folder.
function inputPath(file) {
  return path.join(caseDir, file);
}
function outputPath(file) {
  return path.join(outDir, file);
}

function load(file) {
  return readTensor(tf, inputPath(file));
}

function save(name, t) {
  writeTensor(outputPath(`${name}.npy`), t);
}

// handlers: {kind: function(case) (may be async)}.
function runCases(script, handlers) {
  async function main() {
    const argv = process.argv;
    if (argv.length !== 3 && argv.length !== 4) throw new Error(`usage: node ${script} CASE_DIR [K/N]`);
    caseDir = argv[2];
    let shard = 0;
    let shards = 1;
    if (argv.length === 4) {
      const m = /^(\d+)\/(\d+)$/.exec(argv[3]);
      if (!m || Number(m[2]) < 1 || Number(m[1]) >= Number(m[2])) {
        throw new Error(`bad shard '${argv[3]}' (K/N, 0 <= K < N)`);
      }
      shard = Number(m[1]);
      shards = Number(m[2]);
    }
    const spec = JSON.parse(fs.readFileSync(path.join(caseDir, 'cases.json'), 'utf8'));
    outDir = path.join(caseDir, 'out');
    fs.mkdirSync(outDir, { recursive: true });
    if (!(await tf.setBackend('cpu'))) throw new Error('the tfjs cpu backend could not be set');
    await tf.ready();
    const mine = spec.cases.filter((c) => (c.shard || 0) % shards === shard);
    const t0 = Date.now();
    const timing = [];
    for (const c of mine) {
      const tc = Date.now();
      try {
        const run = handlers[c.kind];
        if (!run) throw new Error(`unknown case kind '${c.kind}'`);
        await run(c);
      } catch (e) {
        e.message = `case '${c.name}' (${c.kind}): ${e.message}`;
        throw e;
      }
      timing.push(`${c.name} ${Date.now() - tc} ms`);
    }
    if (process.env.ORACLE_TIMING) console.log(timing.join('\n'));  // per-case times, for tuning
    console.log(`tfjs ${tf.version.tfjs} backend ${tf.getBackend()}, shard ${shard}/${shards}: ${mine.length} of ` +
                `${spec.cases.length} cases in ${Date.now() - t0} ms`);
  }
  main().catch((e) => {
    console.error(`${script}: ${e.stack || e}`);
    process.exit(1);
  });
}

// The optimiser of a case (tests/oracles/tfjs_optim_cases.h): tf.train.momentum (default),
// tf.train.adam(lr, beta1, beta2) or tf.train.rmsprop(lr, decay, momentum), each with TF.js's
// default epsilon (the backend's, 1e-7 on the CPU). setRate(optimizer, k) sets the rate of step k
// from c.lr_at when the case has a schedule.
function makeOptimizer(tf, c) {
  switch (c.optimizer || 'momentum') {
    case 'momentum': return tf.train.momentum(c.lr, c.momentum, c.nesterov);
    case 'adam': return tf.train.adam(c.lr, c.beta1, c.beta2);
    case 'rmsprop': return tf.train.rmsprop(c.lr, c.decay, c.momentum);
    default: throw new Error(`unknown optimizer '${c.optimizer}'`);
  }
}
function setRate(optimizer, c, k) {
  if (c.lr_at) optimizer.learningRate = c.lr_at[k];
}

module.exports = { inputPath, outputPath, load, save, runCases, makeOptimizer, setRate };
