#!/usr/bin/env python3
"""Helpers of scripts/gpu/check.sh. Standard library only, except the
`torchbench` command, which imports torch (the GPU machine has it).

  tools.py csv JSONL CASE OUT.csv       ptxtune run --json lines -> CSV rows (appends)
  tools.py npydiff A.npy B.npy DTYPE    two outputs of one kernel: max error (our metric), identical bits
  tools.py diffrow DIFF.csv CASE OUTPUT RESULT OTHER   appends npydiff's RESULT as a diff.csv row
  tools.py torchbench CASES.tsv OUT.csv BUDGET_S   torch eager / torch.compile with our protocol
                                        (attention rows: scaled_dot_product_attention, flash / cuDNN)
  tools.py summary OUTDIR               summary.md from the CSV tables

The error metric is ptxtune's (tuner/verify.h): |a - b| / max(|b|, 1e-2 * max|b|),
fp8 in units of the format's spacing. The torch side times with the rules
of ptxtune-bench/1 (L2 rewritten before every sample, events, median with
a 95% order-statistics interval, stop at 0.5% spread / 1000 samples / 0.5 s)
except that it launches eagerly: no CUDA graphs (every kernel in the
suite runs far longer than the 50 us where our protocol batches)."""
import csv
import json
import math
import os
import struct
import sys
import time

PROTOCOL = "ptxtune-bench/1"

CSV_FIELDS = ["case", "config", "class", "phase", "max_err", "tol", "checked", "sampled",
              "median_us", "min_us", "max_us", "cv", "reps", "converged", "graph", "batch",
              "nsets", "gbs", "tflops", "roofline", "sm_mhz_before", "sm_mhz_after",
              "registers", "protocol", "msg"]


def cmd_csv(jsonl, case, out):
    rows = []
    with open(jsonl) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("summary"):
                continue
            v, b = r.get("verify", {}), r.get("bench", {})
            rows.append({
                "case": case, "config": r.get("config", ""), "class": r.get("class", ""),
                "phase": r.get("phase", ""), "max_err": v.get("max_err", ""),
                "tol": v.get("tol", ""), "checked": v.get("checked", ""),
                "sampled": v.get("sampled", ""), "median_us": b.get("median_us", ""),
                "min_us": b.get("min_us", ""), "max_us": b.get("max_us", ""),
                "cv": b.get("cv", ""), "reps": b.get("reps", ""),
                "converged": b.get("converged", ""), "graph": b.get("graph", ""),
                "batch": b.get("batch", ""), "nsets": b.get("nsets", ""),
                "gbs": b.get("gbs", ""), "tflops": b.get("tflops", ""),
                "roofline": b.get("roofline", ""), "sm_mhz_before": b.get("sm_mhz_before", ""),
                "sm_mhz_after": b.get("sm_mhz_after", ""), "registers": r.get("registers", ""),
                "protocol": b.get("protocol", ""), "msg": r.get("msg", "")})
    new = not os.path.exists(out)
    with open(out, "a", newline="") as f:
        w = csv.DictWriter(f, CSV_FIELDS)
        if new:
            w.writeheader()
        w.writerows(rows)
    bad = [r for r in rows if r["class"] != "ok"]
    print(f"{case}: {len(rows)} candidates, {len(rows) - len(bad)} ok"
          + (f", first failure: {bad[0]['config']} {bad[0]['class']}: {bad[0]['msg']}" if bad else ""))
    return 0 if rows and not bad else 1


# ---- .npy (the subset ptxtune writes) ----

def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    if data[6] == 1:
        hlen, off = struct.unpack("<H", data[8:10])[0], 10
    else:
        hlen, off = struct.unpack("<I", data[8:12])[0], 12
    header = data[off:off + hlen].decode("latin1")
    d = eval(header, {"__builtins__": {}}, {"True": True, "False": False})  # a dict literal
    return d["descr"], d["shape"], data[off + hlen:]


def fp8_decode(b, e4m3):
    s = -1.0 if b & 0x80 else 1.0
    if e4m3:
        e, m = (b >> 3) & 0xF, b & 0x7
        if e == 0xF and m == 0x7:
            return math.nan
        return s * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    e, m = (b >> 2) & 0x1F, b & 0x3
    if e == 0x1F:
        return math.nan if m else s * math.inf
    return s * (m / 4 * 2.0 ** -14 if e == 0 else (1 + m / 4) * 2.0 ** (e - 15))


