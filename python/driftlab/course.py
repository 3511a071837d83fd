"""The course's exercises (docs/course/): every answer judged by an experiment run when it is checked.

A knob answer is accepted when setting that one knob, in one preset, to the other preset's value
makes the lesson's symptom go away in a run made now (a different knob that does the same is
accepted too: the experiment is the judge, not a stored name). A number answer is accepted when it
matches the closed form the lesson derives and the value driftlab computes now, within the stated
tolerance. No answer is stored in this module.

    import driftlab.course as course
    course.exercises("padding")            # the questions of lesson 1
    course.check("padding", 1, "bn_eps")   # Verdict(correct=False, why=...)
"""
import math
import os
import tempfile

import numpy as np

from . import Model, Policy, attack, dataset, quantize, train

LESSONS = {
    "padding": "1-padding-and-layouts.ipynb",
    "init": "2-init-rng-and-shuffling.ipynb",
    "losses": "3-losses-and-optimisers.ipynb",
    "int8": "4-int8-schemes.ipynb",
    "attacks": "5-attacks-and-8-bit-inputs.ipynb",
}


class Verdict(dict):
    """{'correct': bool, 'why': str}; shows as one line in a notebook."""

    def __repr__(self):
        return ("correct: " if self["correct"] else "not yet: ") + self["why"]

    def __bool__(self):
        return bool(self["correct"])


def _verdict(correct, why):
    return Verdict(correct=bool(correct), why=why)


_WORK = None


def _work():
    global _WORK
    if _WORK is None:
        _WORK = tempfile.mkdtemp(prefix="driftlab_course_")
    return _WORK


def _lenet5_file():
    """The untrained LeNet-5 of the exercises (zoo, torch preset, seed 7), saved once."""
    path = os.path.join(_work(), "lenet5-seed7.dlm")
    if not os.path.exists(path):
        Model.zoo("lenet5", "torch", seed=7).save(path)
    return path


def _knob_flip(base, knob, other):
    """'base,knob=<other's value>', or a Verdict saying why the answer is not a knob to flip."""
    if not isinstance(knob, str) or not knob:
        return _verdict(False, "the answer is a knob's name (a string), e.g. 'bn_eps'")
    knob = knob.strip()
    mine, theirs = Policy(base).knobs(), Policy(other).knobs()
    if knob not in mine:
        return _verdict(False, "'%s' is not a knob (driftlab.Policy().knobs() lists them)" % knob)
    if mine[knob] == theirs[knob]:
        return _verdict(False, "%s is %s under both %s and %s: flipping it changes nothing" %
                        (knob, mine[knob], base, other))
    return "%s,%s=%s" % (base, knob, theirs[knob])


# ---- lesson 1: padding and layouts -----------------------------------------------------------

def _conv_graph(stride, padding=None, pads=None, hw=6, out_channels=1, dense=0, kernel=3):
    conv = {"op": "conv2d", "name": "conv", "inputs": ["x"], "output": "c", "out_channels": out_channels,
            "kernel": [kernel, kernel], "stride": [stride, stride], "bias": False}
    if pads is not None:
        conv["pads"] = list(pads)
    else:
        conv["padding"] = padding
    nodes = [conv, {"op": "flatten", "name": "flat", "inputs": ["c"], "output": "f" if dense else "y"}]
    if dense:
        nodes.append({"op": "dense", "name": "fc", "inputs": ["f"], "output": "y", "units": dense, "bias": False})
    o = (hw - kernel) // stride + 1 if padding == "valid" else (hw + stride - 1) // stride
    if pads is not None:  # [top, bottom, left, right]
        o = (hw + pads[0] + pads[1] - kernel) // stride + 1
    return {"input": "x", "input_shape": [1, hw, hw], "num_classes": dense or out_channels * o * o, "output": "y",
            "nodes": nodes}


