"""docs/PYTHON.md's "By example" block, run as a reader would paste it: in an empty folder (with the
repository's studies/ beside it, which the block's study call names), start to end, in a fresh
interpreter. It fails when any call in it no longer runs as written; the files the block says it
writes are checked to exist. (On 2026-11-30 it found that the block's export-then-import of a
tensorflow-preset LeNet-5 was refused: a channels-last flatten did not import.)

Run by ctest (entry `python`): PYTHONPATH=build/python.
"""
import os
import re
import subprocess
import sys

import driftlab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def by_example_block():
    text = open(os.path.join(ROOT, "docs", "PYTHON.md"), encoding="utf-8").read()
    section = text[text.index("## By example"):]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "docs/PYTHON.md: no python block after '## By example'"
    return m.group(1)


def test_the_by_example_block_runs_as_written(tmp_path):
    code = by_example_block()
    (tmp_path / "by_example.py").write_text(code, encoding="utf-8")
    os.symlink(os.path.join(ROOT, "studies"), tmp_path / "studies")
    # the module this suite tests, wherever PYTHONPATH found it (a relative path would not survive the cd)
    module_dir = os.path.dirname(os.path.dirname(os.path.abspath(driftlab.__file__)))
    env = dict(os.environ, OMP_WAIT_POLICY="passive",
               PYTHONPATH=os.pathsep.join([module_dir] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    r = subprocess.run([sys.executable, "by_example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for f in ("runs/tf/model.dlm", "runs/back.dlm", "runs/tf-int8.dlm", "lenet5.onnx", "runs/lenet5-onnx.dlm",
              "runs/tf-onnx", "runs/s1q/manifest.jsonl", "runs/s1q/report/index.html"):
        assert (tmp_path / f).exists(), f + " was not written; the block's output:\n" + r.stdout[-2000:]