def decode(descr, raw, dtype):
    if dtype == "bf16":
        n = len(raw) // 2
        return [struct.unpack("<f", struct.pack("<I", v << 16))[0]
                for v in struct.unpack(f"<{n}H", raw)]
    if dtype in ("e4m3", "e5m2"):
        return [fp8_decode(v, dtype == "e4m3") for v in raw]
    code = {"<f4": "f", "<f2": "e", "<f8": "d"}[descr]
    n = len(raw) // struct.calcsize(code)
    return list(struct.unpack(f"<{n}{code}", raw))


def fp8_ulp(dtype, w):
    mant, emin = (3, -6) if dtype == "e4m3" else (2, -14)
    ex = math.floor(math.log2(abs(w))) if w else emin
    return 2.0 ** (max(ex, emin) - mant)


def cmd_npydiff(a, b, dtype):
    da, sa, ra = read_npy(a)
    db, sb, rb = read_npy(b)
    if (da, tuple(sa)) != (db, tuple(sb)):
        print(f"shape/dtype differ: {da}{sa} vs {db}{sb}")
        return 1
    x, y = decode(da, ra, dtype), decode(db, rb, dtype)
    scale = max((abs(v) for v in y if not math.isnan(v) and not math.isinf(v)), default=0.0)
    floor_ = 1e-2 * scale if scale > 0 else 1e-30
    worst, where, same = 0.0, -1, 0
    for i, (g, w) in enumerate(zip(x, y)):
        if g == w or (math.isnan(g) and math.isnan(w)):
            same += 1
            continue
        if math.isnan(g) or math.isnan(w):
            err = math.inf
        elif dtype in ("e4m3", "e5m2"):
            err = abs(g - w) / fp8_ulp(dtype, w)
        else:
            err = abs(g - w) / max(abs(w), floor_)
        if err > worst:
            worst, where = err, i
    print(json.dumps({"elements": len(x), "identical": same, "max_err": worst, "at": where}))
    return 0


# ---- torch side ----

def torch_cases(path):
    """Rows of a TSV: name, expr, shapes, dtype (the bench table of check.sh)."""
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                yield line.rstrip("\n").split("\t")


def shapes_of(spec):
    out = {}
    for item in spec.split(","):
        k, v = item.split("=")
        out[k.strip()] = tuple(int(d) for d in v.split("x"))
    return out


