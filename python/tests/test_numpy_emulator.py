"""The ptxtune package end to end without torch (tests/test_python.c runs it):
tunes a softmax and an f32 GEMM with the CLI (tune(), the emulator backend,
every candidate verified), exports a bundle (export()), opens it on the fake
driver over the emulator (PTXTUNE_CUDA_LIB), selects kernels for sizes that
were not tuned exactly, launches them on numpy arrays and checks the results
against numpy; then the argument checks (each bad argument named).

    python3 test_numpy_emulator.py WORKDIR
Environment: PTXTUNE_BIN (the CLI), PTXTUNE_LIB (libptxtune.so), PTXTUNE_CUDA_LIB
(the fake libcuda.so.1). Prints one line per check, exits 1 on the first
failure."""
import os
import sys

import numpy as np

import ptxtune

work = sys.argv[1]
db = os.path.join(work, "tuned.db")
checks = 0


def check(cond, what):
    global checks
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)
    checks += 1
    print("ok: " + what)


def raises(exc, needle, fn, what):
    try:
        fn()
    except exc as e:
        check(needle in str(e), "%s: %s" % (what, e))
        return
    except Exception as e:  # the wrong kind
        check(False, "%s raised %s: %s, not %s" % (what, type(e).__name__, e, exc.__name__))
    check(False, "%s raised nothing" % what)


# ---- tune and export through the CLI -------------------------------------
fps = set()
for shape in ("16x256", "64x256"):
    s = ptxtune.tune("elementwise", "expr=y = softmax(x, -1)", "shape=x=" + shape, db=db,
                     backend="emu", budget=4, strategy="random", seed=3, extra=["--no-compile"])
    check(s["format"] == "ptxtune-tune" and s["rows"], "tune softmax %s: %d rows"
          % (shape, len(s["rows"])))
    check(all(r["verified"] for r in s["rows"]), "every softmax row verified")
    fps.add(s["summary"]["fingerprint"])
for m in (16, 64):
    s = ptxtune.tune("gemm", db=db, backend="emu", budget=3, strategy="random", seed=3,
                     extra=["--no-compile"], m=m, n=64, k=32)
    check(s["rows"] and all(r["verified"] for r in s["rows"]), "tune gemm m=%d verified" % m)
    fps.add(s["summary"]["fingerprint"])
check(len(fps) == 1, "one fingerprint: %s" % fps)
fp = fps.pop()
with open(os.path.join(work, "fp.txt"), "w") as f:  # for test_torch_path.py
    f.write(fp)
raises(ptxtune.TuneError, "unknown op", lambda: ptxtune.tune("nosuchop", db=db),
       "tune() of a bad op raises TuneError with the CLI's message")
bundle = ptxtune.export(db, os.path.join(work, "k.db"))
table = ptxtune.export(db, os.path.join(work, "k.json"), format="json")

# ---- open, select, launch ---------------------------------------------------
raises(ptxtune.NotFoundError, "no entry tuned on this device",
       lambda: ptxtune.Runtime(bundle), "the emulator's table is not this (fake) device's")
for path in (bundle, table):
    rt = ptxtune.Runtime(path, fingerprint=fp[:8], allow_ptx_jit=True, allow_pad=True)
    check(rt.fingerprint == fp, "opened %s for %s" % (os.path.basename(path), fp))
    check(len(rt.entries) == 4, "4 entries: %s" % rt.entries)
    softmax = rt.find_class("softmax", dtype="f32")
    gemm = rt.find_class(op="gemm")

    # softmax at 40 rows (tuned at 16 and 64)
    sel = rt.select(softmax, (40, 256))
    check(sel.match == "bucket" and sel.entry.tuned[0] == 64, "softmax 40x256: %r" % sel)
    rows = sel.dims[0]
    rng = np.random.default_rng(7)
    x = np.zeros((rows, 256), np.float32)
    x[:40] = rng.uniform(-3, 3, (40, 256)).astype(np.float32)
    y = np.full((rows, 256), np.nan, np.float32)
    sel.launch(x=x, y=y)
    ref = np.exp(x[:40] - x[:40].max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    err = float(np.max(np.abs(y[:40] - ref)))
    check(err < 1e-5, "softmax 40x256 matches numpy (max error %.2g)" % err)

    # gemm at m = 40 (tuned at 16 and 64: padded to the 64 bucket unless m is run-time)
    sel = rt.select(gemm, (40, 64, 32, 1))
    check(sel.match == "bucket", "gemm m=40: %r" % sel)
    M, N, K = sel.dims[:3]
    a = np.zeros((M, K), np.float32)
    a[:40] = rng.uniform(-1, 1, (40, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    d = np.zeros((M, N), np.float32)
    byname = {"a": a, "b": b}
    outs = [t for t in sel.tensors if t.kind == "output"]
    check(len(outs) == 1, "gemm has one output: %s" % sel.tensors)
    byname[outs[0].name] = d
    sel.launch(**byname)
    ref = a[:40].astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(d[:40] - ref)))
    check(err < 1e-4, "gemm 40x64x32 matches numpy (max error %.2g)" % err)

    # Runtime.launch: select and launch in one call, tensors positionally
    x2 = rng.uniform(-1, 1, (16, 256)).astype(np.float32)
    y2 = np.zeros_like(x2)
    order = {t.name: t.tensor for t in rt.select(softmax, (16, 256)).tensors}
    pos = [None, None]
    pos[order["in_x"]] = x2
    pos[order["out_y"]] = y2
    s2 = rt.launch(softmax, (16, 256), *pos)
    check(s2.match == "exact", "16 rows: exact")
    ref = np.exp(x2 - x2.max(1, keepdims=True))
    check(np.allclose(y2, ref / ref.sum(1, keepdims=True), atol=1e-6), "positional launch")

    # bad arguments, each named
    sel = rt.select(softmax, (40, 256))
    raises(ptxtune.DTypeError, "argument 'in_x'", lambda: sel.launch(x=x.astype(np.float64), y=y),
           "a float64 input")
    raises(ptxtune.ArgumentError, "argument 'out_y'",
           lambda: sel.launch(x=x, y=np.zeros((rows, 255), np.float32)), "a short output")
    raises(ptxtune.ArgumentError, "not C-contiguous",
           lambda: sel.launch(x=np.asfortranarray(x), y=y), "a Fortran-order input")
    raises(ptxtune.ArgumentError, "missing tensor argument out_y", lambda: sel.launch(x=x),
           "a missing output")
    raises(ptxtune.ArgumentError, "no tensor argument 'z'", lambda: sel.launch(x=x, y=y, z=y),
           "an unknown name")
    raises(ptxtune.ArgumentError, "argument 'in_x'", lambda: sel.launch(x="x", y=y),
           "a string for a tensor")
    raises(ptxtune.ArgumentError, "not aligned", lambda: sel.launch(x=3, y=y),
           "a misaligned pointer")
    raises(ptxtune.NotFoundError, "no entry of this class",
           lambda: rt.select("gemm dtype=nope", (1, 1, 1, 1)), "an unknown class")
    raises(ptxtune.NotFoundError, "2 classes match", lambda: rt.find_class("dtype=f32"),
           "an ambiguous class")
    rt.close()

print("%d checks passed" % checks)
