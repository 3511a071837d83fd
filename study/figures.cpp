#include "study/figures.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "engine/io/container.h"
#include "engine/io/shell.h"
#include "study/explain.h"
#include "study/files.h"
#include "study/run.h"

namespace driftlab {
namespace study {

namespace {

const char* kFigures = R"PY(# written by driftlab study report: python3 figures.py curves.json OUT_DIR bars.json
import json, math, sys, textwrap
import matplotlib
matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "driftlab"
import matplotlib.pyplot as plt

data = json.load(open(sys.argv[1]))
out = sys.argv[2]
made = []
# (metric, name, axis label, the values it can take: the seed band is clipped to them, so that a
# collapsed seed does not draw an accuracy above 1 or a loss below 0)
METRICS = (("val_acc", "validation accuracy", "accuracy (fraction correct)", (0.0, 1.0)),
           ("train_loss", "training loss", "loss (the policy's cross-entropy)", (0.0, float("inf"))))

def stats(series):
    e = min(len(s) for s in series)
    mean = [sum(s[i] for s in series) / len(series) for i in range(e)]
    if len(series) < 2:
        return mean, None
    sd = [math.sqrt(sum((s[i] - mean[i]) ** 2 for s in series) / (len(series) - 1)) for i in range(e)]
    return mean, sd

def finish_panel(ax, title, ylabel):
    # a per-epoch panel: its title (the group), the epoch axis in whole epochs, a light grid
    ax.set_title(title if title else "all cells", fontsize=9)
    ax.set_xlabel("epoch")
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.xaxis.get_major_locator().set_params(integer=True)

def legend_entries(axes, used):
    # the panels past the `used` ones hidden; each line's handle and label once, in panel order
    for i, row in enumerate(axes):
        for j, ax in enumerate(row):
            if i * len(row) + j >= used:
                ax.set_visible(False)
    handles, labels = [], []
    for row in axes:
        for ax in row:
            for hd, lb in zip(*ax.get_legend_handles_labels()):
                if lb not in labels:
                    handles.append(hd)
                    labels.append(lb)
    return handles, labels

def save(fig, base):
    # the same figure in the same bytes on every run (no date, fixed SVG ids): a report made again
    # from the same results changes no file
    fig.savefig("%s/%s.png" % (out, base), dpi=130, metadata={"Software": None})
    fig.savefig("%s/%s.svg" % (out, base), metadata={"Date": None})
    plt.close(fig)
    made.append(base + ".svg")

for st in data["steps"]:
    keys = st["keys"]
    line_key = "policy" if "policy" in keys else (keys[-1] if keys else None)
    panel_keys = [k for k in keys if k != line_key]
    panels, lines = [], []
    for g in st["groups"]:
        pv = tuple(g["values"][k] for k in panel_keys)
        lv = g["values"][line_key] if line_key else st["step"]
        if pv not in panels:
            panels.append(pv)
        if lv not in lines:
            lines.append(lv)
    fixed = ", ".join("%s %s" % (k, v) for k, v in st["fixed"].items())
    seeds = max(len(g["seeds"]) for g in st["groups"])
    # More than ten lines cannot be told apart (ten colours): a study of one-knob variants shows
    # its plain presets, and says where the variants are read (the explanations table).
    left_out = 0
    if len(lines) > 10 and line_key == "policy":
        plain = [lv for lv in lines if "," not in lv]
        if plain:
            left_out = len(lines) - len(plain)
            lines = plain
    if left_out:
        fixed += "; the %d one-knob variants are in the explanations table, not drawn" % left_out
    for metric, name, axis, (lo, hi) in METRICS:
        cols = min(3, len(panels))
        rows = (len(panels) + cols - 1) // cols
        # The legend below the panels: as many columns as its longest label lets fit, as many rows
        # as it needs, and the figure taller by that much (never over the data, never cut: wider
        # than the panels need when one label is longer than they are wide).
        names = ["%s=%s" % (line_key, lv) if line_key else st["step"] for lv in lines]
        longest = max(len(n) for n in names)
        width = max(7.0, 4.4 * cols, 0.085 * longest + 0.95)
        ncol = max(1, min(len(names), int((width - 0.4) / (0.085 * longest + 0.55))))
        legend_rows = (len(names) + ncol - 1) // ncol
        legend_in = 0.25 * legend_rows + 0.1
        height = 3.3 * rows + 1.4 + legend_in
        fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False, sharey=True)
        cmap = plt.get_cmap("tab10")
        for pi, pv in enumerate(panels):
            ax = axes[pi // cols][pi % cols]
            for li, lv in enumerate(lines):
                for g in st["groups"]:
                    if tuple(g["values"][k] for k in panel_keys) != pv:
                        continue
                    if (g["values"][line_key] if line_key else st["step"]) != lv:
                        continue
                    series = [s for s in g[metric] if s]
                    if not series:
                        continue
                    mean, sd = stats(series)
                    xs = list(range(1, len(mean) + 1))
                    label = "%s=%s" % (line_key, lv) if line_key else st["step"]
                    ax.plot(xs, mean, color=cmap(li % 10), lw=1.8, marker="o" if len(xs) < 12 else None, ms=3,
                            label=label)
                    if sd:
                        ax.fill_between(xs, [max(lo, m - s) for m, s in zip(mean, sd)],
                                        [min(hi, m + s) for m, s in zip(mean, sd)], color=cmap(li % 10), alpha=0.18, lw=0)
            finish_panel(ax, ", ".join("%s=%s" % (k, v) for k, v in zip(panel_keys, pv)), axis if pi % cols == 0 else None)
        handles, labels = legend_entries(axes, len(panels))
        order = sorted(range(len(labels)), key=lambda i: names.index(labels[i]) if labels[i] in names else i)
        fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower center", ncol=ncol,
                   frameon=False, fontsize=9, bbox_to_anchor=(0.5, 0.005))
        band = "line: mean, band: +-1 sd over %d seeds (within the metric's range)" % seeds if seeds > 1 else "one seed"
        sub = textwrap.fill("%s; %s" % (fixed, band), width=int(width * 13))
        title = "%s: %s per epoch, step '%s'\n%s" % (data["study"], name, st["step"], sub)
        fig.suptitle(title, fontsize=10)
        top_in = 0.22 * (title.count("\n") + 1) + 0.15  # the title's lines, in inches
        # Margins in inches: the title's lines above, the legend and the x label below.
        fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, top=1 - (top_in + 0.35) / height,
                            bottom=(0.75 + legend_in) / height, wspace=0.12, hspace=0.6)
        base = "%s_%s" % (st["step"], metric)
        save(fig, base)
# The divergence of two presets' curves: per group, |mean a - mean b| of the validation accuracy per
# epoch for each plain preset against the first, beside the seeds' spread of that difference
# (sqrt(sd_a^2 + sd_b^2), dashed): where the solid line is above the dashed one, the presets part
# beyond what the seeds explain.
for st in data["steps"]:
    keys = st["keys"]
    if "policy" not in keys:
        continue
    plain = []
    for g in st["groups"]:
        if "," not in g["values"]["policy"] and g["values"]["policy"] not in plain:
            plain.append(g["values"]["policy"])
    if len(plain) < 2 or max(len(g["seeds"]) for g in st["groups"]) < 2:
        continue
    panel_keys = [k for k in keys if k != "policy"]
    panels = []
    for g in st["groups"]:
        pv = tuple(g["values"][k] for k in panel_keys)
        if pv not in panels:
            panels.append(pv)
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    pairs = [(plain[0], b) for b in plain[1:]]
    # Two legend columns of "seeds' spread of A - B" labels: the figure as wide as they need.
    longest = max(len("seeds' spread of %s - %s" % pr) for pr in pairs)
    width = max(7.0, 4.4 * cols, 2 * (0.085 * longest + 0.55) + 0.4)
    legend_in = 0.25 * len(pairs) + 0.1
    height = 3.3 * rows + 1.6 + legend_in
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False, sharey=True)
    cmap = plt.get_cmap("tab10")
    for pi, pv in enumerate(panels):
        ax = axes[pi // cols][pi % cols]
        at = {g["values"]["policy"]: g for g in st["groups"] if tuple(g["values"][k] for k in panel_keys) == pv}
        for li, (a, b) in enumerate(pairs):
            if a not in at or b not in at:
                continue
            sa = [s for s in at[a]["val_acc"] if s]
            sb = [s for s in at[b]["val_acc"] if s]
            if len(sa) < 2 or len(sb) < 2:
                continue
            ma, da = stats(sa)
            mb, db = stats(sb)
            e = min(len(ma), len(mb))
            xs = list(range(1, e + 1))
            ax.plot(xs, [abs(ma[i] - mb[i]) for i in range(e)], color=cmap(li % 10), lw=1.8,
                    marker="o" if e < 12 else None, ms=3, label="|%s - %s|" % (a, b))
            ax.plot(xs, [math.sqrt(da[i] ** 2 + db[i] ** 2) for i in range(e)], color=cmap(li % 10), lw=1.2,
                    ls="--", label="seeds' spread of %s - %s" % (a, b))
        finish_panel(ax, ", ".join("%s=%s" % (k, v) for k, v in zip(panel_keys, pv)),
                     "|difference| of validation accuracy" if pi % cols == 0 else None)
    handles, labels = legend_entries(axes, len(panels))
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize=9, bbox_to_anchor=(0.5, 0.005))
    fixed = ", ".join("%s %s" % (k, v) for k, v in st["fixed"].items())
    sub = textwrap.fill("%s; solid: the presets' gap (means over seeds), dashed: its seeds' spread" % fixed,
                        width=int(width * 13))
    title = "%s: divergence of the presets' validation accuracy, step '%s'\n%s" % (data["study"], st["step"], sub)
    fig.suptitle(title, fontsize=10)
    top_in = 0.22 * (title.count("\n") + 1) + 0.15
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, top=1 - (top_in + 0.35) / height,
                        bottom=(0.75 + legend_in) / height, wspace=0.12, hspace=0.6)
    base = "%s_divergence" % st["step"]
    save(fig, base)
