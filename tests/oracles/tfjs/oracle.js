// TensorFlow.js oracle for driftlab's `tensorflow` preset (tests/oracles/test_tfjs_oracle.cpp).
//
//   node oracle.js CASE_DIR [K/N]
//
// Reads CASE_DIR/cases.json, computes every case with TF.js 4.22 on its pure-JS CPU backend
// (tf.setBackend('cpu')), and writes the results as .npy files into CASE_DIR/out/. One run
// computes many cases, because node + tfjs start-up costs more than most cases. With K/N it
// computes only the cases whose "shard" field (default 0) is K modulo N, so that N processes
// can share the work (the LeNet training cases dominate: tfjs's pure-JS conv2DBackpropFilter).
//
// All tensors are in TF.js's own layouts: activations NHWC, conv kernels HWIO, dense kernels
// (in,out). Converting to and from driftlab's NCHW / OIHW / (out,in) is the C++ side's job.
// Weights always come from the files (the Keras layers' default initialisers never matter).
//
// Case kinds (fields of each entry of cases.json "cases"):
//   grad   {name, input, layers, loss, training?}: runs the layers in order on `input` as one
//          graph (in training mode when `training`, which BatchNormalization reads).
//          loss {type:'sum_r', r}: sum(y_last * R);  {type:'cce', labels}: the Keras loss
//          mean_n categoricalCrossentropy(onehot, y_last) (tf.metrics.categoricalCrossentropy
//          is the tfjs-layers losses.categoricalCrossentropy that compile('categoricalCrossentropy')
//          uses). Writes NAME.y<i> (output of layer i), NAME.loss ([1]), NAME.dx, and
//          NAME.dw<i>_<j> (gradient of weight j of layer i), gradients by tf.variableGrads.
//   train  {name, layers, batches:[{x, labels}], lr, momentum, nesterov, optimizer?, lr_at?}:
//          tf.sequential of the layers, compile({optimizer: makeOptimizer(tf, c) (cases.js), loss:
//          'categoricalCrossentropy'}), one trainOnBatch per batch (the rate set to lr_at[k]
//          before batch k when given). Writes NAME.losses ([T]) and the final weights NAME.w<i>_<j>.
//   optim  {name, params, grads, lr, momentum, nesterov, optimizer?, l2?, lr_at?}: applies the T
//          rows of `grads` (T,n) to the variable `params` (n) with makeOptimizer(c); with l2 = D
//          the gradient is tf.variableGrads of sum(g_t*p) + D*sum(p^2) (Keras's l2 regularizer).
//          Writes NAME.traj (T,n): the parameters after each step.
//   init   {name, initializer, shape, seed}: tf.initializers[initializer]({seed}).apply(shape).
//          Writes NAME.w.
//   bnstats {name, layer, xs:[x...], xe}: one batchNormalization layer applied in training mode
//          to each x in turn (each call updates the moving statistics), then in inference mode
//          to xe. Writes NAME.moving_mean, NAME.moving_variance, NAME.y_eval.
//   block  {name, input, r, stride, pad_channels, shortcut:'identity'|'A'|'B', epsilon,
//          momentum, weights:{c1, b1:[gamma,beta,mean,var], c2, b2, sc?, scbn?}}: the CIFAR
//          ResNet basic block relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)) in training
//          mode, 3x3 convs 'same' without bias; shortcut A = x[:, ::s, ::s, :] with
//          pad_channels zero channels on each side, B = bn(conv1x1 stride s). loss sum(y*R).
//          Writes NAME.y, NAME.dx and NAME.g<k> for the trainable weights in the order
//          c1, b1.gamma, b1.beta, c2, b2.gamma, b2.beta[, sc, scbn.gamma, scbn.beta].
//   input_grad {name, input, layers, labels, training}: logits = the layers applied in order with
//          {training} (false: what model.predict runs, BatchNormalization with its moving
//          statistics), loss = mean Keras categoricalCrossentropy(labels, softmax(logits)) (the
//          Keras 2.2.4 loss: softmax, normalise, clip to [1e-7, 1-1e-7], -sum y log p), dL/dx by
//          tf.grad. Writes NAME.logits, NAME.loss ([1]), NAME.dx, and NAME.moving<k> (the moving
//          mean and variance of every batchNormalization, in order, after the gradient).
//   attack {name, input, layers, labels, eps, step, steps, lo, hi}: FGSM and BIM by tf.grad of the
//          input_grad loss (see runAttack).
// Layer descriptions (entries of `layers`): {type:'conv2d', filters, kernel:[kh,kw], strides,
// padding, weights:[kernel, bias?]}, {type:'maxPooling2d'|'averagePooling2d', pool, strides,
// padding}, {type:'dense', units, weights:[kernel, bias?]}, {type:'activation', activation},
// {type:'flatten'}, {type:'batchNormalization', epsilon, momentum, weights:[gamma, beta,
// moving_mean, moving_variance]} (channels last), {type:'globalAveragePooling2d'}, {type:'residual',
// main:[layers], shortcut:'identity'|'A'|'B', stride, pad_channels, projection?:[layers]} (main(x)
// + shortcut(x), the shortcuts of the block kind; no activation after the sum). Weight entries are
// file names relative to CASE_DIR.
'use strict';

