// .npy for the ONNX Runtime scripts (ort_oracle.js, ort_run.js): read float32 C-order arrays (what
// driftlab writes), write int8/uint8/int32/float32 ones (header format 1.0, padded to 64 bytes).
'use strict';

const fs = require('fs');

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

const DESCR = { int8: '|i1', uint8: '|u1', int32: '<i4', float32: '<f4' };

function writeNpy(file, type, dims, data) {
  const descr = DESCR[type];
  if (!descr) throw new Error(`npy: cannot write ${type} (${file})`);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + dict.length + 1;
  dict += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  MAGIC.copy(head, 0);
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(dict.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, 'latin1'), body]));
}

module.exports = { readNpyF32, writeNpy };