# Attribution: per explained gap, the share of it each knob moves from either preset's side
# (study/explain.h), a bar per knob and side; solid where the move is beyond the seeds' spread.
gaps = json.load(open(sys.argv[4])) if len(sys.argv) > 4 else []
for gi, g in enumerate(gaps):
    knobs = []
    for s in g["shares"]:
        if s["knob"] not in knobs:
            knobs.append(s["knob"])
    height = 1.8 + 0.32 * len(knobs) + 0.5
    fig, ax = plt.subplots(figsize=(8.0, height))
    # the legend from proxies: a side's colour only where that side was flipped, and one entry for
    # hollow (a legend handle copies its first bar, hollow or not, and shows a side with no bar)
    from matplotlib.patches import Patch
    proxies = []
    for si, side in enumerate([g["a"], g["b"]]):
        ys, ws, solid = [], [], []
        for ki, k in enumerate(knobs):
            for s in g["shares"]:
                if s["knob"] == k and s["side"] == side:
                    ys.append(ki + (si - 0.5) * 0.38)
                    ws.append(100 * s["share"])
                    solid.append(s["beyond_spread"])
        color = plt.get_cmap("tab10")(si)
        ax.barh(ys, ws, 0.36, color=[color if b else "white" for b in solid], edgecolor=color, lw=1.2)
        if ys:
            proxies.append(Patch(facecolor=color, edgecolor=color, label="flipped on %s: beyond the seeds' spread" % side))
    ax.axvline(100, color="#555", lw=1, ls="--")
    ax.axvline(0, color="#555", lw=0.8)
    ax.set_yticks(range(len(knobs)))
    ax.set_yticklabels(knobs, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("share of the gap the knob moves (%; 100: all of it)")
    ax.grid(axis="x", alpha=0.3)
    title = "%s: which knob moves %s, %s %.4f vs %s %.4f%s" % (
        data["study"], g["measure"], g["a"], g["mean_a"], g["b"], g["mean_b"],
        ("\n" + g["within"]) if g["within"] else "")
    fig.suptitle(textwrap.fill(title, 95), fontsize=9)
    proxies.append(Patch(facecolor="white", edgecolor="#555", label="hollow: within the seeds' spread"))
    fig.legend(handles=proxies, loc="lower center", ncol=1, frameon=False, fontsize=8, bbox_to_anchor=(0.5, 0.005))
    fig.subplots_adjust(left=0.3, right=0.97, top=1 - 0.75 / height, bottom=(0.6 + 0.2 * len(proxies)) / height)
    base = "%s_attribution_%d" % (g["step"], gi + 1)
    save(fig, base)
# Bars: one measure per step (the time per epoch of a training, the int8 accuracy of a quantization,
# an attack's success), a bar per policy in each group of the other keys, whiskers +-1 sd over seeds.
# (An attack judged by other models shows their success: crafted on fp32, judged on int8 is S2's design.)
BARS = {"train": [("seconds of the fastest epoch", "seconds of the fastest epoch (training)"),
                  ("seconds per epoch", "seconds per epoch (training)")],
        "quantize": [("int8 test accuracy", "int8 test accuracy (fraction correct)")],
        "evaluate": [("test accuracy", "test accuracy (fraction correct)")],
        "convert": [("misclassification", "misclassification: share of inputs whose label changes")],
        "attack": [("success rate", "attack success rate (fraction of inputs)")]}
REGULAR = "success rate on the inputs all models get right"
JUDGED = "success rate judged by "
def expand(t, measure):
    # one row per (row, measure): the attacked model's success and each judge's side by side (S2)
    out = []
    for r in t["rows"]:
        for m in measure:
            if m in r.get("stats", {}) and r["stats"][m]["n"] > 0:
                g = dict(r.get("group", {}))
                g["judged by"] = "the attacked model" if m == REGULAR else m[len(JUDGED):]
                out.append({"group": g, "stats": {"_": r["stats"][m]}})
    return out
for t in json.load(open(sys.argv[3])):
    if t["kind"] not in BARS:
        continue
    have = set(k for r in t["rows"] for k in r.get("stats", {}))
    judged = sorted(k for k in have if k.startswith(JUDGED))
    keys = list(t["keys"])
    if t["kind"] == "attack" and REGULAR in have and judged:
        t = dict(t, rows=expand(t, [REGULAR] + judged), keys=keys + ["judged by"])
        measure, axis = "_", "success rate over the inputs every model gets right"
        line_key = "judged by"
    else:
        choice = [b for b in BARS[t["kind"]] if b[0] in have]
        if not choice:
            continue
        measure, axis = choice[0]
        line_key = next((k for k in ("policy", "train.policy") if k in keys), keys[-1] if keys else None)
    rows = [r for r in t["rows"] if measure in r.get("stats", {}) and r["stats"][measure]["n"] > 0]
    bar_note = ""
    if line_key == "policy" and len(set(r.get("group", {}).get("policy") for r in rows)) > 10:
        # as the curves: more than ten bars a group cannot be told apart; the plain presets only
        plain = [r for r in rows if "," not in r.get("group", {}).get("policy", "")]
        if plain:
            bar_note = "; the %d one-knob variants are in the explanations table" % (
                len(set(r["group"]["policy"] for r in rows)) - len(set(r["group"]["policy"] for r in plain)))
            rows = plain
    if not rows:
        continue
    keys = t["keys"]
    # the keys naming a group, the model first, a key whose value another one already fixes left out
    # (a dataset that follows the model), each without its step's prefix where that is unambiguous
    rank = lambda k: (0 if k.split(".")[-1] == "model" else 2 if k.split(".")[-1] == "dataset" else 1)
    group_keys = []
    for k in sorted((k for k in keys if k != line_key), key=rank):
        fixed = False
        for j in group_keys:
            seen = {}
            if all(seen.setdefault(r.get("group", {}).get(j), r.get("group", {}).get(k)) == r.get("group", {}).get(k)
                   for r in rows):
                fixed = True
                break
        if not fixed:
            group_keys.append(k)
    short = {k: k.split(".")[-1] for k in group_keys}
    if len(set(short.values())) < len(short):
        short = {k: k for k in group_keys}
    groups, lines = [], []
    for r in rows:
        gv = tuple(r.get("group", {}).get(k, "") for k in group_keys)
        lv = r.get("group", {}).get(line_key, t["step"]) if line_key else t["step"]
        if gv not in groups:
            groups.append(gv)
        if lv not in lines:
            lines.append(lv)
    names = ["%s=%s" % (line_key, lv) if line_key else t["step"] for lv in lines]
    longest_tick = max(len("%s=%s" % (short[k], v)) for gv in groups for k, v in zip(group_keys, gv)) if group_keys else 0
    longest = max(len(n) for n in names)
    # As wide as the bars, their tick labels and the longest legend label need (never cut).
    width = max(7.0, 0.45 * len(groups) * len(lines) + 2.5, len(groups) * (0.075 * longest_tick + 0.3) + 1.5,
                0.085 * longest + 0.95)
    ncol = max(1, min(len(names), int((width - 0.4) / (0.085 * longest + 0.55))))
    legend_in = 0.25 * ((len(names) + ncol - 1) // ncol) + 0.1
    label_lines = max(1, len(group_keys))
    height = 4.0 + legend_in + 0.2 * label_lines
    fig, ax = plt.subplots(figsize=(width, height))
    cmap = plt.get_cmap("tab10")
    bw = 0.8 / len(lines)
    seeds = 0
    heights = []
    for li, lv in enumerate(lines):
        xs, hs, es = [], [], []
        for gi, gv in enumerate(groups):
            for r in rows:
                if tuple(r.get("group", {}).get(k, "") for k in group_keys) != gv:
                    continue
                if line_key and r.get("group", {}).get(line_key) != lv:
                    continue
                st = r["stats"][measure]
                xs.append(gi + (li - (len(lines) - 1) / 2) * bw)
                hs.append(st["mean"])
                es.append(st["sd"])
                seeds = max(seeds, st["n"])
        # the lower whisker stops at 0 under a positive bar (times, sizes, rates cannot go below it)
        lower = [min(e, h) if h >= 0 else e for h, e in zip(hs, es)]
        ax.bar(xs, hs, bw * 0.92, yerr=[lower, es], capsize=3, color=cmap(li % 10), label=names[li])
        heights += [abs(h) + e for h, e in zip(hs, es)]
    if heights and max(heights) == 0:
        # nothing to draw (a faithful conversion's misclassification): say so, on an axis from 0
        ax.set_ylim(0, 1)
        ax.text(0.5, 0.5, "0 in every cell of every group", transform=ax.transAxes, ha="center", va="center")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(["\n".join("%s=%s" % (short[k], v) for k, v in zip(group_keys, gv)) for gv in groups], fontsize=8)
    ax.set_ylabel(axis)
    ax.grid(axis="y", alpha=0.3)
    title = "%s: %s, step '%s'\nbars: mean, whiskers: +-1 sd over %d seed%s (not below 0)%s" % (
        data["study"], axis if measure == "_" else measure, t["step"], seeds, "" if seeds == 1 else "s", bar_note)
    fig.suptitle(title, fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=ncol, frameon=False, fontsize=9, bbox_to_anchor=(0.5, 0.005))
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, top=1 - 0.85 / height,
                        bottom=(0.45 + 0.2 * label_lines + legend_in) / height)
    base = "%s_bars" % t["step"]
    save(fig, base)
# A table over models (robustness: each attack's success per model and R(m), S1's Figure 6; R(m, c)
# after conversion, S3's): a panel per measure, R last; a bar per model in each group of the other
# keys (a batch size, a trained model), or, with one group, the models along the axis. Each row's
# "by_model" is the report's own layout of it (study/report.h model_tables).
import re
def by_model(r, model, measure):
    bm = r["by_model"]
    if model not in bm["models"] or measure not in bm["columns"]:
        return None
    return bm["cells"][bm["models"].index(model)][bm["columns"].index(measure)]
for t in json.load(open(sys.argv[3])):
    if not any("by_model" in r for r in t["rows"]):
        continue
    measures, models = [], []
    for r in t["rows"]:
        for c in r["by_model"]["columns"]:
            if c not in measures:
                measures.append(c)
        for m in r["by_model"]["models"]:
            if m not in models:
                models.append(m)
    if not measures:
        continue
    measures = [m for m in measures if m != "R"] + (["R"] if "R" in measures else [])
    keys = t["keys"]
    short = {k: k.split(".")[-1] for k in keys}
    if len(set(short.values())) < len(short):
        short = {k: k for k in keys}
    # groups ordered by model first, then the others (a batch size)
    order = sorted(keys, key=lambda k: 0 if k.split(".")[-1] == "model" else 1)
    natural = lambda v: (0, float(v)) if re.match(r"^-?[0-9.]+$", v) else (1, v)  # batch 32 before 128
    rows = sorted(t["rows"], key=lambda r: tuple(natural(r.get("group", {}).get(k, "")) for k in order))
    groups = [", ".join("%s=%s" % (short[k], r.get("group", {}).get(k, "")) for k in order) for r in rows]
    one = len(rows) == 1
    seeds = max((st["n"] for r in rows for st in r.get("stats", {}).values()), default=0)
    for i, r in enumerate(rows):
        n = min((st["n"] for st in r.get("stats", {}).values()), default=0)
        if n < seeds:
            groups[i] += "\n(%d seed%s)" % (n, "" if n == 1 else "s")
    nx = len(models) if one else len(groups)
    per = 1 if one else len(models)
    # along the axis, a model's name on a line per part ("lstm/torch/onnx+naive-rnn-gates": three)
    ticks = [m.replace("/", "\n") for m in models] if one else groups
    longest = max(len(line) for x in ticks for line in x.split("\n"))
    width = max(7.0, 0.42 * nx * per + 2.0, nx * (0.075 * longest + 0.3) + 1.5)
    label_lines = max(x.count("\n") + 1 for x in ticks)
    height = (2.5 + 0.15 * label_lines) * len(measures) + 1.6
    fig, axes = plt.subplots(len(measures), 1, figsize=(width, height), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for pi, measure in enumerate(measures):
        ax = axes[pi][0]
        bw = 0.8 / per
        for mi, mo in enumerate(models):
            xs, hs, es = [], [], []
            for gi, r in enumerate(rows):
                st = by_model(r, mo, measure)
                if not st or st["n"] == 0:
                    continue
                xs.append(mi if one else gi + (mi - (per - 1) / 2) * bw)
                hs.append(st["mean"])
                es.append(st["sd"])
            # whiskers kept to what the measure can take: a rate, or a rate's absolute change, in [0, 1];
            # R in [0, the number of attacks]
            cap = len(measures) - 1 if measure == "R" else 1.0
            lower = [min(e, h) for h, e in zip(hs, es)]
            upper = [max(0.0, min(e, cap - h)) for h, e in zip(hs, es)]
            ax.bar(xs, hs, bw * 0.92, yerr=[lower, upper], capsize=3, color=cmap(0 if one else mi % 10),
                   label=None if one else mo)
        ax.set_xticks(range(nx))
        ax.set_xticklabels(ticks, fontsize=8)
        if measure == "R":
            ax.set_title("R: the robustness indicator, the sum over attacks of (S - min) / (max - min) across "
                         "the models; smaller is more robust", fontsize=9)
            ax.set_ylabel("R")
        else:
            ax.set_title(measure, fontsize=9)
            ax.set_ylabel("|change in success rate|" if "S_conv" in measure else "success rate (fraction)")
        ax.grid(axis="y", alpha=0.3)
    title = "%s: step '%s', %s\nbars: mean, whiskers: +-1 sd over %d seed%s (within the measure's range)" % (
        data["study"], t["step"], "each model's attack success and R" if t["kind"] == "robustness"
        else "each converted model's change in attack success and R(m, c)", seeds, "" if seeds == 1 else "s")
    fig.suptitle(title, fontsize=10)
    if not one:
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, ["model: " + l for l in labels], loc="lower center", ncol=min(len(labels), 6),
                   frameon=False, fontsize=9, bbox_to_anchor=(0.5, 0.005))
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, top=1 - 0.8 / height, bottom=0.9 / height,
                        hspace=0.55 + 0.2 * label_lines)
    save(fig, "%s_bars" % t["step"])
