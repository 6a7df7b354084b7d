#!/usr/bin/env python3
"""Plots of a ptxtune store, as PNG.

  plot_history.py --db FILE [--gpu FP] [--match REGEX] [--out history.png]
      A GPU's history: for every problem, the best time of each run (final,
      ok rows) against the run's start, one line per problem, log scale.
      Measured rows are solid, cost-model estimates (emulator runs) hollow.
      --gpu: a fingerprint key prefix or an exact GPU name (default: the
      fingerprint with the most runs).

  plot_history.py --regress FILE.csv [--out regress.png]
      A regress table ('ptxtune regress ... --csv > FILE.csv') as bars: the
      change of each kernel, coloured by verdict, with its noise band.

Reads the store with Python's sqlite3 (read-only); needs matplotlib, and
says so plainly (exit 3) when it is missing.
"""
import argparse
import csv
import datetime
import re
import sqlite3
import sys

APPLICATION_ID = 0x50545854


def die(msg, code=2):
    print("plot_history.py: " + msg, file=sys.stderr)
    sys.exit(code)


def need_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        die("matplotlib is not installed (apt-get install python3-matplotlib, or "
            "pip install matplotlib); nothing drawn", 3)


def open_store(path):
    try:
        db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        app = db.execute("PRAGMA application_id").fetchone()[0]
    except sqlite3.DatabaseError as e:
        die("%s: not a ptxtune database (%s)" % (path, e))
    if app & 0xffffffff != APPLICATION_ID:
        die("%s: not a ptxtune database (application_id 0x%08x)" % (path, app & 0xffffffff))
    return db


def history(args):
    db = open_store(args.db)
    fps = db.execute("SELECT f.id, f.key, f.gpu, count(r.id) FROM fingerprints f "
                     "LEFT JOIN runs r ON r.fingerprint_id = f.id GROUP BY f.id "
                     "ORDER BY count(r.id) DESC, f.key").fetchall()
    if args.gpu:
        fps = [f for f in fps if f[1].startswith(args.gpu) or f[2] == args.gpu]
    if not fps:
        die("no fingerprint matches '%s' in %s" % (args.gpu or "", args.db))
    fp_id, key, gpu, _ = fps[0]
    rows = db.execute(
        "SELECT p.key, p.name, r.id, r.started, min(m.t_median), m.source "
        "FROM measurements m JOIN runs r ON r.id = m.run_id JOIN problems p ON p.id = m.problem_id "
        "WHERE r.fingerprint_id = ? AND m.status = 'ok' AND m.final = 1 "
        "GROUP BY p.id, r.id ORDER BY p.key, r.started", (fp_id,)).fetchall()
    if args.match:
        rx = re.compile(args.match)
        rows = [r for r in rows if rx.search(r[0]) or rx.search(r[1])]
    if not rows:
        die("no tuned rows for fingerprint %s (%s)" % (key, gpu), 1)
    plt = need_matplotlib()
    fig, ax = plt.subplots(figsize=(10, 6))
    series = {}
    for pkey, name, run, started, t, source in rows:
        series.setdefault((pkey, name), []).append((started, t * 1e6, source))
    for (pkey, name), pts in sorted(series.items()):
        xs = [datetime.datetime.fromtimestamp(p[0]) for p in pts]
        ys = [p[1] for p in pts]
        label = name or pkey[:48]
        line, = ax.plot(xs, ys, "-", label=label)
        for x, y, (_, _, src) in zip(xs, ys, pts):
            ax.plot([x], [y], "o", color=line.get_color(),
                    markerfacecolor=line.get_color() if src == "measured" else "none")
    ax.set_yscale("log")
    ax.set_ylabel("best time per run (us)")
    ax.set_title("%s  [%s]" % (gpu, key))
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("%s: %d problems, %d runs" % (args.out, len(series), len({r[2] for r in rows})))


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
    plt = need_matplotlib()
    colours = {"SLOWER": "tab:red", "faster": "tab:green", "same": "tab:gray"}
    fig, ax = plt.subplots(figsize=(10, max(3, 0.25 * len(rows) + 1)))
    ys = range(len(rows))
    ch = [float(r["change"]) * 100 for r in rows]
    nz = [float(r["noise"]) * 100 for r in rows]
    ax.barh(ys, ch, color=[colours.get(r["verdict"], "tab:blue") for r in rows])
    ax.errorbar([0] * len(rows), ys, xerr=nz, fmt="none", ecolor="black", alpha=0.4)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([(r["name"] or r["problem"])[:40] + " " + r["kernel"][:8] for r in rows],
                       fontsize=6)
    ax.axvline(0, color="black", linewidth=0.5)
    ax.set_xlabel("change (%), bars around 0: noise from the stored spreads")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    slower = sum(r["verdict"] == "SLOWER" for r in rows)
    print("%s: %d kernels, %d slower" % (args.out, len(rows), slower))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db")
    ap.add_argument("--gpu")
    ap.add_argument("--match")
    ap.add_argument("--regress")
    ap.add_argument("--out")
    args = ap.parse_args()
    if bool(args.db) == bool(args.regress):
        die("give --db FILE (history) or --regress FILE.csv (see --help)")
    if not args.out:
        args.out = "regress.png" if args.regress else "history.png"
    (regress if args.regress else history)(args)


if __name__ == "__main__":
    main()
