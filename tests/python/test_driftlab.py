"""The Python module (python/driftlab_module.cpp) against the command line and itself: every bound
call, errors translated with their messages, arrays crossing without copies, the GIL released
during training, Ctrl-C keeping a checkpoint that resume finishes bit for bit.

Run by ctest (entry `python`): PYTHONPATH=build/python, DRIFTLAB_CLI the driftlab binary.
"""
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import driftlab

CLI = os.environ.get("DRIFTLAB_CLI", "build/driftlab")


def cli(*args):
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def aligned(shape, dtype=np.float32, seed=0, lo=0.0, hi=1.0):
    """A C-contiguous array whose data is 64-byte aligned (what driftlab reads in place)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(n + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    a = raw[off:off + n].view(dtype).reshape(shape)
    a[...] = np.random.default_rng(seed).uniform(lo, hi, size=shape)
    return a


# ---- Policy ----

def test_policy_parses_prints_back_and_diffs():
    tf = driftlab.Policy("tensorflow")
    torch = driftlab.Policy.torch()
    assert str(torch) == "torch"
    assert driftlab.Policy(str(driftlab.Policy("torch,conv_same_pad=after"))) == driftlab.Policy("torch,conv_same_pad=after")
    knobs = [d[0] for d in tf.diff(torch)]
    assert "conv_same_pad" in knobs and "flatten_order" in knobs
    assert tf.get("flatten_order") == "hwc" and torch.get("flatten_order") == "chw"
    table = driftlab.knob_table()
    assert set(torch.knobs()) == {k["name"] for k in table}
    assert all(k["what"] and k["torch"] for k in table)


def test_casebook_from_python():
    cases = driftlab.case_list()
    names = [c["name"] for c in cases]
    assert "tflite-double-rounding" in names and all(c["thread"] and c["knobs"] for c in cases)
    r = driftlab.case_run("tflite-double-rounding")
    # tensorflow/tensorflow#25087: two roundings give 12 where the float product rounds to 11
    assert r["reporter"] == 1 and r["flipped"] == 0 and r["reproduced"]
    assert "12" in r["report"] and "11" in r["report"]
    with pytest.raises(driftlab.Error, match="unknown case 'nope'"):
        driftlab.case_run("nope")


def test_unknown_knob_raises_driftlab_error_naming_it():
    with pytest.raises(driftlab.Error, match="no_such_knob"):
        driftlab.Policy("torch,no_such_knob=1")
    with pytest.raises(driftlab.Error, match="conv_same_pad"):
        driftlab.Policy("torch,conv_same_pad=sideways")


# ---- models, arrays ----

@pytest.fixture(scope="module")
def lenet5(tmp_path_factory):
    d = tmp_path_factory.mktemp("lenet5")
    m = driftlab.Model.zoo("lenet5", "torch", 3)
    m.save(str(d / "m.dlm"))
    return m, d


def test_predict_equals_the_command_lines_bytes(lenet5):
    m, d = lenet5
    assert (m.name, m.input_shape, m.num_classes, m.int8) == ("lenet5", [1, 28, 28], 10, False)
    x = aligned((16, 1, 28, 28), seed=1)
    np.save(d / "x.npy", x)
    cli("predict", "--weights", str(d / "m.dlm"), "--input", str(d / "x.npy"), "--output", str(d / "y.npy"))
    y = m.predict(x)
    assert y.dtype == np.float32 and y.shape == (16, 10)
    assert np.array_equal(y, np.load(d / "y.npy"))
    # a loaded model gives the same bits; float64 input too (converted as the CLI converts)
    assert np.array_equal(driftlab.Model.load(str(d / "m.dlm")).predict(x), y)
    np.save(d / "x64.npy", x.astype(np.float64))
    cli("predict", "--weights", str(d / "m.dlm"), "--input", str(d / "x64.npy"), "--output", str(d / "y64.npy"))
    assert np.array_equal(m.predict(x.astype(np.float64)), np.load(d / "y64.npy"))


def test_inputs_are_read_in_place_when_aligned_and_copied_otherwise():
    x = aligned((4, 1, 28, 28))  # 12,544 bytes: a multiple of 64
    assert driftlab._input_address(x) == x.ctypes.data
    unaligned = np.frombuffer(np.zeros(x.nbytes + 4, np.uint8)[4:].tobytes(), np.float32).reshape(x.shape)
    if unaligned.ctypes.data % 64:
        assert driftlab._input_address(unaligned) != unaligned.ctypes.data
    strided = np.asfortranarray(x)  # not C-contiguous: copied (in C order)
    assert driftlab._input_address(strided) != strided.ctypes.data
    m = driftlab.Model.zoo("lenet1")
    assert np.array_equal(m.predict(strided), m.predict(x))
    before = x.copy()
    m.predict(x)
    assert np.array_equal(x, before)  # never written


def test_weights_are_views_of_the_models_memory(lenet5):
    m = driftlab.Model.zoo("lenet5", "torch", 3)
    w1, w2 = m.weights(), m.weights()
    name = next(iter(w1))
    assert w1[name].ctypes.data == w2[name].ctypes.data  # the same memory, no copy
    x = aligned((2, 1, 28, 28), seed=4)
    y0 = m.predict(x)
    last = [k for k in w1 if k.endswith("bias")][-1]
    w1[last][0] += 1.0  # writing into the view changes the model
    assert np.allclose(m.predict(x)[:, 0] - y0[:, 0], 1.0, atol=1e-5)
    m.set_weights({last: np.zeros_like(w1[last])})
    assert np.all(m.weights()[last] == 0)
    with pytest.raises(KeyError, match="nope"):
        m.set_weights({"nope": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match=last.replace(".", r"\.")):
        m.set_weights({last: np.zeros(3, np.float32)})
    with pytest.raises(TypeError, match="float64"):
        m.set_weights({last: np.zeros_like(w1[last], dtype=np.float64)})


def test_input_gradient_is_the_losss_derivative():
    # float64 model: a central difference pins each coordinate of dL/dx to ~1e-9
    m = driftlab.Model.zoo("lenet1", "torch,dtype=float64", 5)
    x = aligned((3, 1, 28, 28), dtype=np.float64, seed=6)
    labels = np.array([1, 4, 7])
    loss, logits, dx = m.input_gradient(x, labels)
    assert dx.shape == x.shape and logits.shape == (3, 10)
    rng = np.random.default_rng(7)
    for _ in range(8):
        i = tuple(rng.integers(0, s) for s in x.shape)
        h = 1e-5
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        num = (m.input_gradient(xp, labels)[0] - m.input_gradient(xm, labels)[0]) / (2 * h)
        assert abs(num - dx[i]) <= 1e-6 * max(1.0, abs(num)), (i, num, dx[i])  # O(h^2) and rounding
    with pytest.raises(ValueError, match="labels"):
        m.input_gradient(x, np.array([1, 2]))
    with pytest.raises(ValueError, match=r"labels\[0\] = 10"):
        m.input_gradient(x, np.array([10, 2, 3]))


# ---- bad input: an exception naming the argument, never a crash ----

def test_bad_inputs_raise_naming_the_argument():
    m = driftlab.Model.zoo("lenet1")
    with pytest.raises(TypeError, match="x: dtype int64"):
        m.predict(np.zeros((2, 1, 28, 28), dtype=np.int64))
    with pytest.raises(TypeError, match="x: a NumPy array"):
        m.predict([[0.0] * 784])
    with pytest.raises(driftlab.Error, match=r"predict: x has shape \[2,28,28\], model lenet1 takes \[2,1,28,28\]"):
        m.predict(np.zeros((2, 28, 28), np.float32))
    bad = np.zeros((2, 1, 28, 28), np.float32)
    bad[1, 0, 3, 4] = np.nan
    with pytest.raises(driftlab.Error, match="predict: x holds nan at index"):
        m.predict(bad)
    with pytest.raises(driftlab.Error, match="/nonexistent/model.dlm"):
        driftlab.Model.load("/nonexistent/model.dlm")
    with pytest.raises(driftlab.Error, match="unknown model 'lenet7'"):
        driftlab.Model.zoo("lenet7")
    with pytest.raises(ValueError, match="limit"):
        driftlab.train(limit=-1)


# ---- train, evaluate, quantize: the CLI's results ----

def test_train_writes_the_command_lines_model_bytes(tmp_path):
    seen = []
    steps = []
    r = driftlab.train(model="lenet1", limit=300, epochs=2, batch=64, lr=0.05, out=str(tmp_path / "py"),
                       on_epoch=seen.append, on_step=steps.append)
    cli("train", "--model", "lenet1", "--limit", "300", "--epochs", "2", "--batch", "64", "--lr", "0.05",
        "--out", str(tmp_path / "cli"))
    assert (tmp_path / "py" / "model.dlm").read_bytes() == (tmp_path / "cli" / "model.dlm").read_bytes()
    assert [e["epoch"] for e in seen] == [1, 2] and [e["epoch"] for e in r["epochs"]] == [1, 2]
    assert len(steps) == 2 * 5  # 300 images, batch 64: 5 steps an epoch
    # the first step timed apart, as in metrics.json: within the epoch, the other 236 images at a rate
    assert all(0 < e["first_step_seconds"] < e["seconds"] and e["images_per_s_after_first"] > 0 for e in r["epochs"])
    assert r["test"]["n"] == 300 and 0 <= r["test"]["accuracy"] <= 1
    e = driftlab.evaluate(r["model_path"], limit=300)
    assert e["accuracy"] == r["test"]["accuracy"] and e["model"] == "lenet1"


def test_quantize_and_the_int8_model(tmp_path):
    r = driftlab.train(model="lenet1", limit=300, epochs=1, out=str(tmp_path / "run"))
    q = driftlab.quantize(r["model_path"], str(tmp_path / "q.dlm"), scheme="tflite", calib=100, limit=300)
    assert q["points"][0]["name"] == "input" and all(p["scale"] > 0 for p in q["points"])
    cli("quantize", "--weights", r["model_path"], "--scheme", "tflite", "--calib", "100", "--limit", "300",
        "--out", str(tmp_path / "q-cli.dlm"))
    assert (tmp_path / "q.dlm").read_bytes() == (tmp_path / "q-cli.dlm").read_bytes()
    m = driftlab.Model.load(str(tmp_path / "q.dlm"))
    assert m.int8
    x = aligned((8, 1, 28, 28), seed=9)
    y = m.predict(x)
    m.save(str(tmp_path / "q2.dlm"))
    assert np.array_equal(driftlab.Model.load(str(tmp_path / "q2.dlm")).predict(x), y)
    with pytest.raises(driftlab.Error, match="int8 model has no gradient"):
        m.input_gradient(x, np.zeros(8, np.int64))


# ---- the GIL and Ctrl-C ----

def test_the_gil_is_released_during_training():
    ticks = [0]
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.time()
    driftlab.train(model="lenet5", limit=2000, epochs=1)
    took = time.time() - start
    done.set()
    t.join()
    # a thread that needs the GIL ran all along: about one tick a millisecond (at least a tenth of that)
    assert ticks[0] >= took * 100, (ticks[0], took)


def test_ctrl_c_keeps_the_checkpoint_and_resume_finishes_the_run(tmp_path):
    args = dict(model="lenet5", limit=3000, epochs=3, batch=64, lr=0.05, checkpoint_every=10)
    steps = [0]

    def on_step(p):
        steps[0] += 1
        if steps[0] == 30:  # the SIGINT a Ctrl-C sends, mid-run
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt, match="checkpoint"):
        driftlab.train(out=str(tmp_path / "cut"), on_step=on_step, **args)
    assert (tmp_path / "cut" / "checkpoint.dlc").exists() and not (tmp_path / "cut" / "model.dlm").exists()
    r = driftlab.resume(str(tmp_path / "cut"))
    assert [e["epoch"] for e in r["epochs"]] == [1, 2, 3]
    driftlab.train(out=str(tmp_path / "whole"), **args)
    assert (tmp_path / "cut" / "model.dlm").read_bytes() == (tmp_path / "whole" / "model.dlm").read_bytes()


@pytest.fixture(scope="module")
def vgg16_file(tmp_path_factory):
    """A VGG-16 (CIFAR-shaped) model file: seconds of work per call on 2,000 inputs."""
    path = tmp_path_factory.mktemp("vgg") / "vgg16.dlm"
    driftlab.Model.zoo("vgg16", "torch", 1).save(str(path))
    return str(path)


CIFAR = "synthetic-cifar10"
PREPARED = {}

# Each long call (but train and study_run, above) with what it would write: calls of many seconds
# (VGG-16 on 2,000 inputs, Boundary for 100,000 iterations), a SIGINT 0.3 s in.
LONG_CALLS = {
    "predict": lambda f, out: PREPARED["model"].predict(PREPARED["x"]),
    "evaluate": lambda f, out: driftlab.evaluate(f, dataset=CIFAR, limit=2000),
    "quantize": lambda f, out: driftlab.quantize(f, os.path.join(out, "int8.dlm"), calib=2000, calib_batch=2000,
                                                 dataset=CIFAR),
    "drift": lambda f, out: driftlab.drift(f, dataset=CIFAR, limit=2000),
    "attribute": lambda f, out: driftlab.attribute(f, "torch", "tensorflow", dataset=CIFAR, limit=2000),
    "attack": lambda f, out: driftlab.attack(f, "boundary", iterations=100000, dataset=CIFAR, limit=500, out=out),
    "robustness": lambda f, out: driftlab.robustness({"a": f, "b": f}, attacks="boundary", iterations=100000,
                                                     samples=500, dataset=CIFAR, out=out),
}


@pytest.mark.parametrize("call", sorted(LONG_CALLS))
def test_ctrl_c_ends_a_long_call_before_it_writes_anything(call, vgg16_file, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    if call == "predict":  # made before the clock starts (drawing the inputs takes a while)
        PREPARED.update(model=driftlab.Model.load(vgg16_file), x=aligned((2000, 3, 32, 32)))
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.time()
    timer.start()
    # the call's own message (a signal Python saw only after the call returned would raise a bare
    # KeyboardInterrupt), naming the kernel it stopped before
    with pytest.raises(KeyboardInterrupt, match=r"driftlab\.%s: interrupted \(at \w+\); nothing written" % call):
        LONG_CALLS[call](vgg16_file, str(out))
    took = time.time() - start
    timer.join()
    assert list(out.iterdir()) == [], call
    # the module goes on: the same call's kind of work, small
    assert driftlab.Model.load(vgg16_file).predict(aligned((2, 3, 32, 32))).shape == (2, 10)
    print("%s: interrupted after %.2f s" % (call, took))


def test_a_callbacks_exception_stops_the_run_and_is_raised_as_it_was(tmp_path):
    def on_epoch(e):
        raise ValueError("stop after epoch %d" % e["epoch"])

    with pytest.raises(ValueError, match="stop after epoch 1"):
        driftlab.train(model="lenet1", limit=300, epochs=3, out=str(tmp_path / "run"), on_epoch=on_epoch)
    assert not (tmp_path / "run" / "model.dlm").exists()


def test_drift_and_attribute_are_the_command_lines_json(tmp_path):
    import json
    r = driftlab.train(model="lenet1", limit=300, epochs=1, out=str(tmp_path / "run"))
    w = r["model_path"]
    d = driftlab.drift(w, limit=200)
    cli("drift", "--weights", w, "--limit", "200", "--json", str(tmp_path / "d.json"))
    assert d == json.loads((tmp_path / "d.json").read_text())
    assert [p["policy"] for p in d["accuracy"]][:1] == ["tensorflow"]
    a = driftlab.attribute(w, from_policy="tensorflow", to_policy="torch", limit=200)
    cli("attribute", "--weights", w, "--from", "tensorflow", "--to", "torch", "--limit", "200",
        "--json", str(tmp_path / "a.json"))
    assert a == json.loads((tmp_path / "a.json").read_text())
    with pytest.raises(driftlab.Error, match="nope"):
        driftlab.attribute(w, to_policy="torch,nope=1", limit=10)


def test_dataset_gives_the_engines_images_and_labels():
    x, y = driftlab.dataset("fashion-mnist", "test", limit=100)
    assert x.shape == (100, 1, 28, 28) and x.dtype == np.float32 and y.shape == (100,) and y.dtype == np.int32
    assert 0 <= x.min() and x.max() <= 1 and set(np.unique(y)) <= set(range(10))
    with pytest.raises(ValueError, match="split"):
        driftlab.dataset(split="validation")
    with pytest.raises(driftlab.Error, match="/nonexistent"):
        driftlab.dataset("mnist", data_dir="/nonexistent")


def test_attack_writes_the_command_lines_files_and_judges_on_int8(tmp_path):
    import json
    r = driftlab.train(model="lenet1", limit=300, epochs=1, out=str(tmp_path / "run"))
    w = r["model_path"]
    driftlab.quantize(w, str(tmp_path / "q.dlm"), scheme="tflite", calib=100, limit=300)
    res, adv = driftlab.attack(w, "bim", eps=0.1, steps=5, uint8="round", judges=[str(tmp_path / "q.dlm")],
                               limit=100, out=str(tmp_path / "py"))
    cli("attack", "--weights", w, "--attack", "bim", "--eps", "0.1", "--steps", "5", "--uint8", "round",
        "--judge", str(tmp_path / "q.dlm"), "--limit", "100", "--out", str(tmp_path / "cli"))
    assert (tmp_path / "py" / "samples.csv").read_bytes() == (tmp_path / "cli" / "samples.csv").read_bytes()
    assert np.array_equal(adv, np.load(tmp_path / "cli" / "adversarial.npy"))
    theirs = json.loads((tmp_path / "cli" / "result.json").read_text())
    assert res["over_all"] == theirs["over_all"] and res["transfer"] == theirs["transfer"]
    assert len(res["transfer"]) == 1 and res["transfer"][0]["int8"]
    # arrays in: the first 20 test images and their labels give the same examples as limit=20
    x, y = driftlab.dataset(limit=20)
    _, adv20 = driftlab.attack(w, "fgsm", x=x, labels=y, eps=0.1)
    _, adv20d = driftlab.attack(w, "fgsm", eps=0.1, limit=20)
    assert np.array_equal(adv20, adv20d)
    with pytest.raises(TypeError, match="unknown setting 'epsilon'"):
        driftlab.attack(w, "fgsm", epsilon=0.1, limit=5)
    with pytest.raises(driftlab.Error, match="convention"):
        driftlab.attack(w, "fgsm", convention="cleverhans", limit=5)
    # PGD's restarts as the command's --restarts / --restart-select: the same examples
    res, adv = driftlab.attack(w, "pgd", x=x, labels=y, eps=0.1, steps=3, random_start=True, restarts=3,
                               restart_select="per-run", out=str(tmp_path / "pyr"))
    cli("attack", "--weights", w, "--attack", "pgd", "--eps", "0.1", "--steps", "3", "--random-start", "--restarts", "3",
        "--restart-select", "per-run", "--limit", "20", "--out", str(tmp_path / "clir"))
    assert np.array_equal(adv, np.load(tmp_path / "clir" / "adversarial.npy"))
    assert res["restarts"] == 3 and res["restart_select"] == "per-run"


SPEC = """study: py-small
defaults: {limit: 300}
steps:
  train:
    do: train
    grid: {policy: [tensorflow, torch], seed: [1, 2]}
    set: {model: lenet1, epochs: 1, batch: 64}
  int8:
    do: quantize
    needs: train
    set: {scheme: tflite, calib: 100}
