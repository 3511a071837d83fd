// usage: node run.js spec.json ; spec: {model, inputs:[{name,dtype,shape,file}], outputs:[{name,file}], opts:{...}}
const ort = require('/tmp/ortnode/node_modules/onnxruntime-node');
const fs = require('fs');
(async () => {
  const spec = JSON.parse(fs.readFileSync(process.argv[2]));
  const sess = await ort.InferenceSession.create(spec.model, spec.opts || {});
  const feeds = {};
  const T = {uint8: Uint8Array, int8: Int8Array, int32: Int32Array, float32: Float32Array};
  for (const inp of spec.inputs) {
    const buf = fs.readFileSync(inp.file);
    const arr = new T[inp.dtype](buf.buffer, buf.byteOffset, buf.byteLength / T[inp.dtype].BYTES_PER_ELEMENT);
    feeds[inp.name] = new ort.Tensor(inp.dtype, arr, inp.shape);
  }
  const res = await sess.run(feeds);
  for (const o of spec.outputs) {
    const t = res[o.name];
    fs.writeFileSync(o.file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
})().catch(e => { console.error(e); process.exit(1); });