print(json.dumps(made))
)PY";

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// The settings every cell of the step shares (the ones a reader needs to read a curve).
nlohmann::ordered_json fixed_settings(const Plan& plan, const ReportTable& t) {
  nlohmann::ordered_json fixed;
  std::map<std::string, std::set<std::string>> seen;
  for (const Cell& c : plan.cells)
    if (c.step == t.step)
      for (const auto& [k, v] : c.params) seen[k].insert(v);
  for (const char* k : {"model", "dataset", "limit", "epochs", "batch", "optimizer", "lr", "momentum", "device"}) {
    auto it = seen.find(k);
    if (it == seen.end() || it->second.size() != 1 || it->second.begin()->empty()) continue;
    const std::string& v = *it->second.begin();
    if (std::string(k) == "limit" && v == "0") continue;
    fixed[k] = v;
  }
  return fixed;
}

}  // namespace

nlohmann::ordered_json study_curves(const std::string& dir, const std::vector<ReportTable>& tables) {
  nlohmann::ordered_json out;
  const nlohmann::json study = read_json_if_any(dir + "/study.json");
  out["study"] = study.is_null() ? std::string("study") : study.value("study", std::string("study"));
  out["steps"] = nlohmann::ordered_json::array();
  const Plan plan = read_plan(dir);
  for (const ReportTable& t : tables) {
    if (t.kind != "train") continue;
    nlohmann::ordered_json st;
    st["step"] = t.step;
    st["keys"] = t.keys;
    st["fixed"] = fixed_settings(plan, t);
    st["groups"] = nlohmann::ordered_json::array();
    for (const ReportRow& r : t.rows) {
      nlohmann::ordered_json g;
      for (std::size_t i = 0; i < t.keys.size(); ++i) g["values"][t.keys[i]] = r.values[i];
      if (t.keys.empty()) g["values"] = nlohmann::ordered_json::object();
      g["seeds"] = r.cell_seeds;
      for (const char* m : {"val_acc", "val_loss", "train_loss", "train_acc"}) g[m] = nlohmann::ordered_json::array();
      for (const std::string& h : r.cells) {
        const nlohmann::json res = read_json_if_any(dir + "/cells/" + h + "/results.json");
        for (const char* m : {"val_acc", "val_loss", "train_loss", "train_acc"}) {
          std::vector<double> v;
          if (!res.is_null() && res.contains("epochs"))
            for (const auto& e : res["epochs"]) v.push_back(e.value(m, 0.0));
          g[m].push_back(v);
        }
      }
      if (!r.cells.empty()) st["groups"].push_back(g);
    }
    if (!st["groups"].empty()) out["steps"].push_back(st);
  }
  return out;
}

