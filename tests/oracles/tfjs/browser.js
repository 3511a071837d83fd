// The browser column of docs/CONVERSION.md (Guo et al.'s web platform, docs/GLOSSARY.md): a TF.js
// layers model that `driftlab export --format tfjs` wrote, loaded by @tensorflow/tfjs 4.22
// (dist/tf.min.js) in headless Chromium (Debian's chromium, driven by its own command line:
// --dump-dom for the results, --screenshot for the picture; no npm driver needed), served from a
// local HTTP server this script starts.
//
// Usage: node browser.js MODEL_DIR X.npy OUT_DIR [--nchw] [--sizes 1000,10000] [--backend cpu]
//   Writes OUT_DIR/y.npy (the predictions on X, for the comparison with driftlab),
//   OUT_DIR/browser.json ({tfjs, backend, userAgent, load_ms, sizes, ms}: model.predict of the
//   first N inputs, cycled, after a warm-up) and OUT_DIR/screenshot.png (the page after a run).
//   CHROMIUM: the browser binary (default /usr/bin/chromium).
//
// Two browser runs: the timed one in real time (the page POSTs its results to this server, which
// then closes the browser; a --virtual-time-budget run would time nothing, performance.now() being
// virtual there), and the screenshot with --virtual-time-budget so that the page has finished.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');
const { execFileSync } = require('child_process');
const { readNpy, writeNpy } = require('./npy');

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>driftlab: a TF.js model in the browser</title>
<style>body{font:14px sans-serif;margin:20px} pre{background:#f4f4f4;padding:8px;white-space:pre-wrap;word-break:break-all} td,th{padding:2px 10px;text-align:right}</style>
<script src="tf.min.js"></script></head>
<body><h2>driftlab export --format tfjs, running in this browser</h2>
<div id="status">loading...</div><table id="times"></table><pre id="result"></pre>
<script>
(async () => {
  const q = new URLSearchParams(location.search);
  const sizes = (q.get('sizes') || '').split(',').filter(Boolean).map(Number);
  await tf.setBackend(q.get('backend') || 'cpu');
  const t0 = performance.now();
  const model = await tf.loadLayersModel('model/model.json');
  const loadMs = performance.now() - t0;
  const meta = await (await fetch('x.json')).json();
  const buf = await (await fetch('x.bin')).arrayBuffer();
  let x = tf.tensor(new Float32Array(buf), meta.shape, 'float32');
  if (meta.nchw) x = tf.transpose(x, [0, 2, 3, 1]);
  document.getElementById('status').textContent = 'model ' + (model.name || '') + ' loaded in ' + loadMs.toFixed(1) +
      ' ms; backend ' + tf.getBackend() + '; ' + meta.shape[0] + ' inputs';
  const y = model.predict(x);
  const out = Array.from(await y.data());
  let ms = [];
  const rows = ['<tr><th>inputs</th><th>model.predict (ms)</th></tr>'];
  const shown = q.get('show') ? await (await fetch('timed.json')).json() : null;
  if (shown) {  // the screenshot: the real-time run's numbers (virtual time measures nothing)
    shown.sizes.forEach((n, i) => rows.push('<tr><td>' + n + '</td><td>' + shown.ms[i].toFixed(1) + '</td></tr>'));
    rows.push('<tr><td colspan="2" style="text-align:left">(timed in a real-time run of this page, ' +
              shown.backend + ' backend)</td></tr>');
  }
  for (const n of (shown ? [] : sizes)) {
    const idx = tf.tensor1d(Array.from({length: n}, (_, i) => i % meta.shape[0]), 'int32');
    const xn = tf.gather(x, idx);
    model.predict(xn.slice(0, Math.min(n, 8))).dispose();
    const s = performance.now();
    const yn = model.predict(xn);
    await yn.data();
    ms.push(performance.now() - s);
    rows.push('<tr><td>' + n + '</td><td>' + ms[ms.length - 1].toFixed(1) + '</td></tr>');
    tf.dispose([idx, xn, yn]);
  }
  document.getElementById('times').innerHTML = rows.join('');
  const preds = tf.argMax(y, 1).arraySync();
  const result = {tfjs: tf.version.tfjs, backend: tf.getBackend(), userAgent: navigator.userAgent, load_ms: loadMs,
                  sizes, ms, shape: y.shape, y: out, first_predictions: preds.slice(0, 16)};
  document.getElementById('result').textContent = shown
      ? 'TF.js ' + result.tfjs + ' on ' + result.userAgent + ' -- predicted classes of the first inputs: ' +
        result.first_predictions.join(' ')
      : JSON.stringify(result);
  document.title = 'done';
  if (q.get('report')) await fetch('result', {method: 'POST', body: JSON.stringify(result)});
})().catch(e => {
  const msg = JSON.stringify({error: String(e && e.stack || e)});
  document.getElementById('result').textContent = msg;
  if (new URLSearchParams(location.search).get('report')) fetch('result', {method: 'POST', body: msg});
});
</script></body></html>`;

function serve(files, onResult) {
  const server = http.createServer((req, res) => {
    const p = decodeURIComponent(req.url.split('?')[0]);
    if (process.env.DEBUG_BROWSER) console.error(req.method, req.url);
    if (req.method === 'POST' && p === '/result') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => { res.writeHead(200); res.end(); onResult(body); });
      return;
    }
    const f = files[p];
    if (!f) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Type': f.type });
    res.end(f.body);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function main() {
  const args = process.argv.slice(2);
  const [modelDir, xFile, outDir] = args;
  const opt = (k, d) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1] : d; };
  const nchw = args.includes('--nchw');
  const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
  fs.mkdirSync(outDir, { recursive: true });
  const a = readNpy(xFile);
  const files = {
    '/index.html': { type: 'text/html', body: PAGE },
    '/tf.min.js': { type: 'application/javascript',
                    body: fs.readFileSync(require.resolve('@tensorflow/tfjs/dist/tf.min.js')) },
    '/x.bin': { type: 'application/octet-stream', body: Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength) },
    '/x.json': { type: 'application/json', body: JSON.stringify({ shape: a.shape, nchw }) },
  };
  for (const f of fs.readdirSync(modelDir))
    files['/model/' + f] = { type: f.endsWith('.json') ? 'application/json' : 'application/octet-stream',
                             body: fs.readFileSync(path.join(modelDir, f)) };
  let gotResult;
  const result = new Promise((resolve) => { gotResult = resolve; });
  const server = await serve(files, (body) => gotResult(body));
  const base = `http://127.0.0.1:${server.address().port}/index.html?backend=${opt('--backend', 'cpu')}`;
  // each run its own profile: a second chromium on a shared profile joins the first one's session
  const profile = (k) => `--user-data-dir=${fs.mkdtempSync(path.join(require('os').tmpdir(), `driftlab-chromium-${k}-`))}`;
  // (a headless page counts as hidden: without these its requestAnimationFrame, which tf.loadLayersModel
  // awaits, never fires in real time)
  const common = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
                  '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
                  '--disable-backgrounding-occluded-windows'];
  const { spawn, execFile } = require('child_process');
  // the timed run, in real time: the page reports by POST, then the browser is closed
  const browser = spawn(chromium, [...common, profile('timed'), `${base}&report=1&sizes=${opt('--sizes', '')}`],
                        { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  browser.stderr.on('data', (c) => { stderr += c; });
  const exited = new Promise((resolve) => browser.on('exit', (code) => resolve(code)));
  const timer = setTimeout(() => gotResult(JSON.stringify({error: 'no result within 900 s'})), 900000);
  const body = await Promise.race([result, exited.then((code) => JSON.stringify({
    error: `${chromium} exited (${code}) before the page reported: ${stderr.slice(-2000)}`}))]);
  clearTimeout(timer);
  browser.kill();
  await exited;
  const r = JSON.parse(body);
  if (r.error) throw new Error('in the page: ' + r.error);
  writeNpy(path.join(outDir, 'y.npy'), r.shape, Float32Array.from(r.y));
  delete r.y;
  files['/timed.json'] = { type: 'application/json', body: JSON.stringify(r) };
  fs.writeFileSync(path.join(outDir, 'browser.json'), JSON.stringify(r, null, 1));
  // the picture: the same page with a small timing, in virtual time so that it has finished
  await new Promise((resolve, reject) => execFile(chromium, [...common, profile('shot'), '--virtual-time-budget=600000',
    `--screenshot=${path.join(outDir, 'screenshot.png')}`, '--window-size=900,420', `${base}&show=1`],
  { timeout: 900000 }, (err, so, se) => (err ? reject(new Error(`${chromium} --screenshot: ${err.message}\n${se}`)) : resolve())));
  server.close();
  console.log(JSON.stringify(r));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
