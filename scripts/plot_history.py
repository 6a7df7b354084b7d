#!/usr/bin/env python3
"""Plots of a ptxtune store, as PNG.

  plot_history.py --db FILE [--gpu FP] [--match REGEX] [--set LABEL]
                  [--metric us|tflops] [--threshold 3] [--out history.png]
      A GPU's history: for every problem, the best time (or TFLOP/s) of each
      run (final ok timed rows) against the run's start date, one line and
      one marker per run per problem, log scale. The runs of fingerprints
      that differ only in tool, driver, compiler or PTX ISA version are one
      history (a dotted vertical line marks each change, labelled with what
      changed); another GPU or benchmark protocol is another history.
      Markers: filled measured, hollow cost-model estimates (emulator), 'x'
      the mock device. A run whose best is slower than the previous run's by
      more than the threshold and the noise of the two stored spreads (the
      rule of 'ptxtune regress') is marked with a red triangle.
      --gpu: a fingerprint key prefix, a GPU name or its short name (H200;
      default: the GPU with the most runs). --set: the problem set's name in
      the title (default: the store's file name).

  plot_history.py --regress FILE.csv [--out regress.png] [--per-problem DIR]
      A regress table ('ptxtune regress ... --kernels --csv > FILE.csv') as
      bars: the change of each kernel (%), coloured by verdict, with its
      noise band; --per-problem DIR also writes one plot per problem there.

Reads the store with Python's sqlite3 (read-only); needs matplotlib, and
says so plainly (exit 3) when it is missing.
"""
import argparse
import csv
import datetime
import math
import os
import re
import sqlite3
import sys

APPLICATION_ID = 0x50545854
VERSION_FIELDS = ("driver", "compiler", "ptx_version", "generator")


def die(msg, code=2):
    print("plot_history.py: " + msg, file=sys.stderr)
    sys.exit(code)


def need_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.dates as mdates
        return plt, mdates
    except ImportError:
        die("matplotlib is not installed (apt-get install python3-matplotlib, or "
            "pip install matplotlib); nothing drawn", 3)


def open_store(path):
    if not os.path.exists(path):
        die("%s: no such file" % path)
    try:
        db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        app = db.execute("PRAGMA application_id").fetchone()[0]
    except sqlite3.DatabaseError as e:
        die("%s: not a ptxtune database (%s)" % (path, e))
    if app & 0xffffffff != APPLICATION_ID:
        die("%s: not a ptxtune database (application_id 0x%08x)" % (path, app & 0xffffffff))
    return db


def short_match(gpu, want):
    s = gpu[7:] if gpu.startswith("NVIDIA ") else gpu
    w = want.lower()
    first = s.split(" ")[0]
    return w in (s.lower(), first.lower(), first.split("-")[0].lower())