"""


def test_a_study_planned_run_and_reported_as_the_command_line_does(tmp_path):
    (tmp_path / "s.yaml").write_text(SPEC)
    # any_build: the hashes leave the build out (this module and the driftlab binary may be built at
    # different commits)
    cells = driftlab.study_plan(str(tmp_path / "s.yaml"), any_build=True)
    assert len(cells) == 8 and {c["step"] for c in cells} == {"train", "int8"}
    events = []
    r = driftlab.study_run(str(tmp_path / "s.yaml"), str(tmp_path / "py"), any_build=True, on_progress=events.append)
    assert (r["total"], r["ran"], r["failed"]) == (8, 8, 0) and events
    cli("study", "run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "cli"), "--any-build", "--quiet")
    for c in cells:  # every cell's results, byte for byte
        mine = (tmp_path / "py" / "cells" / c["hash"] / "results.json").read_bytes()
        assert mine == (tmp_path / "cli" / "cells" / c["hash"] / "results.json").read_bytes(), c["hash"]
    assert all(s["state"] == "done" for s in driftlab.study_status(str(tmp_path / "py")))
    tables = {t["step"]: t for t in driftlab.study_tables(str(tmp_path / "py"))}
    train_rows = tables["train"]["rows"]
    assert [row["policy"] for row in train_rows] == ["tensorflow", "torch"]
    assert all(row["test accuracy"]["n"] == 2 for row in train_rows)
    again = driftlab.study_run(str(tmp_path / "s.yaml"), str(tmp_path / "py"), any_build=True)
    assert (again["reused"], again["ran"]) == (8, 0)
    # the report: the command's files on the same study, byte for byte (the two runs' tables differ
    # in their seconds per epoch)
    rep = driftlab.study_report(str(tmp_path / "py"), figures=False)
    assert rep["out"] == str(tmp_path / "py" / "report") and rep["figures"] == []
    assert [os.path.basename(f) for f in rep["files"]] == ["tables.md", "tables.csv", "tables.json", "index.html"]
    cli("study", "report", str(tmp_path / "py"), "--out", str(tmp_path / "cli-report"), "--no-figures")
    for f in ("tables.md", "tables.csv", "tables.json", "index.html"):
        assert (tmp_path / "py" / "report" / f).read_bytes() == (tmp_path / "cli-report" / f).read_bytes(), f
    assert rep["markdown"] == (tmp_path / "py" / "report" / "tables.md").read_text()
    (tmp_path / "bad.yaml").write_text(SPEC.replace("lenet1", "lenet7"))
    with pytest.raises(driftlab.Error, match="bad.yaml:7"):
        driftlab.study_plan(str(tmp_path / "bad.yaml"))


def test_export_and_import_round_trip_as_the_command_line_does(tmp_path):
    m = driftlab.Model.zoo("lenet5", "torch", 3)
    m.save(str(tmp_path / "m.dlm"))
    e = driftlab.export(str(tmp_path / "m.dlm"), str(tmp_path / "py.onnx"))
    cli("export", "--weights", str(tmp_path / "m.dlm"), "--format", "onnx", "--out", str(tmp_path / "cli.onnx"))
    import onnx
    a, b = onnx.load(str(tmp_path / "py.onnx")), onnx.load(str(tmp_path / "cli.onnx"))
    a.producer_version = b.producer_version = ""  # the build's commit (the module and binary may differ)
    assert a.SerializeToString() == b.SerializeToString()
    assert e["model"] == "lenet5" and e["num_nodes"] > 0
    i = driftlab.import_model(str(tmp_path / "py.onnx"), str(tmp_path / "back.dlm"))
    assert i["model"] == "lenet5" and i["mapping"]
    x = aligned((4, 1, 28, 28), seed=11)
    assert np.array_equal(driftlab.Model.load(str(tmp_path / "back.dlm")).predict(x), m.predict(x))
    g = driftlab.import_model(str(tmp_path / "py.onnx"), str(tmp_path / "graph.dlm"), as_="graph")
    assert g["model"] == "graph"
    assert np.allclose(driftlab.Model.load(str(tmp_path / "graph.dlm")).predict(x), m.predict(x), atol=1e-5)
    with pytest.raises(driftlab.Error, match="format"):
        driftlab.export(str(tmp_path / "m.dlm"), str(tmp_path / "x"), format="coreml")


def test_robustness_is_the_command_lines_json(tmp_path):
    import json
    r = driftlab.train(model="lenet1", limit=300, epochs=1, out=str(tmp_path / "run"))
    w = r["model_path"]
    driftlab.quantize(w, str(tmp_path / "q.dlm"), scheme="tflite", calib=100, limit=300)
    models = {"fp32": w, "int8": str(tmp_path / "q.dlm")}
    mine = driftlab.robustness(models, attacks="fgsm,bim", crafts={"int8": "fp32"}, repeats=2, eps=0.1, limit=100,
                               out=str(tmp_path / "py"))
    cli("robustness", "--model", "fp32=" + w, "--model", "int8=" + str(tmp_path / "q.dlm"), "--craft", "int8=fp32",
        "--attacks", "fgsm,bim", "--repeats", "2", "--eps", "0.1", "--limit", "100", "--out", str(tmp_path / "cli"))
    assert (tmp_path / "py" / "robustness.csv").read_bytes() == (tmp_path / "cli" / "robustness.csv").read_bytes()
    theirs = json.loads((tmp_path / "cli" / "robustness.json").read_text())
    theirs.pop("commit", None), mine.pop("commit", None)
    assert mine == theirs
    with pytest.raises(TypeError, match="robustness: unknown setting 'epsilon'"):
        driftlab.robustness(models, epsilon=0.1, limit=10)


def test_convert_measures_onnx_runtime_as_the_command_line_does(tmp_path):
    import json
    ort = os.environ.get("DRIFTLAB_ORT_DIR") or os.path.join(os.path.dirname(__file__), "..", "oracles", "ort")
    if not os.path.isdir(os.path.join(ort, "node_modules", "onnxruntime-node")):
        if os.environ.get("DRIFTLAB_REQUIRE_ORACLES", "") not in ("", "0"):
            pytest.fail("onnxruntime-node is not installed in " + ort)
        pytest.skip("onnxruntime-node is not installed in " + ort + " (npm install there)")
    m = driftlab.Model.zoo("lenet1", "torch", 3)
    m.save(str(tmp_path / "m.dlm"))
    c = driftlab.convert(str(tmp_path / "m.dlm"), str(tmp_path / "py"), repeats=1, limit=200)
    cli("convert", "--weights", str(tmp_path / "m.dlm"), "--to", "onnx", "--repeats", "1", "--limit", "200",
        "--out", str(tmp_path / "cli"))
    theirs = json.loads((tmp_path / "cli" / "convert.json").read_text())
    for k in ("accuracy_before", "accuracy_after", "max_abs", "misclassification", "logits_max_abs", "n"):
        assert c[k] == theirs[k], k  # the same inputs, model and runtime: the same numbers (times aside)
    assert c["n"] == 200 and c["misclassification"] == 0


def test_every_public_name_has_a_docstring_and_a_stub():
    import inspect
    stubs = open(os.path.join(os.path.dirname(driftlab.__file__), "__init__.pyi")).read()
    for name in driftlab.__all__:
        obj = getattr(driftlab, name)
        assert (obj.__doc__ or "").strip(), name
        assert ("def %s(" % name) in stubs or ("class %s" % name) in stubs, name
        if inspect.isclass(obj):
            for k, v in vars(obj).items():
                if not k.startswith("_"):
                    assert (getattr(v, "__doc__", "") or "").strip(), name + "." + k


def test_framework_weights_in_keras_layout_and_back(tmp_path):
    m = driftlab.Model.zoo("lenet5", "tensorflow", 3)
    m.save(str(tmp_path / "m.dlm"))
    w = driftlab.framework_weights(str(tmp_path / "m.dlm"))
    own = driftlab.framework_weights(str(tmp_path / "m.dlm"), driftlab_layout=True)
    conv = [k for k in w if w[k].ndim == 4][0]
    # Keras's HWIO against driftlab's OIHW: the same numbers, transposed
    assert np.array_equal(w[conv], own[conv].transpose(2, 3, 1, 0))
    cli("weights", "export", "--weights", str(tmp_path / "m.dlm"), "--out", str(tmp_path / "cli"))
    for k, v in w.items():
        assert np.array_equal(v, np.load(tmp_path / "cli" / (k + ".npy"))), k
    for k, v in w.items():  # back from the Keras-layout arrays (a folder of .npy)
        np.save(tmp_path / "cli" / (k + ".npy"), v)
    driftlab.weights_import("lenet5", str(tmp_path / "cli"), str(tmp_path / "back.dlm"), policy="tensorflow")
    x = aligned((2, 1, 28, 28), seed=12)
    assert np.array_equal(driftlab.Model.load(str(tmp_path / "back.dlm")).predict(x), m.predict(x))
    np.save(tmp_path / "cli" / (conv + ".npy"), np.full_like(w[conv], np.nan))
    with pytest.raises(driftlab.Error, match=conv):
        driftlab.weights_import("lenet5", str(tmp_path / "cli"), str(tmp_path / "bad.dlm"), policy="tensorflow")


BLOCK = {"input": "x", "input_shape": [1, 28, 28], "num_classes": 10, "output": "y", "nodes": [
    {"name": "c1", "op": "conv2d", "inputs": ["x"], "output": "c1", "out_channels": 4, "kernel": [3, 3],
     "stride": [2, 2], "padding": "same"},
    {"name": "b1", "op": "batchnorm", "inputs": ["c1"], "output": "b1"},
    {"name": "r1", "op": "relu", "inputs": ["b1"], "output": "r1"},
    {"name": "dw", "op": "conv2d", "inputs": ["r1"], "output": "dw", "out_channels": 4, "kernel": [3, 3], "groups": 4,
     "pads": [1, 1, 1, 1]},
    {"name": "sum", "op": "add", "inputs": ["r1", "dw"], "output": "sum"},
    {"name": "gap", "op": "global_avg_pool", "inputs": ["sum"], "output": "g"},
    {"name": "fl", "op": "flatten", "inputs": ["g"], "output": "f"},
    {"name": "fc", "op": "dense", "inputs": ["f"], "output": "y", "units": 10}]}


def test_a_graph_model_from_a_spec_trains_and_quantizes(tmp_path):
    import json
    m = driftlab.Model.graph(BLOCK, "tensorflow", 5)
    assert (m.name, m.input_shape, m.num_classes) == ("graph", [1, 28, 28], 10)
    x = aligned((4, 1, 28, 28), seed=13)
    assert np.array_equal(driftlab.Model.graph(json.dumps(BLOCK), "tensorflow", 5).predict(x), m.predict(x))
    m.save(str(tmp_path / "g.dlm"))
    r = driftlab.train(model="graph", init=str(tmp_path / "g.dlm"), policy="tensorflow", limit=300, epochs=1,
                       out=str(tmp_path / "run"))
    q = driftlab.quantize(r["model_path"], str(tmp_path / "q.dlm"), scheme="torch_qnnpack", calib=100, limit=300)
    assert [p["name"] for p in q["points"]] == ["input", "0.graph.r1", "0.graph.dw", "0.graph.sum", "0.graph.fc"]
    assert driftlab.Model.load(str(tmp_path / "q.dlm")).predict(x).shape == (4, 10)
    bad = json.loads(json.dumps(BLOCK))
    bad["nodes"][4]["inputs"] = ["r1", "nowhere"]
    with pytest.raises(driftlab.Error, match="sum"):
        driftlab.Model.graph(bad)