def _run_graph(spec, policy, seed=3):
    """The graph's outputs under `policy` from weights and an input drawn from `seed` (the same
    arrays under every policy: set_weights takes driftlab's own layout, whatever the preset's)."""
    rng = np.random.default_rng(seed)
    m = Model.graph(spec, policy=policy)
    m.set_weights({k: rng.standard_normal(v.shape).astype(np.float32) for k, v in sorted(m.weights().items())})
    x = rng.standard_normal([2] + m.input_shape).astype(np.float32)
    return m.predict(x)


def _same_outputs(a, b):
    # the same arithmetic on the same kernels: only a different summation order could part them
    return a.shape == b.shape and float(np.max(np.abs(a - b))) <= 1e-5 * max(1.0, float(np.max(np.abs(b))))


def _knob_makes_agree(spec, base, other, knob, symptom):
    flip = _knob_flip(base, knob, other)
    if isinstance(flip, Verdict):
        return flip
    before = _same_outputs(_run_graph(spec, base), _run_graph(spec, other))
    after = _same_outputs(_run_graph(spec, flip), _run_graph(spec, other))
    if before:
        return _verdict(False, "the experiment shows no symptom: %s and %s agree already" % (base, other))
    if after:
        return _verdict(True, "with %s the outputs equal %s's: %s" % (flip, other, symptom))
    return _verdict(False, "with %s the outputs still differ from %s's" % (flip, other))


def _padding_1(answer):
    return _knob_makes_agree(_conv_graph(2, "same"), "tensorflow", "torch", answer,
                             "it decides where a strided 'same' convolution puts its padding")


def _padding_2(answer):
    # the experiment: which explicit (top, bottom) split reproduces TensorFlow's 'same' output of a
    # 4x4 kernel at stride 1 on 6x6 (6 outputs: 6 - 1 + 4 - 6 = 3 rows of zeros in all)?
    total = 3
    tf = _run_graph(_conv_graph(1, "same", kernel=4), "tensorflow")
    tops = [t for t in range(total + 1)
            if _same_outputs(_run_graph(_conv_graph(1, pads=[t, total - t, t, total - t], kernel=4), "tensorflow"), tf)]
    if len(tops) != 1:
        return _verdict(False, "the experiment found %d explicit paddings matching (expected one)" % len(tops))
    try:
        ok = float(answer) == tops[0]
    except (TypeError, ValueError):
        return _verdict(False, "the answer is a number of rows")
    return _verdict(ok, "TensorFlow pads %d row(s) above and %d below: the output equals a convolution with "
                    "explicit pads (%d, %d)" % (tops[0], total - tops[0], tops[0], total - tops[0]) if ok else
                    "a convolution with %s row(s) of zeros above does not give TensorFlow's output" % answer)


def _padding_3(answer):
    return _knob_makes_agree(_conv_graph(1, "valid"), "theano", "tensorflow", answer,
                             "Theano's conv2d is a true convolution (the kernel flipped), TensorFlow's a correlation")


def _padding_4(answer):
    return _knob_makes_agree(_conv_graph(1, "valid", hw=4, out_channels=2, dense=3), "tensorflow", "torch", answer,
                             "the dense weights after a flatten are indexed in the flatten's order")


# ---- lesson 2: initialisation, RNG and shuffling ---------------------------------------------

def _conv1_bound(preset):
    w = Model.zoo("lenet5", preset, seed=7).weights()["0.conv2d.weight"]
    o, c, kh, kw = w.shape
    fan_in, fan_out = c * kh * kw, o * kh * kw
    bound = math.sqrt(6.0 / (fan_in + fan_out)) if preset == "tensorflow" else 1.0 / math.sqrt(fan_in)
    return bound, float(np.max(np.abs(w))), w.size


