"""The CLI from a notebook: ptxtune tune ... --json, ptxtune export."""
import json
import os
import shutil
import subprocess


class TuneError(RuntimeError):
    """The CLI failed: .returncode, .stderr (its messages), .cmd."""

    def __init__(self, msg, returncode, stderr, cmd):
        super().__init__(msg)
        self.returncode = returncode
        self.stderr = stderr
        self.cmd = cmd


def _exe(ptxtune):
    exe = ptxtune or os.environ.get("PTXTUNE_BIN") or shutil.which("ptxtune")
    if not exe:
        raise FileNotFoundError("the ptxtune CLI is not on PATH (pass ptxtune=PATH or set "
                                "PTXTUNE_BIN)")
    return exe


def _run(cmd, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if p.returncode:
        last = [l for l in p.stderr.splitlines() if l.strip()]
        raise TuneError("%s exited %d: %s" % (" ".join(cmd[:2]), p.returncode,
                                                last[-1] if last else "(no message)"),
                        p.returncode, p.stderr, cmd)
    return p


def tune(op=None, *items, db="ptxtune.db", problems=None, backend=None, budget=None,
         strategy=None, arch=None, seed=None, name=None, extra=(), ptxtune=None,
         timeout=None, **keys):
    """Runs `ptxtune tune OP ITEMS... --db DB --json` and returns its parsed
    summary (docs/json.md: {"format": "ptxtune-tune", "rows": [...],
    "summary": {...}}). items are KEY=VALUE strings ("expr=y = softmax(x, -1)",
    "shape=x=64x4096"); keys add more (m=16, dtype="bf16"); problems names a
    problem file instead of op and items. extra: further CLI options.
    TuneError (with the CLI's messages) when it exits non-zero."""
    cmd = [_exe(ptxtune), "tune"]
    if problems is not None:
        if op is not None or items or keys:
            raise ValueError("tune: give a problem (op, items) or problems=FILE, not both")
        cmd += ["--problems", str(problems)]
    else:
        if not op:
            raise ValueError("tune: no op (e.g. tune('gemm', m=16, n=64, k=32))")
        cmd.append(op)
        cmd += [str(i) for i in items]
        cmd += ["%s=%s" % (k, v) for k, v in keys.items()]
    cmd += ["--db", str(db), "--json", "--quiet"]
    for opt, v in (("--backend", backend), ("--budget", budget), ("--strategy", strategy),
                   ("--arch", arch), ("--seed", seed), ("--name", name)):
        if v is not None:
            cmd += [opt, str(v)]
    cmd += [str(x) for x in extra]
    p = _run(cmd, timeout)
    try:
        return json.loads(p.stdout)
    except ValueError as exc:
        raise TuneError("ptxtune tune printed no JSON summary (%s)" % exc, 0, p.stderr,
                        cmd) from None


def export(db, out, format="bundle", ptxtune=None, extra=(), timeout=None):
    """`ptxtune export --db DB --format FORMAT --out OUT`; returns out."""
    cmd = [_exe(ptxtune), "export", "--db", str(db), "--format", format, "--out", str(out)]
    cmd += [str(x) for x in extra]
    _run(cmd, timeout)
    return out
