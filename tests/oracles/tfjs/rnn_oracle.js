// TensorFlow.js oracle for driftlab's recurrent layers (tests/oracles/test_rnn_oracle_tfjs.cpp).
//
//   node rnn_oracle.js CASE_DIR
//
// The protocol of oracle.js (the case loop of cases.js): CASE_DIR/cases.json lists the cases, inputs are .npy files named in
// them (relative to CASE_DIR), results go to CASE_DIR/out/<name>.<key>.npy; the pure-JS CPU
// backend. Weights are always given (Keras layout: kernel (F,G*u), recurrent_kernel (u,G*u),
// bias (G*u); gate column blocks LSTM i,f,c,o, GRU z,r,h). TF.js 4.22 implements the Keras-2.2
// cells: LSTM with one bias; GRU with reset_after=false only (its GRUCell throws "GRUCell does
// not support reset_after parameter set to true", tfjs-layers/dist/layers/recurrent.js), so the
// reset-after GRU cannot be computed here, only shown to differ.
//
// Case kinds (fields of each entry of "cases"):
//   rnn_grad   {name, cell:'lstm'|'gru', units, recurrentActivation:'hardSigmoid'|'sigmoid',
//              returnSequences, x, kernel, recurrentKernel, bias, r}: y = layer(x) ((N,T,u) or
//              (N,u)), loss sum(y * R); writes NAME.y, NAME.dx, NAME.dkernel,
//              NAME.drecurrent_kernel, NAME.dbias (tf.variableGrads).
//   rnn_train  {name, cell, units, recurrentActivation, embedding: null | {inputDim, outputDim,
//              maskZero, table}, kernel, recurrentKernel, bias, dense: {kernel, bias}, batches: [{x,
//              labels (one-hot)}], lr, momentum, optimizer?, lr_at?}: tf.sequential([embedding,] rnn (last step),
//              dense softmax), compile({optimizer: makeOptimizer(tf, c) (cases.js), loss:
//              'categoricalCrossentropy'}), one trainOnBatch per batch. Writes NAME.losses ([S])
//              and the final weights NAME.w<i>_<j> (layer i, weight j in getWeights() order).
'use strict';

const tf = require('@tensorflow/tfjs');
const { load, save, runCases, makeOptimizer, setRate } = require('./cases');

function rnnLayer(c, returnSequences, extra) {
  const args = Object.assign({
    units: c.units,
    recurrentActivation: c.recurrentActivation,
    returnSequences,
    useBias: true,
    weights: [load(c.kernel), load(c.recurrentKernel), load(c.bias)],
  }, extra || {});
  if (c.cell === 'lstm') return tf.layers.lstm(args);
  if (c.cell === 'gru') return tf.layers.gru(args);
  throw new Error(`unknown cell '${c.cell}'`);
}

let varCounter = 0;

function runGrad(c) {
  const layer = rnnLayer(c, c.returnSequences);
  const x = tf.variable(load(c.x), true, `rnn_oracle_x_${varCounter++}`);
  const r = load(c.r);
  tf.tidy(() => save(`${c.name}.y`, layer.apply(x)));  // builds the layer, which sets its weights
  const vars = [x, ...layer.trainableWeights.map((w) => w.read())];
  const names = ['dx', 'dkernel', 'drecurrent_kernel', 'dbias'];
  if (vars.length !== names.length) throw new Error(`expected 3 weights, got ${vars.length - 1}`);
  tf.tidy(() => {
    const { grads } = tf.variableGrads(() => tf.sum(tf.mul(layer.apply(x), r)), vars);
    vars.forEach((v, k) => save(`${c.name}.${names[k]}`, grads[v.name]));
  });
  x.dispose();
  r.dispose();
  layer.dispose();
}

async function runTrain(c) {
  const first = load(c.batches[0].x);
  const inputShape = first.shape.slice(1);
  first.dispose();
  const layers = [];
  if (c.embedding) {
    layers.push(tf.layers.embedding({
      inputDim: c.embedding.inputDim,
      outputDim: c.embedding.outputDim,
      maskZero: !!c.embedding.maskZero,
      inputShape,
      weights: [load(c.embedding.table)],
    }));
    layers.push(rnnLayer(c, false));
  } else {
    layers.push(rnnLayer(c, false, { inputShape }));
  }
  layers.push(tf.layers.dense({
    units: load(c.dense.bias).shape[0],
    activation: 'softmax',
    weights: [load(c.dense.kernel), load(c.dense.bias)],
  }));
  const model = tf.sequential({ layers });
  const optimizer = makeOptimizer(tf, c);
  model.compile({ optimizer, loss: 'categoricalCrossentropy' });
  const losses = [];
  for (const [k, b] of c.batches.entries()) {
    setRate(optimizer, c, k);
    const x = load(b.x);
    const y = load(b.labels);
    losses.push(await model.trainOnBatch(x, y));
    x.dispose();
    y.dispose();
  }
  save(`${c.name}.losses`, tf.tensor1d(losses));
  model.layers.forEach((l, i) => l.getWeights().forEach((w, j) => save(`${c.name}.w${i}_${j}`, w)));
  model.dispose();
  optimizer.dispose();
}

runCases('rnn_oracle.js', { rnn_grad: runGrad, rnn_train: runTrain });