std::vector<std::string> write_study_figures(const std::string& dir, const std::vector<ReportTable>& tables,
                                             const std::string& out, const std::vector<GapExplanation>& explained) {
  const nlohmann::ordered_json curves = study_curves(dir, tables);
  write_file_atomic(out + "/curves.json", curves.dump(1) + "\n");
  write_file_atomic(out + "/bars.json", tables_json(tables));
  nlohmann::ordered_json gaps = nlohmann::ordered_json::array();
  for (const GapExplanation& g : explained) {
    nlohmann::ordered_json j;
    j["step"] = g.step;
    j["within"] = g.within;
    j["measure"] = g.measure;
    j["a"] = g.a;
    j["b"] = g.b;
    j["mean_a"] = g.mean_a;
    j["mean_b"] = g.mean_b;
    j["shares"] = nlohmann::ordered_json::array();
    for (const KnobShare& s : g.shares)
      j["shares"].push_back({{"knob", s.knob}, {"side", s.side}, {"share", s.share}, {"beyond_spread", s.beyond_spread}});
    gaps.push_back(j);
  }
  write_file_atomic(out + "/explained.json", gaps.dump(1) + "\n");
  write_file_atomic(out + "/figures.py", kFigures);
  const char* py = std::getenv("DRIFTLAB_PYTHON");
  const std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " " + shell_quoted(out + "/figures.py") +
                          " " + shell_quoted(out + "/curves.json") + " " + shell_quoted(out) + " " +
                          shell_quoted(out + "/bars.json") + " " + shell_quoted(out + "/explained.json") + " 2>&1";
  int rc = 0;
  const std::string said = run_capture(cmd, &rc);
  check(rc == 0, "study report: the figures need Python 3 with matplotlib (apt-get install python3-matplotlib; "
        "or --no-figures): ", cmd, " said: ", said);
  // The script's last line: the SVG names it wrote.
  const std::size_t at = said.rfind('[');
  check(at != std::string::npos, "study report: ", cmd, " printed no list of figures: ", said);
  std::vector<std::string> made;
  for (const auto& n : nlohmann::json::parse(said.substr(at))) made.push_back(n.get<std::string>());
  return made;
}