const tf = require('@tensorflow/tfjs');
const { readNpy, writeNpy } = require('./npy');
const { inputPath, outputPath, load, save, runCases, makeOptimizer, setRate } = require('./cases');

function makeLayer(d, extra) {
  const weights = (d.weights || []).map(load);
  const common = Object.assign({}, extra || {});
  switch (d.type) {
    case 'conv2d':
      return tf.layers.conv2d(Object.assign(common, {
        filters: d.filters,
        kernelSize: d.kernel,
        strides: d.strides,
        padding: d.padding,
        dataFormat: 'channelsLast',
        useBias: weights.length > 1,
        weights,
      }));
    case 'dense':
      return tf.layers.dense(Object.assign(common, { units: d.units, useBias: weights.length > 1, weights }));
    case 'maxPooling2d':
      return tf.layers.maxPooling2d(Object.assign(common, { poolSize: d.pool, strides: d.strides, padding: d.padding }));
    case 'averagePooling2d':
      return tf.layers.averagePooling2d(
          Object.assign(common, { poolSize: d.pool, strides: d.strides, padding: d.padding }));
    case 'activation':
      return tf.layers.activation(Object.assign(common, { activation: d.activation }));
    case 'flatten':
      return tf.layers.flatten(common);
    case 'batchNormalization':
      return tf.layers.batchNormalization(
          Object.assign(common, { axis: -1, epsilon: d.epsilon, momentum: d.momentum, weights }));
    case 'globalAveragePooling2d':
      return tf.layers.globalAveragePooling2d(Object.assign(common, { dataFormat: 'channelsLast' }));
    case 'residual':
      return makeResidual(d);
    default:
      throw new Error(`unknown layer type '${d.type}'`);
  }
}

// The option A shortcut: x[:, ::s, ::s, :] through reshape + slice (tfjs has no gradient for
// stridedSlice; needs H and W divisible by s), then `pad` zero channels on each side.
function optionA(x, stride, pad) {
  let sub = x;
  if (stride > 1) {
    const [n, h, w, ch] = x.shape;
    sub = tf.reshape(tf.slice(tf.reshape(x, [n, h / stride, stride, w / stride, stride, ch]), [0, 0, 0, 0, 0, 0],
                              [n, h / stride, 1, w / stride, 1, ch]), [n, h / stride, w / stride, ch]);
  }
  return pad > 0 ? tf.pad(sub, [[0, 0], [0, 0], [0, 0], [pad, pad]]) : sub;
}

// A residual block as one layer-like object (apply, trainableWeights, dispose).
function makeResidual(d) {
  const main = d.main.map((m) => makeLayer(m));
  const proj = (d.projection || []).map((m) => makeLayer(m));
  const run = (layers, x, kwargs) => layers.reduce((h, l) => l.apply(h, kwargs), x);
  return {
    layers: main.concat(proj),
    apply(x, kwargs) {
      const y = run(main, x, kwargs);
      const s = d.shortcut === 'A' ? optionA(x, d.stride, d.pad_channels)
              : d.shortcut === 'B' ? run(proj, x, kwargs) : x;
      return tf.add(y, s);
    },
    get trainableWeights() {
      return this.layers.flatMap((l) => l.trainableWeights);
    },
    dispose() {
      this.layers.forEach((l) => l.dispose());
    },
  };
}

// Every batchNormalization among `layers`, residual blocks' included, in order.
function batchNorms(layers) {
  return layers.flatMap((l) => (l.layers ? batchNorms(l.layers) : l.getClassName() === 'BatchNormalization' ? [l] : []));
}