def _init_bound(preset, answer, name):
    bound, drawn, n = _conv1_bound(preset)
    # n uniform draws: the largest |w| lies within 3% of the bound with probability 1 - 0.97^n
    if not (drawn <= bound and drawn >= 0.97 * bound):
        return _verdict(False, "driftlab drew max |w| = %.6g against the bound %.6g: the lesson's formula does "
                        "not describe this preset" % (drawn, bound))
    try:
        a = float(answer)
    except (TypeError, ValueError):
        return _verdict(False, "the answer is a number (the bound)")
    ok = abs(a - bound) <= 1e-3 * bound  # the formula's value to 3 digits
    return _verdict(ok, "%s: U(-%.6f, %.6f); driftlab's %d draws reach %.6f" % (name, bound, bound, n, drawn)
                    if ok else "%s's bound for this layer is not %s" % (name, answer))


def _init_1(answer):
    return _init_bound("tensorflow", answer, "glorot_uniform")


def _init_2(answer):
    return _init_bound("torch", answer, "kaiming_uniform(a=sqrt(5))")


def _step_losses(policy, init):
    # lr 1e-30 leaves every weight as it is (1e-30 * g is below half an ulp of any weight here):
    # each step's loss is then the loss of that step's batch on the same weights
    r = train(model="lenet5", policy=policy, init=init, limit=512, epochs=1, batch=64, lr=1e-30, step_loss=True,
              out=os.path.join(_work(), "steps-" + policy.replace(",", "_").replace("=", "-")))
    return np.asarray(r["epochs"][0]["step_losses"])


def _init_3(answer):
    flip = _knob_flip("torch", answer, "tensorflow")
    if isinstance(flip, Verdict):
        return flip
    init = _lenet5_file()
    a, b = _step_losses("torch", init), _step_losses(flip, init)
    batches_moved = float(np.max(np.abs(a - b))) > 1e-4  # a batch of other images: its loss moves by far more
    # the same 512 images over the epoch: the mean of equal-sized batches' losses stays (to rounding)
    same_images = abs(float(a.mean()) - float(b.mean())) <= 1e-5 * float(a.mean())
    if batches_moved and same_images:
        return _verdict(True, "with %s the batches hold other images (step losses move by up to %.3g) and the "
                        "epoch sees the same ones (mean %.7f vs %.7f)" % (flip, float(np.max(np.abs(a - b))),
                                                                            a.mean(), b.mean()))
    if not batches_moved:
        return _verdict(False, "with %s every batch holds the same images as before (step losses within %.1g)" %
                        (flip, float(np.max(np.abs(a - b)))))
    return _verdict(False, "with %s the epoch's mean loss changes too: more than the order moved" % flip)


# ---- lesson 3: losses and optimiser formulas -------------------------------------------------

_LOGITS = {"wrong": (100.0, 3), "right": (100.0, 0)}  # (logit, its class); the label is class 0


def _loss(policy, which):
    spec = {"input": "x", "input_shape": [10, 1, 1], "num_classes": 10, "output": "y",
            "nodes": [{"op": "flatten", "name": "f", "inputs": ["x"], "output": "y"}]}
    z = np.zeros((1, 10, 1, 1), np.float32)
    value, cls = _LOGITS[which]
    z[0, cls] = value
    return float(Model.graph(spec, policy=policy).input_gradient(z, np.array([0]))[0])


def _keras_loss(which, answer):
    eps = np.float32(1e-7)  # keras.backend.epsilon(), clipped in float32: clip(p, eps, 1 - eps)
    value, cls = _LOGITS[which]
    p = np.float32(1.0) if cls == 0 else np.float32(0.0)  # softmax of a 100-logit gap, in float32
    formula = float(-np.log(np.clip(p, eps, np.float32(1) - eps)))
    measured = _loss("tensorflow", which)
    if not abs(measured - formula) <= 1e-3 * formula:  # float32 log: far tighter than 1e-3
        return _verdict(False, "driftlab's tensorflow loss %.7g is not the clip formula's %.7g" % (measured, formula))
    try:
        a = float(answer)
    except (TypeError, ValueError):
        return _verdict(False, "the answer is a number (the loss)")
    ok = abs(a - formula) <= 1e-3 * formula  # three digits
    return _verdict(ok, "-log(clip(p, 1e-7, 1 - 1e-7)) = %.7g (driftlab: %.7g; the torch preset: %.7g)" %
                    (formula, measured, _loss("torch", which)) if ok else "not the clipped loss Keras reports")