std::string study_html(const std::string& dir, const std::vector<ReportTable>& tables,
                       const std::vector<std::string>& figures, const std::vector<Comparison>& comparisons,
                       const std::string& explanations_markdown) {
  const nlohmann::json study = read_json_if_any(dir + "/study.json");
  const std::string name = study.is_null() ? "study" : study.value("study", std::string("study"));
  const std::string title = study.is_null() ? "" : study.value("title", std::string());
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(name)
    << "</title>\n<style>body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #bbb;padding:3px 8px;"
       "text-align:right}th{background:#eee}td:first-child,th:first-child{text-align:left}img{max-width:100%;"
       "border:1px solid #ddd;margin:0.5em 0}.stamp{color:#555;font-size:12px}</style></head>\n<body>\n";
  h << "<h1>" << html_escape(name) << (title.empty() ? "" : ": " + html_escape(title)) << "</h1>\n";
  if (!study.is_null()) {
    h << "<p class=\"stamp\">spec " << html_escape(study.value("spec", std::string())) << ", build "
      << html_escape(study.value("build", std::string())) << ", " << study.value("cells", 0)
      << " cells. Every cell's parameters (policy string, seed, device): manifest.jsonl.</p>\n";
    if (study.contains("adaptations") && !study["adaptations"].empty()) {
      h << "<h2>Adaptations from the paper</h2>\n<ul>\n";
      for (const auto& a : study["adaptations"]) h << "<li>" << html_escape(a.get<std::string>()) << "</li>\n";
      h << "</ul>\n";
    }
  }
  for (const ReportTable& t : tables) {
    h << "<h2>" << html_escape(t.step) << " (" << html_escape(t.kind) << ")</h2>\n<p>" << t.cells << " cells";
    if (t.missing) h << ", " << t.missing << " without results yet";
    if (!t.failed.empty()) h << ", " << t.failed.size() << " failed";
    h << "; mean &plusmn; sample standard deviation over seeds (n).</p>\n";
    if (!t.failed.empty()) {
      h << "<ul>\n";
      for (const std::string& f : t.failed) h << "<li>failed: " << html_escape(f) << "</li>\n";
      h << "</ul>\n";
    }
    const std::vector<ModelTable> mts = model_tables(t);
    for (const ModelTable& mt : mts) {
      // the papers' layout: a row per model, a column per measure
      std::string head = mt.group;
      if (!mt.seeds.empty()) head += (head.empty() ? "" : "; ") + std::string("seeds ") + mt.seeds;
      if (!head.empty()) h << "<p>" << html_escape(head) << "</p>\n";
      h << "<table><tr><th>model</th>";
      for (const std::string& c : mt.columns) h << "<th>" << html_escape(c) << "</th>";
      h << "</tr>\n";
      for (std::size_t m = 0; m < mt.models.size(); ++m) {
        h << "<tr><td>" << html_escape(mt.models[m]) << "</td>";
        for (const Stat& st : mt.cells[m]) h << "<td>" << html_escape(stat_text(st)) << "</td>";
        h << "</tr>\n";
      }
      h << "</table>\n";
    }
    if (!mts.empty()) {
      for (const std::string& f : figures)
        if (f.rfind(t.step + "_", 0) == 0)
          h << "<p><img src=\"" << html_escape(f) << "\" alt=\"" << html_escape(f) << "\"></p>\n";
      continue;
    }
    h << "<table><tr>";
    for (const std::string& k : t.keys) h << "<th>" << html_escape(k) << "</th>";
    for (const std::string& m : t.measures) h << "<th>" << html_escape(m) << "</th>";
    h << "<th>seeds</th></tr>\n";
    for (const ReportRow& r : t.rows) {
      h << "<tr>";
      for (const std::string& v : r.values) h << "<td>" << html_escape(v) << "</td>";
      for (const Stat& s : r.stats) h << "<td>" << html_escape(stat_text(s)) << "</td>";
      std::string seeds;
      for (const std::string& s : r.seeds) seeds += (seeds.empty() ? "" : ", ") + s;
      h << "<td>" << html_escape(seeds) << "</td></tr>\n";
    }
    h << "</table>\n";
    for (const BatchTable& b : batch_tables(t)) {
      // S1's layout: a column per batch size
      h << "<p>" << html_escape(b.measure) << " by batch size (S1's layout)</p>\n<table><tr>";
      for (const std::string& k : b.row_keys) h << "<th>" << html_escape(k) << "</th>";
      for (const std::string& x : b.batches) h << "<th>B-" << html_escape(x) << "</th>";
      h << "</tr>\n";
      for (std::size_t r = 0; r < b.rows.size(); ++r) {
        h << "<tr>";
        for (const std::string& v : b.rows[r]) h << "<td>" << html_escape(v) << "</td>";
        for (const Stat& st : b.cells[r]) h << "<td>" << html_escape(stat_text(st)) << "</td>";
        h << "</tr>\n";
      }
      h << "</table>\n";
    }
    for (const std::string& f : figures)
      if (f.rfind(t.step + "_", 0) == 0)
        h << "<p><img src=\"" << html_escape(f) << "\" alt=\"" << html_escape(f) << "\"></p>\n";
  }
  for (std::size_t from = 0; from < comparisons.size();) {
    // one table per key compared (the presets; S2's regular against quantized)
    std::size_t to = from;
    while (to < comparisons.size() && comparisons[to].key == comparisons[from].key) ++to;
    h << "<h2>Comparisons of " << html_escape(comparisons[from].key) << " (paired by seed)</h2>\n"
      << "<p>A gap is within the seeds' spread when |mean a &minus; mean b| &le; sqrt(sd_a&sup2; + sd_b&sup2;). "
         "Wilcoxon signed-rank (two-sided, exact, SciPy's rules) over the seeds both have: with n pairs p cannot "
         "go below 2<sup>1&minus;n</sup>. A12: the chance that a's value exceeds b's.</p>\n<table><tr><th>step</th>"
         "<th>within</th><th>measure</th><th>a</th><th>b</th><th>mean a &minus; mean b</th><th>within spread</th>"
         "<th>pairs</th><th>Wilcoxon p</th><th>A12</th></tr>\n";
    for (std::size_t i = from; i < to; ++i) {
      const Comparison& c = comparisons[i];
      char d[32], pv[32], a12[32];
      std::snprintf(d, sizeof d, "%+.4f", c.mean_a - c.mean_b);
      std::snprintf(pv, sizeof pv, "%.3g", c.p);
      std::snprintf(a12, sizeof a12, "%.2f", c.a12);
      h << "<tr><td>" << html_escape(c.step) << "</td><td>" << html_escape(c.within) << "</td><td>"
        << html_escape(c.measure) << "</td><td>" << html_escape(c.a) << "</td><td>" << html_escape(c.b) << "</td><td>" << d
        << "</td><td>" << (c.within_spread ? "yes" : "<b>no</b>") << "</td><td>" << c.pairs << "</td><td>"
        << (c.pairs >= 2 ? pv : "") << "</td><td>" << (c.pairs >= 2 ? a12 : "") << "</td></tr>\n";
    }
    h << "</table>\n";
    from = to;
  }
  // The explanations (study/explain.h): its bullet lines as a list, the markdown marks dropped.
  if (!explanations_markdown.empty()) {
    h << "<h2>Explanations (one knob flipped at a time)</h2>\n<ul>\n";
    std::istringstream lines(explanations_markdown);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("- ", 0) != 0) continue;
      std::string text;
      for (char c : line.substr(2))
        if (c != '*' && c != '`') text += c;
      h << "<li>" << html_escape(text) << "</li>\n";
    }
    h << "</ul>\n";
  }
  // On load, every figure must have decoded: the page says which did not (a test reads it).
  h << "<script>window.addEventListener('load', () => { const bad = [...document.images]"
       ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'));"
       " document.body.dataset.figures = document.images.length; document.body.dataset.broken = bad.join(' '); });"
       "</script>\n</body></html>\n";
  return h.str();
}

}  // namespace study
}  // namespace driftlab