function lossOf(spec, y) {
  if (spec.type === 'sum_r') return tf.sum(tf.mul(y, load(spec.r)));
  if (spec.type === 'cce') return tf.mean(tf.metrics.categoricalCrossentropy(load(spec.labels), y));
  throw new Error(`unknown loss '${spec.type}'`);
}

let varCounter = 0;

function runGrad(c) {
  const layers = c.layers.map((d) => makeLayer(d));
  const x = tf.variable(load(c.input), true, `oracle_x_${varCounter++}`);
  const kwargs = { training: !!c.training };
  const forward = () => {
    const outs = [];
    let h = x;
    for (const l of layers) {
      h = l.apply(h, kwargs);
      outs.push(h);
    }
    return outs;
  };
  tf.tidy(() => {
    const outs = forward();  // also builds the layers, which sets their weights
    outs.forEach((y, i) => save(`${c.name}.y${i}`, y));
  });
  const vars = [x];
  const names = ['dx'];
  layers.forEach((l, i) => l.trainableWeights.forEach((w, j) => {
    vars.push(w.read());
    names.push(`dw${i}_${j}`);
  }));
  tf.tidy(() => {
    const { value, grads } = tf.variableGrads(() => {
      const outs = forward();
      return lossOf(c.loss, outs[outs.length - 1]);
    }, vars);
    save(`${c.name}.loss`, value);
    vars.forEach((v, k) => save(`${c.name}.${names[k]}`, grads[v.name]));
  });
  x.dispose();
  layers.forEach((l) => l.dispose());
}