def _losses_1(answer):
    return _keras_loss("wrong", answer)


def _losses_2(answer):
    return _keras_loss("right", answer)


def _losses_3(answer):
    flip = _knob_flip("tensorflow", answer, "torch")
    if isinstance(flip, Verdict):
        return flip
    got = [_loss(flip, w) for w in _LOGITS]
    want = [_loss("torch", w) for w in _LOGITS]
    ok = all(abs(g - t) <= 1e-6 * max(1.0, abs(t)) for g, t in zip(got, want))
    return _verdict(ok, ("with %s both losses are torch's: %s" % (flip, want)) if ok else
                    "with %s the losses are %s, torch's %s" % (flip, got, want))


def _epoch_losses(policy, init):
    r = train(model="lenet5", policy=policy, init=init, limit=512, epochs=2, batch=64, lr=0.05, momentum=0.9,
              schedule="step:step=1,gamma=0.1",
              out=os.path.join(_work(), "sgd-" + policy.replace(",", "_").replace("=", "-")))
    return [e["train_loss"] for e in r["epochs"]]


def _losses_4(answer):
    flip = _knob_flip("torch", answer, "tensorflow")
    if isinstance(flip, Verdict):
        return flip
    init = _lenet5_file()
    a, b = _epoch_losses("torch", init), _epoch_losses(flip, init)
    # the first epoch's rate is constant: two formulas equal in exact arithmetic part by rounding
    # only (knobs that change rounding alone move the losses by < 1e-7 here, measured); after the
    # drop, a formula that keeps the old rate inside its velocity moves them by 1e-3
    same_first = abs(a[0] - b[0]) <= 1e-6
    part_second = abs(a[1] - b[1]) > 1e-4
    ok = same_first and part_second
    return _verdict(ok, "with %s: epoch losses %.6f, %.6f vs torch's %.6f, %.6f" % (flip, b[0], b[1], a[0], a[1]))


# ---- lesson 4: int8 schemes ------------------------------------------------------------------

def _input_point(scheme, knobs=""):
    q = quantize(_lenet5_file(), os.path.join(_work(), "q.dlm"), scheme=scheme, knobs=knobs, calib=64)
    return [p for p in q["points"] if p["name"] == "input"][0]


def _zero_point(scheme, qmin, answer):
    p = _input_point(scheme)
    # min 0 sits on the grid's lowest code: zero point = qmin - round(min / scale) = qmin
    formula = qmin - round(p["min"] / p["scale"])
    if p["zero_point"] != formula:
        return _verdict(False, "driftlab's zero point %d is not qmin - round(min/scale) = %d" % (p["zero_point"],
                                                                                                  formula))
    try:
        ok = float(answer) == formula
    except (TypeError, ValueError):
        return _verdict(False, "the answer is a number (an integer code)")
    return _verdict(ok, "min %.6g, max %.6g, scale %.9g: zero point %d" % (p["min"], p["max"], p["scale"], formula)
                    if ok else "the input's zero point is not %s" % answer)


def _int8_1(answer):
    return _zero_point("tflite", -128, answer)


def _int8_2(answer):
    return _zero_point("torch_qnnpack", 0, answer)


def _int8_3(answer):
    if isinstance(answer, str) and answer.strip() == "quant_scheme":
        return _verdict(False, "quant_scheme swaps the whole scheme: name one knob inside it")
    flip = _knob_flip("torch", answer, "tensorflow")
    if isinstance(flip, Verdict):
        return flip
    knob, value = flip.split(",", 1)[1].split("=", 1)
    p = _input_point("torch_qnnpack", "%s=%s" % (knob, value))
    ok = p["zero_point"] == -128
    return _verdict(ok, "torch_qnnpack with %s=%s: the input's zero point is %d" % (knob, value, p["zero_point"]))


