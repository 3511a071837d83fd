#!/usr/bin/env bash
# The three studies at full length (docs/STUDIES.md, "Full-length runs"): S1 (studies/s1.yaml:
# training, prediction, same weights, robustness), S3 (studies/s3-conversion.yaml) and S2
# (studies/s2-robustness.yaml), each into its own folder under RUNS, every run taking the cells
# the others already finished (--reuse: S2's and S3's LeNet-5 models are S1's at B-128). Resumable:
# kill it at any time and run it again; a finished study does no work. Hours on a 2-core machine
# (the spec comments say how many); on a cluster add EXECUTOR=slurm.
#
#   scripts/full-studies.sh                      # all three, in that order
#   STUDIES="s3 s2" scripts/full-studies.sh      # some of them
#   scripts/full-studies.sh publish              # copy each finished study to docs/studies/S1..S3 and report there
#   scripts/full-studies.sh archive              # keep the cells done or under way in studies/archive (git)
#
# Environment: DRIFTLAB (the binary, default build/driftlab), RUNS (default runs), JOBS (cells at
# once, default 2), EXECUTOR (local | slurm), STUDIES (default "s1 s3 s2").
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${DRIFTLAB:-build/driftlab}
RUNS=${RUNS:-runs}
JOBS=${JOBS:-2}
EXECUTOR=${EXECUTOR:-local}
STUDIES=${STUDIES:-"s1 s3 s2"}

spec_of() { case "$1" in s1) echo studies/s1.yaml ;; s2) echo studies/s2-robustness.yaml ;; s3) echo studies/s3-conversion.yaml ;; *) echo "unknown study $1" >&2; exit 2 ;; esac; }
dir_of() { case "$1" in s1) echo "$RUNS/s1-full" ;; s2) echo "$RUNS/s2" ;; s3) echo "$RUNS/s3" ;; esac; }
doc_of() { case "$1" in s1) echo docs/studies/S1 ;; s2) echo docs/studies/S2 ;; s3) echo docs/studies/S3 ;; esac; }

# Between sessions: a machine's runs/ does not outlive it (a new checkout has none), so the cells
# finished or under way are kept in git under studies/archive/<study>/cells/<hash>/ ("archive":
# done cells without their checkpoints, cells under way with them; an attack cell's examples too),
# and put back into runs/ before a run ("restore", which the run below does first).
ARCHIVE=${ARCHIVE:-studies/archive}
if [ "${1:-}" = archive ] || [ "${1:-}" = restore ]; then
  for s in $STUDIES; do
    run=$(dir_of "$s") kept="$ARCHIVE/$(basename "$(dir_of "$s")")"
    if [ "$1" = archive ]; then src="$run/cells" dst="$kept/cells"; else src="$kept/cells" dst="$run/cells"; fi
    [ -d "$src" ] || continue
    /usr/bin/python3 - "$1" "$src" "$dst" <<'PY'
import os, shutil, sys
what, src, dst = sys.argv[1:]
copied = size = 0
for h in sorted(os.listdir(src)):
    s, d = os.path.join(src, h), os.path.join(dst, h)
    if h.startswith(".") or not os.path.isdir(s):
        continue
    done = os.path.exists(os.path.join(s, "results.json"))
    if os.path.exists(os.path.join(d, "results.json")):
        continue  # kept already (archive) or finished here (restore)
    if what == "restore" and os.path.exists(d):
        continue  # under way here: its own checkpoint is newer
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    ignore = shutil.ignore_patterns("checkpoint.dlc*", "*.tmp") if done and what == "archive" else None
    shutil.copytree(s, tmp, ignore=ignore)
    shutil.rmtree(d, ignore_errors=True)
    os.rename(tmp, d)
    copied += 1
    size += sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
print("%s: %d cells %s %s (%.1f MB)" % (src, copied, "into" if what == "archive" else "back into", dst, size / 1e6))
PY
  done
  exit 0
fi

if [ "${1:-}" = publish ]; then
  for s in $STUDIES; do
    src=$(dir_of "$s") dst=$(doc_of "$s")
    [ -f "$src/manifest.jsonl" ] || { echo "$s: $src has no study yet" >&2; continue; }
    # everything but the study's README (the findings, written by hand) is the run's and the report's
    find "$dst" -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} + 2>/dev/null || true
    mkdir -p "$dst/cells"
    cp "$src/manifest.jsonl" "$src/study.json" "$dst/"
    # each cell's results and times (not the models, checkpoints or examples); a failed cell's error
    # (the report names it beside the table it is missing from)
    /usr/bin/python3 - "$src" "$dst" <<'PY'
import json, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for line in open(os.path.join(src, "manifest.jsonl")):
    h = json.loads(line)["hash"]
    for f in ("results.json", "timings.json", "error.txt"):
        p = os.path.join(src, "cells", h, f)
        if os.path.exists(p):
            os.makedirs(os.path.join(dst, "cells", h), exist_ok=True)
            shutil.copy(p, os.path.join(dst, "cells", h, f))
PY
    "$BIN" study report "$dst" --out "$dst" > "$dst/report.log"
    rm -f "$dst/figures.py" "$dst/bars.json" "$dst/explained.json"
    echo "$s: $dst ($(grep -c . "$dst/manifest.jsonl") cells; $(tail -1 "$dst/report.log"))"
  done
  exit 0
fi

STUDIES="$STUDIES" ARCHIVE="$ARCHIVE" RUNS="$RUNS" bash "$0" restore
for s in $STUDIES; do
  reuse=()
  for o in s1 s2 s3; do
    [ "$o" != "$s" ] && [ -d "$(dir_of "$o")/cells" ] && reuse+=(--reuse "$(dir_of "$o")")
  done
  echo "== $s: $(spec_of "$s") into $(dir_of "$s") ($(date -u +%FT%TZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  "$BIN" study run "$(spec_of "$s")" --out "$(dir_of "$s")" --any-build --jobs "$JOBS" --executor "$EXECUTOR" "${reuse[@]}"
done
