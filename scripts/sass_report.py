#!/usr/bin/env python3
"""SASS report for ptxtune's kernels (issue 10 item 3), with Triton's beside.

Emits each kernel with `ptxtune emit`, assembles it with ptxas for each arch,
disassembles the cubin (nvdisasm, else cuobjdump -sass) and counts, per kernel:
registers, instructions (total, per element for row and elementwise kernels,
per k-tile in a GEMM's main loop), MUFU / FCHK / CALL, integer address ops per
global and per shared access, and the distance from the k-tile barrier to the
first HMMA. Standard library only (python3 of Debian 12).

Definitions (the figures in results/cpu/sass.md use these):
- instructions: every SASS instruction of the kernel's text section except NOP
  (the padding), the trailing self-branch and the subroutines reached only by
  CALL (the IEEE division's slow path; CALL counts its call sites); static
  counts (a row kernel with a loop, "loops" > 0, runs its body more often), so a row kernel's
  "per element" is the static count over the elements one thread handles
  (cols / (wpr * 32), or vec * unroll for a flat kernel).
- address ops: the integer instructions (IMAD*, IADD3, LEA, SHF, LOP3, MOV,
  SEL, IMNMX, PRMT and their uniform U* forms, R2UR) in the backward slice of
  the address operands ([...]) of the memory instructions, following register
  defs (the last def before the use, plus the loop's own later def for a use
  inside a loop) through integer ops only; constant, special-register and
  memory loads end the slice. Global = LDG STG LDGSTS LD ST RED ATOM(G);
  shared = LDS STS LDSM ATOMS. "per access" = |union of the slices| / accesses.
- main loop (GEMM): the backward branch whose body holds the most MMA
  instructions (innermost on a tie); k-tiles per iteration = the MMA work in
  the body (per warp) / the per-warp work of one k-tile (bm*bn*bk / warps);
  per-k-tile figures divide the body's counts by it.
- barrier -> MMA distance: for each barrier in the body (BAR.SYNC, or an
  mbarrier wait SYNCS.PHASECHK for wgmma pipelines), the number of
  instructions from it to the next MMA in loop order (the next instruction
  counts 1, the back-edge wraps); the figure is the largest over the body's
  barriers.

Usage:
  scripts/sass_report.py [--ptxtune BIN|git:REV] [--before BIN|git:REV]
      [--arch sm_80,sm_90] [--kernels K,...] [--triton-python PY]
      [--format md|tsv|json] [--keep DIR]
  scripts/sass_report.py --ptx FILE --kind row|flat|gemm|wgmma
      --geom N|bm,bn,bk,warps|bm,bn,bk,consumer_warps,ksteps
  git:REV builds that revision in a temporary worktree (meson + ninja).
  tsv: one line "kernel<TAB>arch<TAB>metric<TAB>value" per figure (the test
  tests/test_sass.c reads it). Exit 0 ok, 1 a failed step, 2 bad usage,
  3 no disassembler found (the message says where it looked).
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (op, emit arguments, kind). kind: row, flat, gemm.
KERNELS = {
    "softmax_f32": ("elementwise", ["--expr", "y = softmax(x, -1)", "--shape", "x=4096x4096",
                                    "--dtype", "f32", "--config", "cache=1"], "row"),
    "softmax_f32_nocache": ("elementwise", ["--expr", "y = softmax(x, -1)", "--shape",
                                            "x=4096x4096", "--dtype", "f32", "--config",
                                            "cache=0"], "row"),
    "softmax_bf16": ("elementwise", ["--expr", "y = softmax(x, -1)", "--shape", "x=4096x4096",
                                     "--dtype", "bf16", "--config", "cache=1"], "row"),
    "softmax_bf16_nocache": ("elementwise", ["--expr", "y = softmax(x, -1)", "--shape",
                                             "x=4096x4096", "--dtype", "bf16", "--config",
                                             "cache=0"], "row"),
    "rmsnorm_bf16": ("elementwise", ["--expr", "y = rmsnorm(x, -1) * g", "--shape",
                                     "x=4096x4096,g=4096", "--dtype", "bf16"], "row"),
    "layernorm_bf16": ("elementwise", ["--expr", "y = layernorm(x, -1) * g + b", "--shape",
                                       "x=4096x4096,g=4096,b=4096", "--dtype", "bf16"], "row"),
    "gelu_bf16": ("elementwise", ["--expr", "y = gelu(x * w + b)", "--shape",
                                  "x=4096x8192,w=8192,b=8192", "--dtype", "bf16"], "flat"),
    "gemm_bf16_tn": ("gemm", ["--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16",
                              "--layout", "tn"], "gemm"),
    "gemm_f16_tn": ("gemm", ["--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "f16",
                             "--layout", "tn"], "gemm"),
    "gemm_tf32_tn": ("gemm", ["--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "tf32",
                              "--layout", "tn"], "gemm"),
    # the sm_90a wgmma loop (issue 13): assembled for sm_90a only
    "wgmma_bf16_nt": ("gemm", ["--m", "8192", "--n", "8192", "--k", "8192", "--dtype", "bf16",
                               "--layout", "nt"], "wgmma"),
    "wgmma_bf16_nt_tma": ("gemm", ["--m", "8192", "--n", "8192", "--k", "8192", "--dtype", "bf16",
                                   "--layout", "nt", "--config",
                                   "impl=1,bm=128,bn=256,stages=3,persistent=1,epi=1"], "wgmma"),
    "wgmma_bf16_tt": ("gemm", ["--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16",
                               "--layout", "tt"], "wgmma"),
    "wgmma_e4m3_nt": ("gemm", ["--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "e4m3",
                               "--layout", "nt", "--config",
                               "impl=1,bm=128,bn=128,stages=4,wg_wait=1"], "wgmma"),
}

# kinds assembled for fixed archs (whatever --arch says)
KIND_ARCHS = {"wgmma": ["sm_90a"]}


def archs_of(name, archs):
    return KIND_ARCHS.get(KERNELS[name][2], archs) if name in KERNELS else archs

ROW_METRICS = ["regs", "insts", "elems_per_thread", "insts_per_elem", "mufu", "mufu_per_elem",
               "fchk", "call", "loops", "gaccess", "gaddr_per_access", "saccess",
               "saddr_per_access", "imad", "iadd3", "lea"]
GEMM_METRICS = ["regs", "insts", "loop_insts_per_ktile", "mma_per_ktile", "ldgsts_per_ktile",
                "ldsm_per_ktile", "lea_per_ktile", "loop_addr_per_access", "bar_to_mma",
                "bars_per_ktile", "ktiles_per_iter"]
WGMMA_METRICS = ["regs", "insts", "loop_insts_per_ktile", "ktiles_per_iter", "mma_per_ktile",
                 "mma_expected_per_ktile", "depbar_per_ktile", "arrive_per_ktile", "bar_to_mma",
                 "setmaxnreg_dec", "setmaxnreg_inc", "utmaldg", "utmastg", "stsm"]


class Fail(Exception):
    """A step failed: message, exit status."""

    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code


# ---------------------------------------------------------------- tools

def find_disassembler():
    """(kind, path): nvdisasm preferred (labels), else cuobjdump. Looks at
    $NVDISASM, $CUOBJDUMP (a file, or a directory holding the binaries), PATH,
    then the venvs .venv-ci / .venv-sass in the repository root."""
    looked = []
    dirs = []
    for var in ("NVDISASM", "CUOBJDUMP"):
        v = os.environ.get(var)
        if v:
            looked.append("$" + var)
            if var == "NVDISASM" and os.path.isfile(v) and os.access(v, os.X_OK):
                return "nvdisasm", v
            # $CUOBJDUMP's directory: its nvdisasm (same wheel family) first
            dirs.append(v if os.path.isdir(v) else os.path.dirname(v))
            if os.path.isfile(v) and os.access(v, os.X_OK):
                nv = os.path.join(os.path.dirname(v), "nvdisasm")
                if os.path.isfile(nv) and os.access(nv, os.X_OK):
                    return "nvdisasm", nv
                return "cuobjdump", v
    looked.append("PATH")
    dirs.extend(os.environ.get("PATH", "").split(os.pathsep))
    for venv in (".venv-ci", ".venv-sass"):
        pat = os.path.join(ROOT, venv, "lib", "python3*", "site-packages", "nvidia", "*", "bin")
        looked.append(pat)
        dirs.extend(sorted(glob.glob(pat)))
    for kind in ("nvdisasm", "cuobjdump"):
        for d in dirs:
            p = os.path.join(d, kind)
            if d and os.path.isfile(p) and os.access(p, os.X_OK):
                return kind, p
    raise Fail("no nvdisasm or cuobjdump found (looked in: %s); install the PyPI wheels "
               "nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump" % ", ".join(looked), 3)


def find_ptxas():
    for p in (os.environ.get("PTXAS"),
              os.path.join(os.environ.get("CUDA_ROOT", "/usr/local/cuda"), "bin", "ptxas"),
              shutil.which("ptxas")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise Fail("no ptxas found ($PTXAS, $CUDA_ROOT/bin, /usr/local/cuda/bin, PATH)", 3)


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        raise Fail("%s: exit %d: %s" % (" ".join(cmd[:3]), r.returncode,
                                         (r.stderr or r.stdout).strip()[-400:]))
    return r


def tool_version(path):
    r = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    m = re.search(r"release [0-9.]+, V([0-9.]+)", r.stdout)
    return m.group(1) if m else "?"


# ---------------------------------------------------------------- SASS parsing

INS_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)\s*(.*?)\s*;")
LABEL_RE = re.compile(r"^(\.L\w+|\$[\w$]+):")
REG_RE = re.compile(r"(?<![A-Za-z0-9_])(U?R\d+|U?P\d)(\.64)?(?![0-9])")

INT_OPS = ("IMAD", "IADD3", "IADD", "LEA", "SHF", "SHL", "SHR", "LOP3", "LOP", "MOV", "SEL",
           "IMNMX", "PRMT", "IABS", "UIMAD", "UIADD3", "ULEA", "USHF", "ULOP3", "UMOV", "USEL",
           "UIMNMX", "UPRMT", "R2UR", "VIADD", "UMOV")
GLOBAL_OPS = ("LDG", "STG", "LDGSTS", "LD", "ST", "RED", "ATOM", "ATOMG")
SHARED_OPS = ("LDS", "STS", "LDSM", "ATOMS")
NO_DEST = ("STG", "STS", "ST", "STL", "RED", "BAR", "BRA", "EXIT", "LDGDEPBAR", "DEPBAR",
           "CALL", "RET", "BSSY", "BSYNC", "WARPSYNC", "NOP", "MEMBAR", "LDGSTS", "BPT",
           "YIELD", "ERRBAR", "CCTL", "FENCE", "ARRIVES", "SYNCS", "UTMALDG", "UTMASTG",
           "UBLKCP", "WARPGROUP", "JMP", "BREAK", "BMOV", "RPCMOV")
MMA_OPS = ("HMMA", "IMMA", "HGMMA", "IGMMA", "QGMMA", "DMMA")


def base(op):
    return op.split(".")[0]


def split_operands(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def regs_of(text, pair_all=False):
    """Registers named in an operand; Rn.64 (and, with pair_all, any Rn) adds Rn+1."""
    out = []
    for m in REG_RE.finditer(text):
        r = m.group(1)
        if r in ("RZ", "URZ", "PT", "UPT"):
            continue
        out.append(r)
        if m.group(2) or pair_all:
            pre = "UR" if r.startswith("UR") else "R"
            if r.startswith(pre) and r[len(pre):].isdigit():
                out.append(pre + str(int(r[len(pre):]) + 1))
    return out


class Ins:
    __slots__ = ("idx", "addr", "pred", "op", "ops", "dests", "srcs", "addr_srcs", "target")

    def __init__(self, idx, addr, pred, op, operands):
        self.idx, self.addr, self.pred, self.op, self.ops = idx, addr, pred, op, operands
        self.target = None
        b = base(op)
        opl = split_operands(operands)
        self.addr_srcs = []
        for o in opl:
            if o.startswith("[") or o.startswith("desc["):
                self.addr_srcs += regs_of(o[o.index("["):])
        nd = 0
        if b not in NO_DEST and opl:
            nd = 1
            # extra predicate destinations (carry-outs, ISETP pairs)
            while nd < len(opl) and re.fullmatch(r"!?U?P[T0-9]", opl[nd]) and \
                    b in ("IADD3", "LEA", "ISETP", "UIADD3", "ULEA", "UISETP", "IMAD", "FSETP",
                          "DSETP", "HSETP2", "PLOP3", "UPLOP3", "VIADD", "R2P", "SHFL"):
                nd += 1
        dests = []
        for o in opl[:nd]:
            wide = ".WIDE" in op or ".64" in o
            if b in ("LDG", "LDS", "LD", "LDSM", "LDL", "LDC", "ULDC", "S2R", "S2UR"):
                wide = False  # not address ops: width does not matter for slices
            dests += regs_of(o, pair_all=wide)
        self.dests = dests
        srcs = []
        for i, o in enumerate(opl[nd:]):
            if o.startswith("`"):
                continue
            # IMAD.WIDE's addend is a register pair
            wide = ".WIDE" in op and i == 2
            srcs += regs_of(o, pair_all=wide)
        if pred:
            srcs += regs_of(pred)
        self.srcs = srcs


def parse_sass(text):
    """Instructions of the first (only) kernel text section, labels resolved."""
    inss, labels = [], {}
    pending = []
    for line in text.splitlines():
        lm = LABEL_RE.match(line.strip())
        if lm:
            pending.append(lm.group(1))
            continue
        m = INS_RE.match(line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        ins = Ins(len(inss), addr, (m.group(2) or "").strip(), m.group(3), m.group(4))
        for lab in pending:
            labels[lab] = ins.idx
        pending = []
        inss.append(ins)
    byaddr = {i.addr: i.idx for i in inss}
    for i in inss:
        if base(i.op) in ("BRA", "JMP", "CALL", "BSSY", "BREAK", "JMX"):
            t = re.search(r"`\(([^)]+)\)", i.ops)
            if t and t.group(1) in labels:
                i.target = labels[t.group(1)]
            else:
                t = re.search(r"0x([0-9a-f]+)", i.ops)
                if t and int(t.group(1), 16) in byaddr:
                    i.target = byaddr[int(t.group(1), 16)]
    # drop the subroutines (reached only by CALL: the division slow path) and
    # the padding (NOPs, the final self-branch)
    calls = [i.target for i in inss if base(i.op) == "CALL" and i.target is not None]
    end = min(calls) if calls else len(inss)
    return [i for i in inss[:end] if base(i.op) != "NOP" and not
            (base(i.op) == "BRA" and i.target == i.idx)]


def reindex(inss):
    old = {i.idx: n for n, i in enumerate(inss)}
    for n, i in enumerate(inss):
        i.idx = n
    for i in inss:
        if i.target is not None:
            t = i.target
            while t not in old and t < max(old):
                t += 1
            i.target = old.get(t)
    return inss


def loops(inss):
    """Backward branches as (start, end) index ranges, end = the branch."""
    return [(i.target, i.idx) for i in inss
            if base(i.op) == "BRA" and i.target is not None and i.target <= i.idx]


def address_slice(inss, accesses, lps, lo=0, hi=None):
    """Integer ops (indices within [lo, hi]) in the backward slice of the
    address operands of the accesses."""
    hi = len(inss) - 1 if hi is None else hi
    defs = {}
    for i in inss:
        for r in i.dests:
            defs.setdefault(r, []).append(i.idx)

    def reaching(r, at):
        ds = defs.get(r, [])
        out = []
        before = [d for d in ds if d < at]
        for d in reversed(before):
            out.append(d)
            if not inss[d].pred:
                break
        for (s, e) in lps:
            if s <= at <= e:
                later = [d for d in ds if at <= d <= e]
                if later:
                    out.append(later[-1])
        return out

    seen, work = set(), []
    for a in accesses:
        for r in inss[a].addr_srcs:
            work.extend(reaching(r, a))
    while work:
        d = work.pop()
        if d in seen:
            continue
        ins = inss[d]
        if not ins.op.startswith(INT_OPS):
            continue
        seen.add(d)
        for r in ins.srcs:
            work.extend(reaching(r, d))
    return {d for d in seen if lo <= d <= hi}


# ---------------------------------------------------------------- analysis

MMA_SHAPE = re.compile(r"\.(\d+)(8)(\d+)\b")


def mma_macs_per_warp(op):
    b = base(op)
    if b in ("HMMA", "IMMA", "DMMA"):
        m = re.search(r"\.(16)(8)(\d+)", op)
        if m:
            return 16 * 8 * int(m.group(3))
    m = re.search(r"\.64x(\d+)x(\d+)", op)
    if m:  # warpgroup MMA: one instruction per warp, the work of four
        return 64 * int(m.group(1)) * int(m.group(2)) // 4
    return 0


def analyse(sass_text, kind, geom, regs=None):
    """Figures of one kernel. geom: elems_per_thread (row/flat) or
    (bm, bn, bk, warps) for a GEMM."""
    inss = reindex(parse_sass(sass_text))
    if regs is None:
        m = re.search(r"SHI_REGISTERS=(\d+)", sass_text)
        regs = int(m.group(1)) if m else None
    lps = loops(inss)
    f = {"regs": regs, "insts": len(inss)}
    ops = [base(i.op) for i in inss]
    if kind in ("row", "flat"):
        ept = geom
        f["elems_per_thread"] = ept
        f["insts_per_elem"] = round(len(inss) / ept, 2)
        f["mufu"] = ops.count("MUFU")
        f["mufu_per_elem"] = round(f["mufu"] / ept, 2)
        f["fchk"] = ops.count("FCHK")
        f["call"] = ops.count("CALL")
        f["loops"] = len(lps)
        g = [i.idx for i in inss if base(i.op) in GLOBAL_OPS]
        s = [i.idx for i in inss if base(i.op) in SHARED_OPS]
        f["gaccess"] = len(g)
        f["gaddr_per_access"] = round(len(address_slice(inss, g, lps)) / len(g), 2) if g else 0
        f["saccess"] = len(s)
        f["saddr_per_access"] = round(len(address_slice(inss, s, lps)) / len(s), 2) if s else 0
        f["imad"] = ops.count("IMAD")
        f["iadd3"] = ops.count("IADD3")
        f["lea"] = ops.count("LEA")
        return f
    if kind == "wgmma":
        return analyse_wgmma(inss, lps, f, geom)
    bm, bn, bk, warps = geom
    best = None
    for (s, e) in lps:
        n = sum(1 for i in inss[s:e + 1] if base(i.op) in MMA_OPS)
        if n and (best is None or n > best[0] or (n == best[0] and e - s < best[2] - best[1])):
            best = (n, s, e)
    if best is None:
        raise Fail("no loop with MMA instructions found")
    _, s, e = best
    body = inss[s:e + 1]
    macs = sum(mma_macs_per_warp(i.op) for i in body)
    kt = macs / (bm * bn * bk / warps)
    f["ktiles_per_iter"] = round(kt, 2)
    bops = [base(i.op) for i in body]
    f["loop_insts_per_ktile"] = round(len(body) / kt, 1)
    f["mma_per_ktile"] = round(sum(1 for o in bops if o in MMA_OPS) / kt, 1)
    f["ldgsts_per_ktile"] = round(bops.count("LDGSTS") / kt, 1)
    f["ldsm_per_ktile"] = round(bops.count("LDSM") / kt, 1)
    f["lea_per_ktile"] = round(sum(1 for o in bops if o in ("LEA", "ULEA")) / kt, 1)
    acc = [i.idx for i in body if base(i.op) in GLOBAL_OPS + SHARED_OPS]
    sl = address_slice(inss, acc, lps, s, e)
    f["loop_addr_per_access"] = round(len(sl) / len(acc), 2) if acc else 0
    bars = [n for n, i in enumerate(body) if i.op.startswith("BAR.SYNC") or
            i.op.startswith("SYNCS.PHASECHK")]
    mmas = [n for n, i in enumerate(body) if base(i.op) in MMA_OPS]
    dist = []
    for b in bars:
        after = [m - b for m in mmas if m > b]
        dist.append(after[0] if after else len(body) - b + mmas[0])
    f["bar_to_mma"] = max(dist) if dist else None
    f["bars_per_ktile"] = round(len(bars) / kt, 1)
    return f


def analyse_wgmma(inss, lps, f, geom):
    """The sm_90a warp-specialised loop (geom: bm, bn, bk, consumer warps,
    wgmma k-steps per k-tile): the consumers' k loop is the backward branch
    whose body holds the most warpgroup MMAs (HGMMA/QGMMA/IGMMA; innermost on a
    tie, so a persistent tile loop around it does not count); per k-tile:
    its instructions, MMAs (expected: the k-steps, bk * es / 32),
    WARPGROUP.DEPBAR (wgmma.wait_group; one per stage, more is a serialised
    pipeline, ptxas's C7517 repair) and WARPGROUP.ARRIVE (wgmma.fence; C7519
    adds more); the barrier (mbarrier wait) -> MMA distance; and over the
    whole kernel the setmaxnreg splits (USETMAXREG .DEALLOC / .TRY_ALLOC:
    the producer's and the consumers' register counts), TMA loads and
    stores (UTMALDG, UTMASTG) and stmatrix (STSM)."""
    bm, bn, bk, warps, ksteps = geom
    gmma = ("HGMMA", "QGMMA", "IGMMA")
    best = None
    for (s, e) in lps:
        n = sum(1 for i in inss[s:e + 1] if base(i.op) in gmma)
        if n and (best is None or n > best[0] or (n == best[0] and e - s < best[2] - best[1])):
            best = (n, s, e)
    if best is None:
        raise Fail("no loop with warpgroup MMA instructions found")
    _, s, e = best
    body = inss[s:e + 1]
    macs = sum(mma_macs_per_warp(i.op) for i in body if base(i.op) in gmma)
    kt = macs / (bm * bn * bk / warps)
    f["ktiles_per_iter"] = round(kt, 2)
    f["loop_insts_per_ktile"] = round(len(body) / kt, 1)
    f["mma_per_ktile"] = round(sum(1 for i in body if base(i.op) in gmma) / kt, 1)
    f["mma_expected_per_ktile"] = ksteps
    f["depbar_per_ktile"] = round(sum(1 for i in body if i.op.startswith("WARPGROUP.DEPBAR")) / kt, 1)
    f["arrive_per_ktile"] = round(sum(1 for i in body if i.op.startswith("WARPGROUP.ARRIVE")) / kt, 1)
    bars = [n for n, i in enumerate(body) if i.op.startswith("SYNCS.PHASECHK")]
    mmas = [n for n, i in enumerate(body) if base(i.op) in gmma]
    dist = []
    for b in bars:
        after = [m - b for m in mmas if m > b]
        dist.append(after[0] if after else len(body) - b + mmas[0])
    f["bar_to_mma"] = max(dist) if dist else None
    dec = inc = None
    for i in inss:
        if base(i.op) == "USETMAXREG":
            v = re.findall(r"0x([0-9a-f]+)|\b(\d+)\b", i.ops)
            v = [int(h, 16) if h else int(d) for h, d in v]
            if not v:
                continue
            if ".DEALLOC" in i.op:
                dec = v[-1]
            elif "ALLOC" in i.op:
                inc = v[-1]
    f["setmaxnreg_dec"] = dec
    f["setmaxnreg_inc"] = inc
    ops = [base(i.op) for i in inss]
    f["utmaldg"] = ops.count("UTMALDG")
    f["utmastg"] = ops.count("UTMASTG")
    f["stsm"] = ops.count("STSM")
    return f


def disassemble(tool, cubin):
    kind, path = tool
    if kind == "nvdisasm":
        return run([path, "-c", cubin]).stdout
    return run([path, "-sass", cubin]).stdout


def cuobjdump_regs(tool, cubin):
    """Registers from cuobjdump -res-usage (nvdisasm's SHI_REGISTERS section
    info is missing from some cubins, e.g. those of newer ptxas for sm_90)."""
    kind, path = tool
    if kind != "cuobjdump":
        path = os.path.join(os.path.dirname(path), "cuobjdump")
        if not os.access(path, os.X_OK):
            return None
    r = subprocess.run([path, "-res-usage", cubin], stdout=subprocess.PIPE, text=True)
    m = re.search(r"REG:(\d+)", r.stdout)
    return int(m.group(1)) if m else None


def assemble(ptxas, ptx, arch, cubin):
    r = run([ptxas, "-arch=" + arch, "-v", "-o", cubin, ptx])
    m = re.search(r"Used (\d+) registers", r.stderr + r.stdout)
    return int(m.group(1)) if m else None


def parse_geom(stderr, kind):
    m = re.search(r"config (\S+) grid (\S+)(?: \([^)]*\))? block (\d+)", stderr)
    if not m:
        raise Fail("no launch geometry in ptxtune emit's stderr: " + stderr.strip()[-200:])
    cfg = dict(kv.split("=") for kv in m.group(1).split(","))
    return cfg, int(m.group(3))


def ours(bin_, name, arch, tool, ptxas, work):
    op, args, kind = KERNELS[name]
    r = run([bin_, "emit", op] + args + ["--arch", arch])
    ptx = os.path.join(work, "%s_%s.ptx" % (name, arch))
    with open(ptx, "w") as fh:
        fh.write(r.stdout)
    cfg, block = parse_geom(r.stderr, kind)
    cubin = ptx[:-4] + ".cubin"
    regs = assemble(ptxas, ptx, arch, cubin)
    try:
        if kind == "row":
            cols = int(re.search(r"x=\d+x(\d+)", " ".join(args)).group(1))
            geom = cols // (int(cfg["wpr"]) * 32)
        elif kind == "flat":
            geom = int(cfg["vec"]) * int(cfg.get("unroll", "1"))
        elif kind == "wgmma":
            es = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}[
                args[args.index("--dtype") + 1]]
            geom = (int(cfg["bm"]), int(cfg["bn"]), int(cfg["bk"]), block // 32 - 4,
                    int(cfg["bk"]) * es // 32)
        else:
            geom = (int(cfg["bm"]), int(cfg["bn"]), int(cfg["bk"]), block // 32)
    except (KeyError, ValueError) as e:
        raise Fail("%s: config '%s' lacks %s (elements per thread unknown)" % (name, m_cfg(cfg), e))
    text = disassemble(tool, cubin)
    f = analyse(text, kind, geom, regs or cuobjdump_regs(tool, cubin))
    f["config"] = m_cfg(cfg)
    return f


def m_cfg(cfg):
    return ",".join("%s=%s" % kv for kv in cfg.items())


# ---------------------------------------------------------------- Triton

TRITON_SRC = r'''
import json, os, sys
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def softmax_k(y, x, N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    o = tl.arange(0, N)
    v = tl.load(x + row * N + o).to(tl.float32)
    e = tl.exp(v - tl.max(v, 0))
    tl.store(y + row * N + o, (e / tl.sum(e, 0)).to(y.dtype.element_ty))

@triton.jit
def rmsnorm_k(y, x, g, N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    o = tl.arange(0, N)
    v = tl.load(x + row * N + o).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(v * v, 0) / N + 1e-6)
    tl.store(y + row * N + o, (v * r * tl.load(g + o).to(tl.float32)).to(y.dtype.element_ty))

@triton.jit
def layernorm_k(y, x, g, b, N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    o = tl.arange(0, N)
    v = tl.load(x + row * N + o).to(tl.float32)
    d = v - tl.sum(v, 0) / N
    r = 1.0 / tl.sqrt(tl.sum(d * d, 0) / N + 1e-5)
    w = tl.load(g + o).to(tl.float32)
    c = tl.load(b + o).to(tl.float32)
    tl.store(y + row * N + o, (d * r * w + c).to(y.dtype.element_ty))

@triton.jit
def gelu_k(y, x, w, b, N: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    c = i % N
    u = tl.load(x + i).to(tl.float32) * tl.load(w + c).to(tl.float32) + tl.load(b + c).to(tl.float32)
    t = 1.5957691216057308 * (u + 0.044715 * u * u * u)
    tl.store(y + i, (u / (1.0 + tl.exp(-t))).to(y.dtype.element_ty))

@triton.jit
def matmul_k(d, a, b, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr,
             BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr):
    # tn: A stored K x M, B stored K x N, D M x N (row-major)
    pm = tl.program_id(0) // (N // BN)
    pn = tl.program_id(0) % (N // BN)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rk[None, :] * M + rm[:, None]
    pb = b + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(pa), tl.load(pb), input_precision=PREC)
        pa += BK * M
        pb += BK * N
    tl.store(d + rm[:, None] * N + rn[None, :], acc.to(d.dtype.element_ty))

@triton.jit
def matmul_nt_k(d, a, b, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr,
                BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    # Triton's matmul tutorial (03) in its Hopper configuration, nt: A M x K,
    # B N x K (both K-major, like ours), D M x N; grouped tile order
    pid = tl.program_id(0)
    width = GROUP * (N // BN)
    first = (pid // width) * GROUP
    gs = tl.minimum(M // BM - first, GROUP)
    pm = first + (pid % width) % gs
    pn = (pid % width) // gs
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * K + rk[None, :]
    pb = b + rn[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(pa), tl.load(pb))
        pa += BK
        pb += BK
    tl.store(d + rm[:, None] * N + rn[None, :], acc.to(d.dtype.element_ty))

def main(out, archs, hopper):
    P = {"f32": "*fp32", "bf16": "*bf16", "f16": "*fp16"}
    jobs = []
    for dt in ("f32", "bf16"):
        jobs.append(("softmax_" + dt, softmax_k, {"y": P[dt], "x": P[dt], "N": "constexpr"},
                     {"N": 4096}, 8, "row", 4096 // 256))
    jobs.append(("rmsnorm_bf16", rmsnorm_k, {"y": "*bf16", "x": "*bf16", "g": "*bf16",
                 "N": "constexpr"}, {"N": 4096}, 4, "row", 4096 // 128))
    jobs.append(("layernorm_bf16", layernorm_k, {"y": "*bf16", "x": "*bf16", "g": "*bf16",
                 "b": "*bf16", "N": "constexpr"}, {"N": 4096}, 4, "row", 4096 // 128))
    jobs.append(("gelu_bf16", gelu_k, {"y": "*bf16", "x": "*bf16", "w": "*bf16", "b": "*bf16",
                 "N": "constexpr", "BLOCK": "constexpr"}, {"N": 8192, "BLOCK": 1024}, 4,
                 "flat", 1024 // 128))
    for dt, ptr, out_ptr, prec in (("bf16", "*bf16", "*bf16", "ieee"), ("f16", "*fp16", "*fp16", "ieee"),
                                   ("tf32", "*fp32", "*fp32", "tf32")):
        jobs.append(("gemm_%s_tn" % dt, matmul_k,
                     {"d": out_ptr, "a": ptr, "b": ptr, "M": "constexpr", "N": "constexpr",
                      "K": "constexpr", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
                      "PREC": "constexpr"},
                     {"M": 4096, "N": 4096, "K": 4096, "BM": 128, "BN": 128,
                      "BK": 16 if dt == "tf32" else 32, "PREC": prec}, 4, "gemm",
                     [128, 128, 16 if dt == "tf32" else 32, 4]))
    meta = {"version": triton.__version__, "kernels": []}
    runs = [(arch, "sm_%d" % arch, 3, job) for arch in archs for job in jobs]
    if hopper:  # beside our sm_90a wgmma loop: the tutorial's 128x256x64, 8 warps, 3 stages
        runs.append((90, "sm_90a", 3, ("wgmma_bf16_nt", matmul_nt_k,
                     {"d": "*bf16", "a": "*bf16", "b": "*bf16", "M": "constexpr", "N": "constexpr",
                      "K": "constexpr", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
                      "GROUP": "constexpr"},
                     {"M": 8192, "N": 8192, "K": 8192, "BM": 128, "BN": 256, "BK": 64, "GROUP": 8},
                     8, "wgmma", [128, 256, 64, 8, 4])))
    for arch, aname, stages, (name, fn, sig, cx, warps, kind, geom) in runs:
        # what triton's launcher specialises for 16-byte aligned pointers
        attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values())
                 if t.startswith("*")}
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=attrs),
                           target=GPUTarget("cuda", arch, 32),
                           options={"num_warps": warps, "num_stages": stages})
        base = os.path.join(out, "%s_%s" % (name, aname))
        with open(base + ".cubin", "wb") as fh:
            fh.write(k.asm["cubin"])
        with open(base + ".ptx", "w") as fh:
            fh.write(k.asm["ptx"])
        meta["kernels"].append({"name": name, "arch": aname, "kind": kind,
                                "geom": geom, "cubin": base + ".cubin", "ptx": base + ".ptx",
                                "config": "num_warps=%d,num_stages=%d" % (warps, stages)})
    with open(os.path.join(out, "meta.json"), "w") as fh:
        json.dump(meta, fh)

main(sys.argv[1], [int(a) for a in sys.argv[2].split(",") if a], sys.argv[3] == "1")
'''


def triton_figures(py, archs, tool, ptxas, work, hopper=False):
    d = os.path.join(work, "triton")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "kernels.py")
    with open(src, "w") as fh:
        fh.write(TRITON_SRC)
    env = dict(os.environ, TRITON_DEFAULT_FP_FUSION="1", TRITON_CACHE_DIR=os.path.join(d, "cache"))
    run([py, src, d, ",".join(a[3:] for a in archs if a[3:].isdigit()), "1" if hopper else "0"],
        env=env)
    with open(os.path.join(d, "meta.json")) as fh:
        meta = json.load(fh)
    res = {}
    for k in meta["kernels"]:
        geom = tuple(k["geom"]) if k["kind"] in ("gemm", "wgmma") else k["geom"]
        text = disassemble(tool, k["cubin"])
        f = analyse(text, k["kind"], geom, cuobjdump_regs(tool, k["cubin"]))
        # the same PTX through this machine's ptxas, for a same-assembler check
        c2 = k["cubin"][:-6] + "_ours.cubin"
        try:
            regs = assemble(ptxas, k["ptx"], k["arch"], c2)
            f2 = analyse(disassemble(tool, c2), k["kind"], geom, regs)
            f["ptxas_local"] = {m: f2.get(m) for m in ("regs", "insts", "insts_per_elem",
                                                      "loop_insts_per_ktile", "bar_to_mma",
                                                      "mma_per_ktile", "depbar_per_ktile")}
        except Fail as e:
            f["ptxas_local"] = str(e)
        f["config"] = k["config"]
        res[(k["name"], k["arch"])] = f
    return meta["version"], res


# ---------------------------------------------------------------- output

def build_rev(rev, work, label):
    """ptxtune built from a git revision in a temporary worktree (the binary
    is copied out; the worktree is removed)."""
    wt = os.path.join(work, "wt-" + label)
    run(["git", "-C", ROOT, "worktree", "add", "--detach", wt, rev])
    try:
        bd = os.path.join(wt, "build-sass-report")
        run(["meson", "setup", bd], cwd=wt)
        run(["ninja", "-C", bd])
        b = os.path.join(work, "ptxtune-" + label)
        shutil.copy(os.path.join(bd, "cli", "ptxtune"), b)
        r = run(["git", "-C", ROOT, "rev-parse", "--short", rev])
        return b, r.stdout.strip()
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", wt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fmt(v):
    if v is None:
        return "-"
    return str(v)


HEADS = {
    "row": [("regs", "regs"), ("insts", "insts"), ("elems_per_thread", "el/thr"),
            ("insts_per_elem", "insts/el"), ("mufu_per_elem", "MUFU/el"), ("fchk", "FCHK"),
            ("call", "CALL"), ("loops", "loops"), ("gaddr_per_access", "addr/gaccess"),
            ("gaccess", "gaccess"), ("imad", "IMAD"), ("iadd3", "IADD3"), ("lea", "LEA")],
    "gemm": [("regs", "regs"), ("loop_insts_per_ktile", "insts/ktile"),
             ("mma_per_ktile", "MMA/kt"), ("ldgsts_per_ktile", "LDGSTS/kt"),
             ("ldsm_per_ktile", "LDSM/kt"), ("lea_per_ktile", "LEA/kt"),
             ("loop_addr_per_access", "addr/access"), ("bar_to_mma", "bar->MMA")],
    "wgmma": [("regs", "regs"), ("loop_insts_per_ktile", "insts/ktile"),
              ("mma_per_ktile", "MMA/kt"), ("mma_expected_per_ktile", "MMA/kt wanted"),
              ("depbar_per_ktile", "DEPBAR/kt"), ("arrive_per_ktile", "ARRIVE/kt"),
              ("bar_to_mma", "bar->MMA"), ("setmaxnreg_dec", "producer regs"),
              ("setmaxnreg_inc", "consumer regs"), ("utmaldg", "UTMALDG"),
              ("utmastg", "UTMASTG"), ("stsm", "STSM")],
}


def md_tables(cols, names, archs):
    """cols: [(label, {(name, arch): figures})]. Triton has one softmax per
    dtype: it stands beside the cached and the uncached one."""
    out = []
    for group in ("row", "gemm", "wgmma"):
        kinds = {"row": ("row", "flat"), "gemm": ("gemm",), "wgmma": ("wgmma",)}[group]
        if not any(KERNELS[n][2] in kinds for n in names):
            continue
        hs = HEADS[group]
        out.append("| kernel | arch | build | " + " | ".join(h for _, h in hs) + " |")
        out.append("|" + "---|" * (3 + len(hs)))
        for n in names:
            k = KERNELS[n][2]
            if (k if k in ("gemm", "wgmma") else "row") != group:
                continue
            for x in archs_of(n, archs):
                for label, res in cols:
                    key = (n, x)
                    if key not in res and label == "triton":
                        key = (n.replace("_nocache", ""), x)
                    if key not in res:
                        continue
                    f = res[key]
                    out.append("| %s | %s | %s | %s |" % (n, x, label, " | ".join(
                        fmt(f.get(m)) for m, _ in hs)))
        out.append("")
    return "\n".join(out)


def resolve(spec, work, label):
    """A ptxtune binary path, or git:REV (built in a worktree)."""
    if spec.startswith("git:"):
        return build_rev(spec[4:], work, label)
    if not os.access(spec, os.X_OK):
        raise Fail("no ptxtune binary at %s (build it, or give --ptxtune)" % spec, 2)
    return spec, spec


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ptxtune", default=os.environ.get("PTXTUNE_BIN",
                                                        os.path.join(ROOT, "build", "cli",
                                                                     "ptxtune")),
                    help="ptxtune binary, or git:REV to build a revision ('after' column)")
    ap.add_argument("--before", help="binary or git:REV for a 'before' column")
    ap.add_argument("--arch", default="sm_80,sm_90")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--triton-python", help="a python with triton installed: Triton's column")
    ap.add_argument("--ptx", help="analyse this PTX file instead (needs --kind and --geom)")
    ap.add_argument("--kind", choices=("row", "flat", "gemm", "wgmma"), default="row")
    ap.add_argument("--geom", help="--ptx: elements per thread, bm,bn,bk,warps (gemm), or "
                    "bm,bn,bk,consumer warps,k steps (wgmma)")
    ap.add_argument("--format", default="md", choices=("md", "tsv", "json"))
    ap.add_argument("--keep", help="keep PTX, cubins and SASS in this directory")
    a = ap.parse_args(argv)
    archs = [x for x in a.arch.split(",") if x]
    names = [x for x in a.kernels.split(",") if x]
    for n in names:
        if n not in KERNELS:
            print("sass_report: unknown kernel '%s' (known: %s)" % (n, ", ".join(KERNELS)),
                  file=sys.stderr)
            return 2
    for x in archs:
        if not re.fullmatch(r"sm_\d+a?", x):
            print("sass_report: bad arch '%s'" % x, file=sys.stderr)
            return 2
    geom = None
    if a.ptx:
        try:
            g = [int(v) for v in (a.geom or "").split(",")]
            geom = tuple(g) if a.kind in ("gemm", "wgmma") else g[0]
            if a.kind == "gemm" and len(g) != 4 or a.kind == "wgmma" and len(g) != 5 or min(g) <= 0:
                raise ValueError
        except (ValueError, IndexError):
            print("sass_report: bad --geom '%s' (elements per thread, bm,bn,bk,warps, or "
                  "bm,bn,bk,consumer warps,k steps)" % a.geom, file=sys.stderr)
            return 2
    srcs = {}
    try:
        tool = find_disassembler()
        ptxas = find_ptxas()
        work = a.keep or tempfile.mkdtemp(prefix="sass_report_")
        os.makedirs(work, exist_ok=True)
        try:
            cols = []
            if a.ptx:
                res = {}
                for x in archs:
                    cubin = os.path.join(work, "ptx_%s.cubin" % x)
                    regs = assemble(ptxas, a.ptx, x, cubin)
                    res[(os.path.basename(a.ptx), x)] = analyse(disassemble(tool, cubin),
                                                                a.kind, geom, regs)
                cols.append(("ptx", res))
            for label, spec in (("before", a.before), ("after", a.ptxtune)):
                if not spec or a.ptx:
                    continue
                b, src = resolve(spec, work, label)
                srcs[label] = src
                d = os.path.join(work, label)
                os.makedirs(d, exist_ok=True)
                cols.append((label, {(n, x): ours(b, n, x, tool, ptxas, d)
                                     for n in names for x in archs_of(n, archs)}))
            tver = None
            if a.triton_python and not a.ptx:
                tver, tres = triton_figures(a.triton_python, archs, tool, ptxas, work,
                                            any(KERNELS[n][2] == "wgmma" for n in names))
                srcs["triton"] = "triton " + tver
                cols.append(("triton", tres))
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
    except Fail as e:
        print("sass_report: %s" % e, file=sys.stderr)
        return e.code
    if a.format == "tsv":
        for label, res in cols:
            for (n, x), f in sorted(res.items()):
                for m, v in f.items():
                    if not isinstance(v, dict):
                        print("%s\t%s\t%s\t%s\t%s" % (label, n, x, m, fmt(v)))
    elif a.format == "json":
        print(json.dumps({label: {"%s@%s" % k: v for k, v in res.items()}
                          for label, res in cols}, indent=1))
    else:
        print("Tools: ptxas %s (%s), %s %s (%s)%s.\n" % (
            tool_version(ptxas), ptxas, tool[0], tool_version(tool[1]), tool[1],
            "; Triton %s (its own cubins: bundled ptxas)" % tver if tver else ""))
        for label, src in srcs.items():
            print("- %s: %s" % (label, src))
        print()
        print(md_tables(cols, names, archs) if not a.ptx else
              "\n".join("%s %s: %s" % (k[0], k[1], v) for k, v in cols[0][1].items()))
        print("Configs (%s):\n" % archs[0])
        after = dict(cols).get("after", {})
        for label, res in cols:
            for (n, x), f in sorted(res.items()):
                # a before config is listed only where it differs from after's
                same = label == "before" and after.get((n, x), {}).get("config") == f.get("config")
                if x == archs_of(n, archs)[0] and f.get("config") and not same:
                    print("- %s %s: %s" % (label, n, f["config"]))
        if tver:
            print("\nTriton's PTX through the ptxas above (%s):\n" % archs[0])
            for (n, x), f in sorted(cols[-1][1].items()):
                if x == archs[0]:
                    print("- %s: %s" % (n, ", ".join("%s %s" % (k, fmt(v)) for k, v in
                                                     f["ptxas_local"].items() if v is not None)
                                        if isinstance(f["ptxas_local"], dict)
                                        else f["ptxas_local"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