def torch_fn(name, torch, F):
    """The torch program for each bench case (same math as the expression)."""
    if name.startswith("copy"):
        return lambda t: t["x"].clone()
    if name.startswith("gelu_bias"):
        return lambda t: F.gelu(t["x"] * t["w"] + t["b"], approximate="tanh")
    if name.startswith("softmax"):
        return lambda t: torch.softmax(t["x"], -1)
    if name.startswith("layernorm"):
        return lambda t: F.layer_norm(t["x"], (t["x"].shape[-1],), t["g"], t["b"], 1e-5)
    if name.startswith("add_rmsnorm"):
        def f(t):
            h = t["x"] + t["r"]
            if hasattr(F, "rms_norm"):
                return h, F.rms_norm(h, (h.shape[-1],), t["g"], 1e-6)
            hf = h.float()
            return h, (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(h.dtype) * t["g"]
        return f
    if name.startswith("swiglu"):
        return lambda t: F.silu(t["x"]) * t["u"]
    if name.startswith("gemm"):
        return lambda t: torch.matmul(t["a"], t["b"])
    return None


def attn_spec(items):
    """'batch=1 heads_q=32 ... causal=1 dtype=bf16' -> {key: value} (ints where they are)."""
    out = {}
    for item in items.split():
        k, _, v = item.partition("=")
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


def attn_flops(spec):
    """(exact visible-pair flops, flash-attention convention) of an attention problem
    (ptxtune's pt_op.flops without windows or varlen: causal bottom-right aligned)."""
    b, hq, sq, sk = spec["batch"], spec["heads_q"], spec["seqlen_q"], spec["seqlen_k"]
    d = spec["head_dim"]
    dv = spec.get("head_dim_v", d)
    if spec.get("causal", 0):
        off = sk - sq
        pairs = sum(max(0, min(sk, i + off + 1)) for i in range(sq))
    else:
        pairs = sq * sk
    exact = 2.0 * (d + dv) * pairs * b * hq
    fa = 2.0 * (d + dv) * b * hq * sq * sk / (2 if spec.get("causal", 0) else 1)
    return exact, fa


def attn_torch(torch, F, spec, dtype):
    """Tensors and the SDPA implementations for one attention case. torch has
    no paged KV: the KV cache is contiguous [B, Hkv, Sk, d] (the same bytes).
    GQA through enable_gqa where this torch has it, else K/V expanded to the
    query heads once, outside the timing (the row's impl says so)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = torch.Generator(device="cuda").manual_seed(1)

    def rnd(*shape):
        return (torch.rand(shape, generator=g, device="cuda") * 4 - 2).to(dtype)
    b, hq, hkv = spec["batch"], spec["heads_q"], spec["heads_kv"]
    sq, sk, d = spec["seqlen_q"], spec["seqlen_k"], spec["head_dim"]
    t = {"q": rnd(b, hq, sq, d), "k": rnd(b, hkv, sk, d), "v": rnd(b, hkv, sk, spec.get("head_dim_v", d))}
    causal = bool(spec.get("causal", 0)) and sq > 1  # Sq = Sk here: both alignments agree
    impls = []
    for name, be in (("torch_sdpa_flash", SDPBackend.FLASH_ATTENTION),
                     ("torch_sdpa_cudnn", getattr(SDPBackend, "CUDNN_ATTENTION", None))):
        if be is None:
            continue

        def gqa(tt, be=be):
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(tt["q"], tt["k"], tt["v"], is_causal=causal,
                                                      enable_gqa=hq != hkv)

        def expanded(tt, be=be):
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(tt["q"], tt["ke"], tt["ve"], is_causal=causal)
        try:
            gqa(t)
            impls.append((name, gqa))
        except Exception:  # no enable_gqa, or this backend refuses it
            if "ke" not in t:
                t["ke"] = t["k"].repeat_interleave(hq // hkv, 1)
                t["ve"] = t["v"].repeat_interleave(hq // hkv, 1)
            impls.append((name + "_kv_expanded", expanded))
    return t, impls


def bench_torch(torch, fn, tensors, l2_bytes, budget_s=0.5):
    flush = torch.empty(max(2 * l2_bytes, 4 << 20), dtype=torch.int8, device="cuda")
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.time()
    for i in range(100):  # warm-up: 20 ms or 100 launches, at least 3
        fn(tensors)
        if i >= 2 and time.time() - t0 > 0.02:
            break
    torch.cuda.synchronize()
    xs, t0 = [], time.time()
    while len(xs) < 1000:
        flush.add_(1)
        s.record()
        fn(tensors)
        e.record()
        e.synchronize()
        xs.append(s.elapsed_time(e) * 1e3)  # us
        n = len(xs)
        if n >= 10:
            ys = sorted(xs)
            med = (ys[n // 2] + ys[(n - 1) // 2]) / 2
            h = 0.98 * math.sqrt(n)
            lo, hi = max(int(math.floor(n / 2 - h)) - 1, 0), min(int(math.ceil(1 + n / 2 + h)) - 1, n - 1)
            if (ys[hi] - ys[lo]) / (2 * med) < 0.005 or time.time() - t0 > budget_s:
                break
    ys = sorted(xs)
    n = len(ys)
    return {"median_us": (ys[n // 2] + ys[(n - 1) // 2]) / 2, "min_us": ys[0], "max_us": ys[-1],
            "reps": n}


def bench_impls(torch, name, impls, tensors, l2, rows):
    """Times each (impl, fn) of a case; a failure (torch.compile, an SDPA
    backend this torch lacks) is a row with its error, not a crash."""
    for impl, f in impls:
        try:
            t0 = time.time()
            r = bench_torch(torch, f, tensors, l2)
            r.update(case=name, impl=impl, warm_s=round(time.time() - t0, 2),
                     protocol=PROTOCOL + " (torch: events, no graphs)")
        except Exception as ex:
            r = {"case": name, "impl": impl, "error": str(ex).splitlines()[0][:200]}
        rows.append(r)
        print(json.dumps(r), flush=True)


def cmd_diffrow(path, case, out, result, other):
    """Appends one differential row (npydiff's JSON result) to diff.csv."""
    d = json.loads(result)
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["case", "output", "backends", "elements", "identical", "max_err"])
        w.writerow([case, out, f"{other}-vs-emu", d["elements"], d["identical"], d["max_err"]])


def cmd_torchbench(cases_path, out, budget_s):
    import torch
    import torch.nn.functional as F
    t_start = time.time()
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    rows = []
    for name, expr, shapes, dtype in torch_cases(cases_path):
        if expr == "attention":
            try:
                tensors, impls = attn_torch(torch, F, attn_spec(shapes), dt[dtype])
            except Exception as ex:
                r = {"case": name, "impl": "torch_sdpa", "error": str(ex).splitlines()[0][:200]}
                rows.append(r)
                print(json.dumps(r), flush=True)
                continue
            with torch.no_grad():
                bench_impls(torch, name, impls, tensors, l2, rows)
            del tensors
            torch.cuda.empty_cache()
            continue
        fn = torch_fn(name, torch, F)
        if fn is None:
            continue
        g = torch.Generator(device="cuda").manual_seed(1)
        tensors = {k: (torch.rand(v, generator=g, device="cuda") * 4 - 2).to(dt[dtype])
                   for k, v in shapes_of(shapes).items()}
        with torch.no_grad():
            impls = [("torch_eager", fn)]
            if name.startswith("gemm"):
                impls = [("torch_matmul", fn)]
            elif time.time() - t_start < budget_s:
                impls.append(("torch_compile", torch.compile(fn)))
            bench_impls(torch, name, impls, tensors, l2, rows)
        del tensors
        torch.cuda.empty_cache()
    fields = ["case", "impl", "median_us", "min_us", "max_us", "reps", "warm_s", "protocol", "error"]
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return 0


# ---- summary ----

def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def fnum(v, fmt="{:.1f}"):
    try:
        return fmt.format(float(v))
    except (TypeError, ValueError):
        return "-"


def attn_summary(outdir, ours, torch_rows):
    """The attention table: both flop conventions, GB/s, decode against the
    same run's copy bandwidth (copy_f32), torch SDPA (flash, cuDNN)."""
    cases = {}
    path = os.path.join(outdir, "raw", "bench_cases.tsv")
    if os.path.exists(path):
        for row in torch_cases(path):
            if len(row) == 4 and row[1] == "attention":
                cases[row[0]] = attn_spec(row[2])
    if not cases:
        return []
    best = {}
    for r in ours:
        if r["class"] == "ok" and r["median_us"] and r["case"] in cases:
            if r["case"] not in best or float(r["median_us"]) < float(best[r["case"]]["median_us"]):
                best[r["case"]] = r
    copy = [float(r["gbs"]) for r in ours if r["case"].startswith("copy") and r["class"] == "ok" and r["gbs"]]
    copy_gbs = max(copy) if copy else None
    lines = ["", "## Attention (TFLOP/s: exact visible pairs / flash-attention convention)", "",
             "| case | ours us | TFLOP/s exact | TFLOP/s FA | GB/s | % of copy | torch SDPA | us | TFLOP/s FA | x | config |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for case, spec in cases.items():
        exact, fa = attn_flops(spec)
        r = best.get(case)
        med = float(r["median_us"]) if r else None
        tr = [t for t in torch_rows if t["case"] == case]
        if not tr:
            tr = [{}]
        for i, t in enumerate(tr):
            tmed = float(t["median_us"]) if t.get("median_us") else None
            ours_cols = ([fnum(med), fnum(exact / med * 1e-6, "{:.1f}"), fnum(fa / med * 1e-6, "{:.1f}"),
                          fnum(r["gbs"]), fnum(float(r["gbs"]) / copy_gbs * 100 if copy_gbs and r["gbs"] else "",
                                               "{:.0f}%")]
                         if med and i == 0 else ["-"] * 5)
            lines.append("| " + " | ".join(
                [case] + ours_cols +
                [t.get("impl", "-") + (f" ({t['error']})" if t.get("error") else ""), fnum(tmed),
                 fnum(fa / tmed * 1e-6, "{:.1f}") if tmed else "-",
                 f"{tmed / med:.2f}" if tmed and med else "-",
                 r["config"] if r and i == 0 else ""]) + " |")
    lines += ["", "x = torch time / our time; torch reads a contiguous KV cache (no paged SDPA)."]
    return lines


def cmd_summary(outdir):
    lines = ["# ptxtune GPU check", ""]
    env = os.path.join(outdir, "env.txt")
    if os.path.exists(env):
        lines += ["```", open(env).read().strip(), "```", ""]
    check = read_csv(os.path.join(outdir, "check.csv"))
    if check:
        by = {}
        for r in check:
            by.setdefault(r["case"], []).append(r)
        lines += ["## Correctness: every variant of every test case, verified against the float64 reference", "",
                  "| case | variants | ok | failed | worst error (tol) |", "|---|---|---|---|---|"]
        for case, rs in by.items():
            ok = sum(r["class"] == "ok" for r in rs)
            errs = [float(r["max_err"]) for r in rs if r["max_err"] not in ("", "None")]
            tol = rs[0]["tol"]
            lines.append(f"| {case} | {len(rs)} | {ok} | {len(rs) - ok} | "
                         f"{max(errs) if errs else float('nan'):.3g} ({tol}) |")
        bad = [r for r in check if r["class"] != "ok"]
        for r in bad[:20]:
            lines.append(f"- FAILED {r['case']} [{r['config']}]: {r['class']} in {r['phase']}: {r['msg']}")
        lines.append("")
    diff = read_csv(os.path.join(outdir, "diff.csv"))
    if diff:
        lines += ["## Differential: the same PTX on the GPU and on the emulator", "",
                  "| case | output | elements | bit-identical | max error |", "|---|---|---|---|---|"]
        for r in diff:
            lines.append(f"| {r['case']} | {r['output']} | {r['elements']} | {r['identical']} | "
                         f"{fnum(r['max_err'], '{:.3g}')} |")
        lines.append("")
    ours = read_csv(os.path.join(outdir, "bench_ours.csv"))
    torch_rows = read_csv(os.path.join(outdir, "bench_torch.csv"))
    if ours:
        best = {}
        for r in ours:
            if r["class"] == "ok" and r["median_us"]:
                if r["case"] not in best or float(r["median_us"]) < float(best[r["case"]]["median_us"]):
                    best[r["case"]] = r
        tmap = {(r["case"], r["impl"]): r for r in torch_rows}
        lines += [f"## Benchmarks ({PROTOCOL}; ours: best sampled config, verified)", "",
                  "| case | ours us | GB/s | TFLOP/s | roofline | torch eager us | x | torch.compile us | x | config |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        table = []
        for case, r in best.items():
            med = float(r["median_us"])
            te = tmap.get((case, "torch_eager")) or tmap.get((case, "torch_matmul"))
            tc = tmap.get((case, "torch_compile"))

            def ratio(t):
                return f"{float(t['median_us']) / med:.2f}" if t and t.get("median_us") else "-"
            table.append([case, f"{med:.1f}", fnum(r["gbs"]), fnum(r["tflops"], "{:.2f}"),
                          fnum(float(r["roofline"]) * 100 if r["roofline"] else "", "{:.0f}%"),
                          fnum(te["median_us"]) if te and te.get("median_us") else "-", ratio(te),
                          fnum(tc["median_us"]) if tc and tc.get("median_us") else "-", ratio(tc),
                          r["config"]])
        for row in table:
            lines.append("| " + " | ".join(row) + " |")
        lines += ["", "x = torch time / our time (above 1: we are faster)."]
        with open(os.path.join(outdir, "bench_summary.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "ours_us", "gbs", "tflops", "roofline", "torch_eager_us", "x_eager",
                        "torch_compile_us", "x_compile", "config"])
            w.writerows(table)
    lines += attn_summary(outdir, ours, torch_rows)
    notes = os.path.join(outdir, "notes.txt")
    if os.path.exists(notes):
        lines += ["", "## Notes", "", open(notes).read().strip()]
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "csv":
        return cmd_csv(*args)
    if cmd == "npydiff":
        return cmd_npydiff(*args)
    if cmd == "diffrow":
        return cmd_diffrow(*args)
    if cmd == "torchbench":
        return cmd_torchbench(args[0], args[1], float(args[2]))
    if cmd == "summary":
        return cmd_summary(*args)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
