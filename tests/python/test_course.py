"""The course's exercises (docs/course/): the answers a student should give are accepted, the
tempting wrong ones refused. The expected values are derived here by hand (a formula or the
framework's documented rule), not read from driftlab."""
import math

import numpy as np
import pytest

import driftlab
import driftlab.course as course

# (lesson, number): (accepted answers, refused answers). Knob answers are judged by an experiment;
# the refused ones are the knobs a student might plausibly name (they differ between the presets too).
ANSWERS = {
    # TF pads a stride-2 'same' 3x3 conv of an even input 0 above, 1 below; PyTorch's port pads 1/1
    ("padding", 1): (["conv_same_pad"], ["model_conv_padding", "weight_layout", "conv_kernel_flip", "nonsense"]),
    # TF: pad_top = total // 2, the odd row below (tensorflow/core/framework/kernel_shape_util.cc)
    ("padding", 2): ([1], [0, 2, 3]),
    ("padding", 3): (["conv_kernel_flip"], ["conv_same_pad", "weight_layout"]),
    ("padding", 4): (["flatten_order"], ["weight_layout", "conv_same_pad"]),
    # glorot_uniform: sqrt(6 / (fan_in + fan_out)), fan_in = 1*5*5, fan_out = 6*5*5
    ("init", 1): ([math.sqrt(6.0 / (25 + 150)), 0.18516], [0.2, math.sqrt(6.0 / 25)]),
    # kaiming_uniform(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(25)
    ("init", 2): ([0.2], [math.sqrt(6.0 / 175), math.sqrt(6.0 / 25)]),
    # the shuffle has its own stream: the engine of initialisers and dropout moves no batch
    ("init", 3): (["shuffle"], ["rng_engine", "ce_formulation", "init_weight"]),
    # Keras: -log(clip(p, 1e-7, 1 - 1e-7)) in float32; p = e^-100 / ... -> 1e-7
    ("losses", 1): ([-math.log(np.float32(1e-7)), 16.118], [100.0, 16.0]),
    # p = 1 -> 1 - 1e-7, which is 1 - 2^-23 in float32: -log1p(-2^-23) ~ 1.19e-7
    ("losses", 2): ([1.1920929e-07], [0.0, 1e-7]),
    ("losses", 3): (["ce_formulation"], ["loss_reduction", "bn_eps", "sgd_form"]),
    # Keras's velocity carries the old rate into the step after the drop; PyTorch's buffer does not
    ("losses", 4): (["sgd_form"], ["ce_formulation", "rng_engine", "weight_decay_mode"]),
    # int8 asymmetric [0, 1]: qmin - round(0 / scale) = -128 (TFLite), 0 (qnnpack's uint8)
    ("int8", 1): ([-128], [0, 128]),
    ("int8", 2): ([0], [-128, 128]),
    ("int8", 3): (["quant_act_dtype"], ["quant_scheme", "quant_round", "quant_observer"]),
    ("int8", 4): ([1.0 / 255], [1.0 / 256, 2.0 / 255]),
    # round((k/255 + eps) * 255) = k while eps * 255 < 1/2
    ("attacks", 1): ([0.5 / 255, 0.00196], [1.0 / 255, 0.5 / 256 * 0.9]),
    # ART counts a success only where the prediction changed: none at eps 0
    ("attacks", 3): (["success"], ["labels_from", "eps_units", "uint8"]),
}


def test_every_exercise_has_its_answers_here():
    listed = {(e["lesson"], e["number"]) for e in course.exercises()}
    assert listed == set(ANSWERS) | {("attacks", 2)}
    assert [e["number"] for e in course.exercises("padding")] == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        course.exercises("calculus")


@pytest.mark.parametrize("key", sorted(ANSWERS))
def test_answers_judged_by_the_experiment(key):
    right, wrong = ANSWERS[key]
    for a in right:
        v = course.check(*key, a)
        assert v["correct"], (key, a, v["why"])
    for a in wrong:
        v = course.check(*key, a)
        assert not v["correct"], (key, a, v["why"])


def test_misclassified_share_is_the_success_at_eps_zero():
    # the untrained model's misclassified share, counted here from its predictions
    m = driftlab.Model.zoo("lenet5", "torch", seed=7)
    x, y = driftlab.dataset("fashion-mnist", "test", limit=200)
    wrong = float(np.mean(m.predict(x).argmax(axis=1) != y))
    assert course.check("attacks", 2, wrong)["correct"]
    assert not course.check("attacks", 2, 1.0 - wrong)["correct"]
    assert not course.check("attacks", 2, 0.0)["correct"]


def test_no_answer_and_bad_exercises():
    assert not course.check("padding", 1, None)["correct"]
    assert "not yet" in repr(course.check("padding", 1, None))
    with pytest.raises(ValueError):
        course.check("padding", 9, "x")
    assert not course.check("padding", 2, "zero")["correct"]