def _int8_4(answer):
    p = _input_point("tflite")
    formula = (p["max"] - p["min"]) / 255.0  # 256 codes, 255 steps between min and max
    if not abs(p["scale"] - formula) <= 1e-6 * formula:  # float32 storage of the scale
        return _verdict(False, "driftlab's scale %.9g is not (max - min) / 255 = %.9g" % (p["scale"], formula))
    try:
        a = float(answer)
    except (TypeError, ValueError):
        return _verdict(False, "the answer is a number (the scale)")
    ok = abs(a - formula) <= 1e-4 * formula  # four digits
    return _verdict(ok, "(%.6g - %.6g) / 255 = %.9g" % (p["max"], p["min"], formula) if ok else
                    "the input's scale is not %s" % answer)


# ---- lesson 5: attack conventions and 8-bit inputs -------------------------------------------

def _attacks_1(answer):
    w = _lenet5_file()
    x, y = dataset("fashion-mnist", "test", limit=100)
    half = 0.5 / 255  # round((k/255 + eps) * 255) = k while eps * 255 < 1/2
    below = attack(w, "fgsm", x=x, labels=y, eps=half * 0.999, uint8="round")[0]["over_all"]["mean_l0"]
    above = attack(w, "fgsm", x=x, labels=y, eps=half * 1.001, uint8="round")[0]["over_all"]["mean_l0"]
    if not (below == 0 and above > 0):
        return _verdict(False, "the experiment disagrees with 1/510: %g pixels moved below, %g above" % (below, above))
    try:
        a = float(answer)
    except (TypeError, ValueError):
        return _verdict(False, "the answer is a number (an eps)")
    ok = abs(a - half) <= 1e-2 * half  # two digits: 0.00196
    return _verdict(ok, "eps < 0.5/255 = %.6f: below it every example rounds back to its image (0 pixels moved), "
                    "just above %.0f pixels per image move" % (half, above) if ok else
                    "at eps %s the rounding does not flip from erasing to keeping the perturbation" % answer)


def _attacks_2(answer):
    w = _lenet5_file()
    x, y = dataset("fashion-mnist", "test", limit=200)
    wrong = float(np.mean(Model.load(w).predict(x).argmax(axis=1) != y))
    measured = attack(w, "fgsm", x=x, labels=y, eps=0.0)[0]["over_all"]["success_rate"]
    if abs(measured - wrong) > 1e-12:
        return _verdict(False, "the attack's %.4f is not the misclassified share %.4f" % (measured, wrong))
    try:
        a = float(answer)
    except (TypeError, ValueError):
        return _verdict(False, "the answer is a number (a rate in [0, 1])")
    ok = abs(a - wrong) <= 0.5 / len(y)  # within half an image
    return _verdict(ok, "at eps 0 every misclassified input counts as a success: %.3f" % wrong if ok else
                    "not the success rate at eps 0")


_ART = {"success": "clean-prediction", "labels_from": "prediction", "eps_units": "absolute"}


def _attacks_3(answer):
    w = _lenet5_file()
    x, y = dataset("fashion-mnist", "test", limit=200)
    if not isinstance(answer, str) or answer.strip() not in _ART:
        return _verdict(False, "the answer is one of attack()'s settings: %s" % ", ".join(sorted(_ART)))
    s = answer.strip()
    r = attack(w, "fgsm", x=x, labels=y, eps=0.0, **{s: _ART[s]})[0]["over_all"]["success_rate"]
    return _verdict(r == 0.0, "with %s=%s FGSM at eps 0 succeeds on %.3f of the inputs" % (s, _ART[s], r))