async function runTrain(c) {
  const first = load(c.batches[0].x);
  const layers = c.layers.map((d, i) => makeLayer(d, i === 0 ? { inputShape: first.shape.slice(1) } : {}));
  first.dispose();
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

function runOptim(c) {
  const p = tf.variable(load(c.params), true, `oracle_p_${varCounter++}`);
  const g = load(c.grads);
  const [steps, n] = g.shape;
  const optimizer = makeOptimizer(tf, c);
  const traj = new Float32Array(steps * n);
  for (let t = 0; t < steps; ++t) {
    setRate(optimizer, c, t);
    tf.tidy(() => {
      const gt = g.slice([t, 0], [1, n]).reshape([n]);
      if (c.l2) {
        const { grads } = tf.variableGrads(() => tf.add(tf.sum(tf.mul(gt, p)), tf.mul(c.l2, tf.sum(tf.square(p)))), [p]);
        optimizer.applyGradients({ [p.name]: grads[p.name] });
      } else {
        optimizer.applyGradients({ [p.name]: gt });
      }
    });
    traj.set(p.dataSync(), t * n);
  }
  writeNpy(outputPath(`${c.name}.traj.npy`), [steps, n], traj);
  optimizer.dispose();
  p.dispose();
  g.dispose();
}

function runInit(c) {
  const init = tf.initializers[c.initializer]({ seed: c.seed });
  const w = init.apply(c.shape, 'float32');
  save(`${c.name}.w`, w);
  w.dispose();
}

function runBnStats(c) {
  const layer = makeLayer(c.layer);
  for (const f of c.xs) {
    tf.tidy(() => {
      layer.apply(load(f), { training: true });
    });
  }
  const w = layer.getWeights();  // gamma, beta, moving_mean, moving_variance
  save(`${c.name}.moving_mean`, w[2]);
  save(`${c.name}.moving_variance`, w[3]);
  tf.tidy(() => save(`${c.name}.y_eval`, layer.apply(load(c.xe), { training: false })));
  layer.dispose();
}

function runBlock(c) {
  const bn = (files) => makeLayer({ type: 'batchNormalization', epsilon: c.epsilon, momentum: c.momentum, weights: files });
  const conv = (file, k, s) => {
    const w = readNpy(inputPath(file));
    return makeLayer({ type: 'conv2d', filters: w.shape[3], kernel: [k, k], strides: s, padding: 'same', weights: [file] });
  };
  const W = c.weights;
  const c1 = conv(W.c1, 3, c.stride), b1 = bn(W.b1), c2 = conv(W.c2, 3, 1), b2 = bn(W.b2);
  const sc = c.shortcut === 'B' ? conv(W.sc, 1, c.stride) : null;
  const scbn = c.shortcut === 'B' ? bn(W.scbn) : null;
  const train = { training: true };
  const x = tf.variable(load(c.input), true, `oracle_x_${varCounter++}`);
  const block = () => {
    const y = b2.apply(c2.apply(tf.relu(b1.apply(c1.apply(x), train))), train);
    let s = x;
    if (c.shortcut === 'A') {
      s = optionA(x, c.stride, c.pad_channels);
    } else if (c.shortcut === 'B') {
      s = scbn.apply(sc.apply(x), train);
    }
    return tf.relu(tf.add(y, s));
  };
  tf.tidy(() => save(`${c.name}.y`, block()));  // also builds the layers, which sets their weights
  const layers = [c1, b1, c2, b2].concat(sc ? [sc, scbn] : []);
  const vars = [x];
  layers.forEach((l) => l.trainableWeights.forEach((w) => vars.push(w.read())));
  tf.tidy(() => {
    const { grads } = tf.variableGrads(() => tf.sum(tf.mul(block(), load(c.r))), vars);
    save(`${c.name}.dx`, grads[x.name]);
    vars.slice(1).forEach((v, k) => save(`${c.name}.g${k}`, grads[v.name]));
  });
  x.dispose();
  layers.forEach((l) => l.dispose());
}

function runInputGrad(c) {
  const layers = c.layers.map((d) => makeLayer(d));
  const softmax = makeLayer({ type: 'activation', activation: 'softmax' });
  const kwargs = { training: !!c.training };
  const labels = load(c.labels);
  const x = load(c.input);
  const logitsOf = (v) => layers.reduce((h, l) => l.apply(h, kwargs), v);
  const lossOf = (v) => tf.mean(tf.metrics.categoricalCrossentropy(labels, softmax.apply(logitsOf(v))));
  tf.tidy(() => save(`${c.name}.logits`, logitsOf(x)));  // also builds the layers, which sets their weights
  tf.tidy(() => {
    save(`${c.name}.loss`, lossOf(x));
    save(`${c.name}.dx`, tf.grad(lossOf)(x));
  });
  batchNorms(layers).forEach((l, k) => {
    const w = l.getWeights();  // gamma, beta, moving_mean, moving_variance
    save(`${c.name}.moving${2 * k}`, w[2]);
    save(`${c.name}.moving${2 * k + 1}`, w[3]);
  });
  x.dispose();
  labels.dispose();
  layers.forEach((l) => l.dispose());
}

// attack {name, input, layers, labels, eps, step, steps, lo, hi}: FGSM and BIM written with tf.grad
// of input_grad's loss (the layers with {training: false}): NAME.g0 = dL/dx at the input, NAME.fgsm =
// clipByValue(x + sign(g0) * eps, lo, hi), NAME.bim after `steps` of x <- x + sign(g) * step;
// x <- clipByValue(x0 + clipByValue(x - x0, -eps, eps), lo, hi); NAME.logits at the input.
function runAttack(c) {
  const layers = c.layers.map((d) => makeLayer(d));
  const softmax = makeLayer({ type: 'activation', activation: 'softmax' });
  const kwargs = { training: false };
  const labels = load(c.labels);
  const x0 = load(c.input);
  const logitsOf = (v) => layers.reduce((h, l) => l.apply(h, kwargs), v);
  const lossOf = (v) => tf.mean(tf.metrics.categoricalCrossentropy(labels, softmax.apply(logitsOf(v))));
  tf.tidy(() => save(`${c.name}.logits`, logitsOf(x0)));  // also builds the layers
  const g0 = tf.tidy(() => tf.grad(lossOf)(x0));
  save(`${c.name}.g0`, g0);
  tf.tidy(() => save(`${c.name}.fgsm`, tf.clipByValue(tf.add(x0, tf.mul(tf.sign(g0), c.eps)), c.lo, c.hi)));
  let x = x0.clone();
  for (let t = 0; t < c.steps; ++t) {
    const next = tf.tidy(() => {
      const moved = tf.add(x, tf.mul(tf.sign(tf.grad(lossOf)(x)), c.step));
      return tf.clipByValue(tf.add(x0, tf.clipByValue(tf.sub(moved, x0), -c.eps, c.eps)), c.lo, c.hi);
    });
    x.dispose();
    x = next;
  }
  save(`${c.name}.bim`, x);
  [x, x0, g0, labels].forEach((t) => t.dispose());
  layers.forEach((l) => l.dispose());
}

runCases('oracle.js', {
  grad: runGrad,
  train: runTrain,
  optim: runOptim,
  init: runInit,
  bnstats: runBnStats,
  block: runBlock,
  input_grad: runInputGrad,
  attack: runAttack,
});