def history(args):
    db = open_store(args.db)
    fps = db.execute("SELECT f.id, f.key, f.gpu, f.cc, f.sm_count, f.protocol, f.driver, "
                     "f.compiler, f.ptx_version, f.generator, count(r.id) FROM fingerprints f "
                     "LEFT JOIN runs r ON r.fingerprint_id = f.id GROUP BY f.id "
                     "ORDER BY f.key").fetchall()
    if not fps:
        die("%s: no fingerprints (nothing tuned)" % args.db, 1)
    # families: fingerprints that differ only in versions
    fam = {}
    for f in fps:
        fam.setdefault((f[2], f[3], f[4], f[5]), []).append(f)
    if args.gpu:
        pick = [k for k, v in fam.items()
                if any(f[1].startswith(args.gpu) for f in v) or k[0] == args.gpu
                or short_match(k[0], args.gpu)]
        if not pick:
            die("no fingerprint '%s' in %s (known: %s)" % (
                args.gpu, args.db, ", ".join("%s (%s)" % (f[1], f[2]) for f in fps[:8])))
        if len(pick) > 1:
            die("--gpu '%s' names %d GPUs or protocols: %s" % (
                args.gpu, len(pick), "; ".join("%s %s" % (k[0], k[3]) for k in pick)))
        family = pick[0]
    else:
        family = max(fam, key=lambda k: (sum(f[10] for f in fam[k]), k))
    members = {f[0]: f for f in fam[family]}
    gpu, cc, sms, protocol = family
    q = ("SELECT p.key, p.name, r.id, r.started, r.fingerprint_id, m.t_median, m.spread, "
         "m.tflops, m.source FROM measurements m JOIN runs r ON r.id = m.run_id "
         "JOIN problems p ON p.id = m.problem_id "
         "WHERE r.fingerprint_id IN (%s) AND m.status = 'ok' AND m.final = 1 "
         "ORDER BY p.key, r.started, m.t_median" % ",".join("?" * len(members)))
    best = {}
    for pkey, name, run, started, fpid, t, spread, tfl, src in db.execute(q, list(members)):
        k = (pkey, run)
        if k not in best:  # rows come fastest first within a run
            best[k] = (pkey, name, run, started, fpid, t, spread or 0.0, tfl, src)
    rows = sorted(best.values(), key=lambda r: (r[0], r[3]))
    if args.match:
        rx = re.compile(args.match)
        rows = [r for r in rows if rx.search(r[0]) or rx.search(r[1])]
    if not rows:
        die("no tuned rows for %s (%s)" % (gpu, protocol), 1)
    plt, mdates = need_matplotlib()
    fig, ax = plt.subplots(figsize=(13, 6.5))
    series = {}
    for r in rows:
        series.setdefault((r[0], r[1]), []).append(r)
    regressions = 0
    tflops = args.metric == "tflops"
    for (pkey, name), pts in sorted(series.items()):
        xs = [datetime.datetime.fromtimestamp(p[3]) for p in pts]
        ys = [(p[7] if tflops else p[5] * 1e6) for p in pts]
        label = name or pkey[:48]
        line, = ax.plot(xs, ys, "-", linewidth=1.2, label=label)
        c = line.get_color()
        for i, (x, y, p) in enumerate(zip(xs, ys, pts)):
            src = p[8]
            if src == "mock":
                ax.plot([x], [y], "x", color=c, markersize=7)
            else:
                ax.plot([x], [y], "o", color=c, markersize=6,
                        markerfacecolor=c if src == "measured" else "none")
            if i and src != "model" and pts[i - 1][8] == src:
                prev = pts[i - 1]
                change = p[5] / prev[5] - 1
                noise = 2 * math.sqrt(prev[6] ** 2 + p[6] ** 2)
                if change > max(args.threshold / 100.0, noise):
                    regressions += 1
                    ax.plot([x], [y], "v" if tflops else "^", color="red", markersize=11,
                            markerfacecolor="none", markeredgewidth=1.8)
                    ax.annotate("+%.1f%%" % (change * 100), (x, y), textcoords="offset points",
                                xytext=(6, 6), color="red", fontsize=8)
    # version changes between consecutive runs of the family
    runs = db.execute("SELECT r.id, r.started, r.fingerprint_id FROM runs r WHERE "
                      "r.fingerprint_id IN (%s) ORDER BY r.started" % ",".join("?" * len(members)),
                      list(members)).fetchall()
    for a, b in zip(runs, runs[1:]):
        if a[2] == b[2]:
            continue
        fa, fb = members[a[2]], members[b[2]]
        diffs = ["%s %s->%s" % (n, fa[6 + i], fb[6 + i]) for i, n in enumerate(VERSION_FIELDS)
                 if fa[6 + i] != fb[6 + i]]
        x = datetime.datetime.fromtimestamp(b[1])
        ax.axvline(x, color="gray", linestyle=":", linewidth=1)
        ax.annotate(", ".join(diffs), (x, 0.02), xycoords=("data", "axes fraction"),
                    rotation=90, va="bottom", ha="right", fontsize=7, color="dimgray")
    ax.set_yscale("log")
    from matplotlib.ticker import ScalarFormatter, LogLocator
    for axis_fmt in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        f = ScalarFormatter()
        f.set_scientific(False)
        axis_fmt(f)
    ax.yaxis.set_minor_locator(LogLocator(subs="all"))
    ax.set_ylabel("best achieved TFLOP/s per run" if tflops else "best kernel time per run (us)")
    ax.set_xlabel("run start (local time)")
    # dates at the resolution the runs need (days apart: dates; minutes
    # apart, as in a CI job: times), never a row of identical labels
    loc = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    label = args.set or os.path.splitext(os.path.basename(args.db))[0]
    ax.set_title("%s (sm_%d, %d SMs, %s): problem set '%s', %d problems, %d runs" % (
        gpu, cc, sms, protocol, label, len(series), len({r[2] for r in rows})), fontsize=10)
    from matplotlib.lines import Line2D
    handles, labels = ax.get_legend_handles_labels()
    keys = [Line2D([], [], marker="o", linestyle="", color="black", label="measured"),
            Line2D([], [], marker="o", linestyle="", color="black", markerfacecolor="none",
                   label="cost model (emulator)"),
            Line2D([], [], marker="x", linestyle="", color="black", label="mock device"),
            Line2D([], [], marker="^", linestyle="", color="red", markerfacecolor="none",
                   label="slower than the run before (> %g%% and noise)" % args.threshold)]
    ax.legend(handles + keys, labels + [k.get_label() for k in keys], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(True, which="both", alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("%s: %d problems, %d runs, %d regressions marked" % (
        args.out, len(series), len({r[2] for r in rows}), regressions))


def regress_plot(plt, rows, title, out):
    colours = {"SLOWER": "tab:red", "faster": "tab:green", "same": "tab:gray"}
    fig, ax = plt.subplots(figsize=(10, max(3.5, 0.28 * len(rows) + 2)))
    ys = range(len(rows))
    ch = [float(r["change"]) * 100 for r in rows]
    nz = [float(r["noise"]) * 100 for r in rows]
    ax.barh(ys, ch, color=[colours.get(r["verdict"], "tab:blue") for r in rows])
    ax.errorbar([0] * len(rows), ys, xerr=nz, fmt="none", ecolor="black", alpha=0.5,
                capsize=3)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([((r["name"] or r["problem"])[:32] + "  " + r["config"][:64])
                        for r in rows], fontsize=6)
    ax.axvline(0, color="black", linewidth=0.5)
    ax.set_xlabel("change of the median time, candidate vs baseline (%)")
    ax.set_title(title, fontsize=10)
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    ax.legend(handles=[Patch(color=colours["SLOWER"], label="SLOWER"),
                       Patch(color=colours["faster"], label="faster"),
                       Patch(color=colours["same"], label="same within noise"),
                       Line2D([], [], color="black", alpha=0.5,
                              label="noise: 2 sqrt(s_b^2 + s_c^2)")], fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=4)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120, bbox_inches="tight")  # the legend sits below the x label
    plt.close(fig)


def regress(args):
    try:
        with open(args.regress, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("change") not in (None, "", "nan")]
    except OSError as e:
        die("cannot read %s (%s)" % (args.regress, e))
    if rows and "verdict" not in rows[0]:
        die("%s: not a 'ptxtune regress --csv' table" % args.regress)
    if not rows:
        die("%s: no kernel measured in both runs" % args.regress, 1)
    plt, _ = need_matplotlib()
    slower = sum(r["verdict"] == "SLOWER" for r in rows)
    regress_plot(plt, rows, "%s: %d kernels, %d slower" % (
        os.path.basename(args.regress), len(rows), slower), args.out)
    print("%s: %d kernels, %d slower" % (args.out, len(rows), slower))
    if args.per_problem:
        os.makedirs(args.per_problem, exist_ok=True)
        by = {}
        for r in rows:
            by.setdefault(r["problem"], []).append(r)
        for i, (pkey, rs) in enumerate(sorted(by.items())):
            name = rs[0]["name"] or "problem-%d" % i
            out = os.path.join(args.per_problem, re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".png")
            regress_plot(plt, rs, "%s: %d kernels, %d slower\n%s" % (
                name, len(rs), sum(r["verdict"] == "SLOWER" for r in rs), pkey[:110]), out)
        print("%s: %d problem plots" % (args.per_problem, len(by)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db")
    ap.add_argument("--gpu")
    ap.add_argument("--match")
    ap.add_argument("--set")
    ap.add_argument("--metric", choices=("us", "tflops"), default="us")
    ap.add_argument("--threshold", type=float, default=3.0, help="percent")
    ap.add_argument("--regress")
    ap.add_argument("--per-problem")
    ap.add_argument("--out")
    args = ap.parse_args()
    if bool(args.db) == bool(args.regress):
        die("give --db FILE (history) or --regress FILE.csv (see --help)")
    if not args.out:
        args.out = "regress.png" if args.regress else "history.png"
    (regress if args.regress else history)(args)


if __name__ == "__main__":
    main()
