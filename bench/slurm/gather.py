#!/usr/bin/python3
"""The table of a bench/slurm/bm-array.sh run: one row per benchmark, with its suite's node (CPU,
GPU, driver, CUDA, commit) above each suite's rows, as docs/BENCHMARKS.md records runs.

  python3 bench/slurm/gather.py OUT_DIR [--filter REGEX]    Markdown on standard output
"""
import json
import os
import re
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    pattern = re.compile(sys.argv[sys.argv.index("--filter") + 1]) if "--filter" in sys.argv else None
    suites = [s.strip() for s in open(os.path.join(out, "suites.txt")) if s.strip()]
    missing = []
    for suite in suites:
        node_path = os.path.join(out, suite + ".node.txt")
        json_path = os.path.join(out, suite + ".json")
        if not os.path.exists(json_path):
            missing.append(suite)
            continue
        node = {}
        if os.path.exists(node_path):
            for line in open(node_path):
                if ":" in line:
                    k, v = line.split(":", 1)
                    node[k.strip()] = v.strip()
        data = json.load(open(json_path))
        ctx = data.get("context", {})
        print("### %s: %s, %s cores; GPU %s (CUDA %s); commit %s; %s" % (
            suite, node.get("cpu", "?"), node.get("cores", "?"), node.get("gpu", "?"), node.get("cuda", "-"),
            node.get("commit", "?"), node.get("date", ctx.get("date", "?"))))
        print()
        print("| benchmark | real time | unit | iterations |")
        print("| --- | --- | --- | --- |")
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" or (pattern and not pattern.search(b["name"])):
                continue
            print("| %s | %.4g | %s | %d |" % (b["name"], b["real_time"], b.get("time_unit", "ns"), b["iterations"]))
        print()
    if missing:
        print("no results (the task failed or did not run; see slurm-N.out and SUITE.log): " + ", ".join(missing))
        sys.exit(1)


if __name__ == "__main__":
    main()