_EXERCISES = {
    ("padding", 1): ("knob", _padding_1,
                     "A Keras Conv2D(3x3, strides=2, padding='same') on a 6x6 input and its PyTorch port "
                     "(padding=1) give different outputs from the same kernel. Which knob, set to the torch "
                     "preset's value inside the tensorflow preset, makes the two agree?"),
    ("padding", 2): ("number", _padding_2,
                     "A Keras Conv2D(4x4, strides=1, padding='same') on a 6x6 input needs 3 rows of zeros in "
                     "all. How many does TensorFlow put above the input?"),
    ("padding", 3): ("knob", _padding_3,
                     "A 3x3 'valid' convolution gives other outputs under the theano preset than under tensorflow "
                     "from the same weights. Which knob, set to tensorflow's value inside theano, explains it?"),
    ("padding", 4): ("knob", _padding_4,
                     "conv -> Flatten -> Dense, the weights copied unchanged from the tensorflow preset to the "
                     "torch one: the outputs differ. Which knob (tensorflow's set to torch's value) explains it?"),
    ("init", 1): ("number", _init_1,
                  "The bound b of U(-b, b) that the tensorflow preset draws LeNet-5's first convolution's "
                  "weights from (glorot_uniform, 6 filters of 1x5x5)."),
    ("init", 2): ("number", _init_2, "The same bound under the torch preset (kaiming_uniform with a = sqrt(5))."),
    ("init", 3): ("knob", _init_3,
                  "Two torch-preset runs from the same initial weights file and the same seed. Which one knob, "
                  "set to tensorflow's value, puts other images into each batch while the epoch still sees the "
                  "same images?"),
    ("losses", 1): ("number", _losses_1,
                    "The loss Keras (tensorflow preset) reports for one image whose logits are 100 on a wrong "
                    "class and 0 elsewhere."),
    ("losses", 2): ("number", _losses_2,
                    "The loss it reports when the 100 is on the right class."),
    ("losses", 3): ("knob", _losses_3,
                    "Which knob, set to torch's value in the tensorflow preset, gives both losses as PyTorch "
                    "computes them?"),
    ("losses", 4): ("knob", _losses_4,
                    "Two SGD-with-momentum runs from the same weights, the rate divided by 10 after epoch 1: "
                    "they agree after the first epoch and part in the second when one knob of the torch preset "
                    "is set to tensorflow's value. Which knob?"),
    ("int8", 1): ("number", _int8_1, "The zero point TFLite's scheme gives LeNet-5's input (images in [0, 1])."),
    ("int8", 2): ("number", _int8_2, "The zero point PyTorch's qnnpack scheme gives the same input."),
    ("int8", 3): ("knob", _int8_3,
                  "Which knob (other than quant_scheme), set to the tensorflow preset's value, gives the "
                  "torch_qnnpack scheme TFLite's input zero point?"),
    ("int8", 4): ("number", _int8_4, "The scale TFLite's scheme gives the input."),
    ("attacks", 1): ("number", _attacks_1,
                     "FGSM examples are saved as 8-bit images (rounded). Below which eps does every example "
                     "round back to its clean image?"),
    ("attacks", 2): ("number", _attacks_2,
                     "FGSM at eps 0 on the untrained LeNet-5 (zoo, torch, seed 7), the first 200 test images: "
                     "the success rate over all inputs under driftlab's default success rule."),
    ("attacks", 3): ("knob", _attacks_3,
                     "Which attack() setting, set to ART's convention, makes that success rate 0?"),
}


def exercises(lesson=None):
    """[{'lesson', 'number', 'kind' ('knob' or 'number'), 'question'}], of one lesson or all."""
    if lesson is not None and lesson not in LESSONS:
        raise ValueError("course: no lesson '%s' (%s)" % (lesson, ", ".join(LESSONS)))
    return [{"lesson": l, "number": n, "kind": e[0], "question": e[2]}
            for (l, n), e in _EXERCISES.items() if lesson in (None, l)]


def check(lesson, number, answer):
    """Judge `answer` to exercise `number` of `lesson` by running its experiment now."""
    if (lesson, number) not in _EXERCISES:
        raise ValueError("course: no exercise %s %r (course.exercises() lists them)" % (lesson, number))
    if answer is None:
        return _verdict(False, "no answer yet")
    return _EXERCISES[(lesson, number)][1](answer)
