#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) and their dictionaries.

Each corpus holds a few small valid files and near-valid ones (one field off: truncated,
trailing bytes, an unsupported type, a bad label), so that libFuzzer starts from inputs that
reach deep into each reader. Deterministic: the same files on every run (gzip mtime 0, no
randomness), so the committed corpus is what this script writes. The model-file seeds start
from the version-1 fixture tests/data/model_v1 (written by driftlab itself, commit 7417a2b) and
its version-2 rewrite in the documented format (docs/MODEL_FORMAT.md).

Usage: scripts/fuzz_corpus.py (Debian python3 with python3-numpy)
"""
import gzip
import io
import json
import re
import os
import shutil
import struct
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, mtime=0)


def idx(dims, data, type_byte=0x08):
    return bytes([0, 0, type_byte, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def idx_corpus():
    labels = idx([5], [0, 1, 2, 9, 3])
    images = idx([2, 3, 3], range(18))
    put("idx", "labels.idx1", labels)
    put("idx", "images.idx3", images)
    put("idx", "labels.idx1.gz", gz(labels))
    put("idx", "images.idx3.gz", gz(images))
    put("idx", "two_members.gz", gz(images[:10]) + gz(images[10:]))
    put("idx", "truncated_data", images[:-3])
    put("idx", "trailing_bytes", labels + b"\x07")
    put("idx", "float32_type", idx([2], [0] * 8, type_byte=0x0D))
    put("idx", "ndim0", bytes([0, 0, 8, 0]))
    put("idx", "huge_dims", idx([0xFFFFFFFF, 0xFFFFFFFF, 3], []))
    put("idx", "truncated_gzip", gz(images)[:-6])


def cifar_corpus():
    rec = lambda label, k: bytes([label]) + bytes((k + j) % 256 for j in range(3072))
    put("cifar", "one_record.bin", rec(3, 0))
    put("cifar", "two_records.bin", rec(0, 5) + rec(9, 7))
    put("cifar", "truncated.bin", rec(1, 0)[:-100])
    put("cifar", "bad_label.bin", rec(10, 0))
    put("cifar", "empty.bin", b"")


def npy_bytes(a, version=None):
    f = io.BytesIO()
    if version is None:
        np.save(f, a)
    else:
        np.lib.format.write_array(f, a, version=version)
    return f.getvalue()


def npy_corpus():
    put("npy", "f4_2x3.npy", npy_bytes(np.arange(6, dtype="<f4").reshape(2, 3)))
    put("npy", "f8_4.npy", npy_bytes(np.array([1.5, -2, 0, 1e300], dtype="<f8")))
    put("npy", "u1_3.npy", npy_bytes(np.array([1, 2, 255], dtype="u1")))
    put("npy", "i8_scalar.npy", npy_bytes(np.array(7, dtype="<i8")))
    put("npy", "i4_empty.npy", npy_bytes(np.zeros((0, 3), dtype="<i4")))
    put("npy", "v2_f4.npy", npy_bytes(np.ones(2, dtype="<f4"), version=(2, 0)))
    put("npy", "fortran.npy", npy_bytes(np.asfortranarray(np.ones((2, 2), dtype="<f4"))))
    put("npy", "big_endian.npy", npy_bytes(np.ones(2, dtype=">f4")))
    put("npy", "complex.npy", npy_bytes(np.ones(2, dtype="<c8")))
    good = npy_bytes(np.arange(4, dtype="<f4"))
    put("npy", "trailing.npy", good + b"\x00")
    put("npy", "truncated.npy", good[:-2])


def model_file(header, data, version=2):
    h = json.dumps(header, separators=(",", ":")).encode()
    body = b"DRIFTLAB" + struct.pack("<IQ", version, len(h)) + h + data
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def model_corpus():
    v1 = open(os.path.join(ROOT, "tests/data/model_v1/lenet1_tensorflow_v1.dlm"), "rb").read()
    put("model_file", "lenet1_v1.dlm", v1)
    (hlen,) = struct.unpack("<Q", v1[12:20])
    header = json.loads(v1[20:20 + hlen])
    data = v1[20 + hlen:-4]
    header["metadata"] = {"input_mean": 0.0, "input_std": 1.0}
    v2 = json.loads(json.dumps(header))
    for t in v2["tensors"]:
        t["dtype"] = "float32"
    put("model_file", "lenet1_v2.dlm", model_file(v2, data))
    put("model_file", "lenet1_v2_trailing.dlm", model_file(v2, data + b"\0\0\0\0"))
    bad_std = json.loads(json.dumps(v2))
    bad_std["metadata"]["input_std"] = 0
    put("model_file", "lenet1_v2_input_std0.dlm", model_file(bad_std, data))
    bad_shape = json.loads(json.dumps(v2))
    bad_shape["tensors"][0]["shape"] = [4294967296, 4294967296]
    put("model_file", "lenet1_v2_huge_shape.dlm", model_file(bad_shape, data))
    # A token model's header over far too few bytes: num_ids asks for a large embedding.
    token = {"format": "driftlab-model", "model": "lstm-imdb", "policy": "torch", "dtype": "float32",
             "input_shape": [8], "num_classes": 2, "num_ids": 1 << 20, "metadata": {},
             "tensors": [{"name": "0.embedding.weight", "dtype": "float32", "shape": [2, 2], "offset": 0,
                          "nbytes": 16}]}
    put("model_file", "lstm_imdb_huge_num_ids.dlm", model_file(token, bytes(16)))
    put("model_file", "truncated.dlm", v1[:100])


def imdb_corpus():
    put("imdb", "review.txt", b"This movie was GREAT!<br /><br />I'd watch it again, 10/10.")
    put("imdb", "utf8.txt", "Amélie est très bien — 5★ 🙂 naïve café".encode())
    put("imdb", "invalid_utf8.txt", b"bad \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 end \xff")
    put("imdb", "tags.txt", b"<BR/>a<br>b<br   />c<b>d</b><br")
    put("imdb", "empty.txt", b"")


def policy_corpus():
    v1 = open(os.path.join(ROOT, "tests/data/model_v1/lenet1_tensorflow_v1.dlm"), "rb").read()
    (hlen,) = struct.unpack("<Q", v1[12:20])
    full = json.loads(v1[20:20 + hlen])["policy_full"]
    for i, s in enumerate(["torch", "tensorflow", "theano", "torch,dtype=float64",
                           "tensorflow, bn_eps=0.001 ,conv_same_pad=after", full,
                           "torch,", "torch,=x", "keras", "torch,bn_eps=-1", "torch,nope=1"]):
        put("policy", "p%02d" % i, s.encode())
    # Every knob and value of the knob table as a libFuzzer dictionary: docs/POLICIES.md's rows
    # (tests/test_policy_docs.cpp holds them to engine/policy.cpp's knob_table(), and
    # PolicyDict.CoversEveryKnobAndValue holds this file to the table), plus the presets' values of
    # numeric knobs.
    tokens = set(["torch", "tensorflow", "theano", ",", "="])
    row = re.compile(r"^\| `([a-z0-9_]+)` \| ([^|]*) \| ([^|]*) \| ([^|]*) \| ([^|]*) \|")
    for line in open(os.path.join(ROOT, "docs", "POLICIES.md"), encoding="utf-8"):
        m = row.match(line)
        if not m:
            continue
        tokens.add(m.group(1) + "=")
        for cell in m.groups()[1:]:
            tokens.update(re.findall(r"`([^`]+)`", cell))
    with open(os.path.join(ROOT, "fuzz", "policy.dict"), "w") as f:
        f.write("# Knob names and values of the knob table (docs/POLICIES.md; scripts/fuzz_corpus.py).\n")
        for t in sorted(tokens):
            f.write(json.dumps(t) + "\n")


def study_corpus():
    """Study specs (study/spec.h): a grid with every kind of need, a small DAG, a cycle, a policy
    string with a knob, and near-valid ones (an unknown kind, a need of no step, a bad integer)."""
    seeds = {'s00': 'study: s1-lenet\ntitle: "S1 training table: LeNet-1 and LeNet-5 under three presets"\nadaptations:\n  - "Fashion-MNIST instead of MNIST"\ndefaults:\n  dataset: fashion-mnist\n  limit: 2000\nsteps:\n  train:\n    do: train\n    grid:\n      model: [lenet1, lenet5]\n      policy: [tensorflow, theano, torch]\n      batch: [32, 64, 128]\n      seed: [1, 2, 3, 4, 5]\n    set:\n      epochs: 50\n      lr: 0.01\n  fgsm:\n    do: attack\n    needs: train\n    grid:\n      eps: [0.1, 0.3]\n    set:\n      attack: fgsm\n      convention: foolbox2\n  int8:\n    do: quantize\n    needs: train\n    set: {scheme: tflite}\n  transfer:\n    do: attack\n    needs: [train, int8]\n    set: {attack: bim, eight_bit: round}\n', 's01': 'study: tiny\nsteps:\n  a: {do: train, grid: {model: [lenet1, lenet5], seed: [1, 2]}, set: {epochs: 2, limit: 100}}\n  b: {do: quantize, needs: a, grid: {scheme: [tflite, ort]}}\n  c: {do: evaluate, needs: b}\n  d: {do: attack, needs: [a, b], grid: {eps: [0.1]}}\n', 's02': 'study: cycle\nsteps:\n  a: {do: evaluate, needs: b}\n  b: {do: quantize, needs: a}\n', 's03': 'study: x\nsteps:\n  t:\n    do: train\n    grid:\n      model: [lenet5]\n      policy: ["torch,relu_grad_at_zero=0.5", tensorflow]\n', 's07': 'study: conv\nsteps:\n  m: {do: train, grid: {model: [lenet5, lstm], policy: [tensorflow, torch]}}\n  q: {do: quantize, needs: m}\n  a: {do: attack, needs: m, grid: {attack: [fgsm, boundary]}, set: {iterations: 100, max_directions: 5}}\n  qa: {do: attack, needs: q}\n  c: {do: convert, needs: [m, a], grid: {naive_rnn_gates: [false, true]}}\n  qc: {do: convert, needs: [q, qa], set: {quant_form: qop}}\n  r: {do: convert_robustness, needs: [c, qc], gather: [policy, attack, naive_rnn_gates]}\n  rob: {do: robustness, needs: [m, q], gather: [policy], set: {attacks: "fgsm,single-pixel", convention: foolbox2, max_pixels: 10}}\n'}
    seeds["s04"] = seeds["s01"].replace("do: evaluate", "do: evaluation")
    seeds["s05"] = seeds["s01"].replace("needs: [a, b]", "needs: [a, z]")
    seeds["s06"] = seeds["s01"].replace("epochs: 2", "epochs: two")
    for name, text in sorted(seeds.items()):
        put("study_spec", name, text.encode())


def model_dict():
    keys = ["format", "model", "policy", "policy_full", "dtype", "input_shape", "num_classes", "num_ids",
            "metadata", "tensors", "name", "shape", "offset", "nbytes", "input_mean", "input_std",
            "float32", "float64", "int8", "uint8", "int32", "int64", "lenet1", "lenet5", "lstm-imdb",
            "gru-imdb", "resnet20", "0.conv2d.weight", "DRIFTLAB"]
    with open(os.path.join(ROOT, "fuzz", "model_file.dict"), "w") as f:
        f.write("# Header keys and values of the model file (scripts/fuzz_corpus.py).\n")
        for k in keys:
            f.write(json.dumps('"%s"' % k if k != "DRIFTLAB" else k) + "\n")
    # int8 files: the same, and the names of the int8 layers' tensors and metadata
    int8 = keys + ["quantized", "scheme", "mode", "static", "dynamic", "quantize", "dequantize", "qconv2d", "qdense",
                   "qmaxpool2d", "scale", "zero_point", "in_scale", "in_zero_point", "out_scale", "out_zero_point",
                   "weight_scale", "int32", "int8", "uint8", "tflite", "torch_qnnpack", "ort"]
    with open(os.path.join(ROOT, "fuzz", "int8_model_file.dict"), "w") as f:
        f.write("# Header keys and values of int8 model files (scripts/fuzz_corpus.py).\n")
        for k in int8:
            f.write(json.dumps('"%s"' % k if k != "DRIFTLAB" else k) + "\n")


# The corpora this script writes (checkpoint/, onnx_import/ and int8_model_file/ are written by
# driftlab itself and committed: docs/RELIABILITY.md; they are left alone).
WRITTEN = ("idx", "cifar", "npy", "model_file", "imdb", "policy", "study_spec")

if __name__ == "__main__":
    for t in WRITTEN:
        shutil.rmtree(os.path.join(OUT, t), ignore_errors=True)
    idx_corpus()
    cifar_corpus()
    npy_corpus()
    model_corpus()
    imdb_corpus()
    policy_corpus()
    study_corpus()
    model_dict()
    for t in sorted(os.listdir(OUT)):
        files = os.listdir(os.path.join(OUT, t))
        size = sum(os.path.getsize(os.path.join(OUT, t, f)) for f in files)
        print("%-11s %2d files, %6d bytes" % (t, len(files), size))
