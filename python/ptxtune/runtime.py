"""Open a tuned table, select a kernel for sizes given at run time, launch it
on torch tensors, raw device pointers or numpy arrays (docs/runtime.md)."""
import ctypes
import threading

from . import _driver, _lib

# the contract's dtype names: bytes per element, numpy dtype name, torch dtype name
DTYPES = {
    "f64": (8, "float64", "float64"), "f32": (4, "float32", "float32"),
    "tf32": (4, "float32", "float32"), "f16": (2, "float16", "float16"),
    "bf16": (2, "uint16", "bfloat16"),  # numpy: bf16 bit patterns in uint16
    "e4m3": (1, "uint8", "float8_e4m3fn"), "e5m2": (1, "uint8", "float8_e5m2"),
    "s8": (1, "int8", "int8"), "u8": (1, "uint8", "uint8"),
    "s16": (2, "int16", "int16"), "u16": (2, "uint16", "uint16"),
    "s32": (4, "int32", "int32"), "u32": (4, "uint32", "uint32"),
    "s64": (8, "int64", "int64"), "u64": (8, "uint64", "uint64"),
}


class PtxtuneError(RuntimeError):
    """A runtime call failed; .code is the ptxtune_status."""

    def __init__(self, msg, code=_lib.EINVAL):
        super().__init__(msg)
        self.code = code


class NotFoundError(PtxtuneError, LookupError):
    """No entry for this device, class or size (PTXTUNE_ENOTFOUND)."""


class ArgumentError(PtxtuneError, ValueError):
    """A bad argument to a launch (named in the message)."""


class DTypeError(ArgumentError, TypeError):
    """A tensor of the wrong dtype (named in the message)."""


def _raise(code, err):
    msg = err.msg.decode(errors="replace")
    if code == _lib.ENOTFOUND:
        raise NotFoundError(msg, code)
    raise PtxtuneError(msg, code)


def _s(b):
    return b.decode() if b is not None else None


class Entry:
    """One tuned kernel of the table (ptxtune_entry_info)."""

    def __init__(self, handle, info):
        self._handle = handle
        self.op = _s(info.op)
        self.klass = _s(info.klass)
        self.problem = _s(info.problem)
        self.config = _s(info.config)
        self.entry = _s(info.entry)
        self.arch = _s(info.arch)
        n = info.ndims
        self.tuned = tuple(info.tuned[:n])
        self.min = tuple(info.min[:n])
        self.max = tuple(info.max[:n])
        self.nargs = info.nargs
        self.time_s = info.time_s
        self.loaded = bool(info.loaded)

    def __repr__(self):
        return "Entry(%r, config=%r)" % (self.problem, self.config)


class Arg:
    def __init__(self, index, a):
        self.index = index
        self.name = _s(a.name)
        self.kind = _s(a.kind)
        self.dtype = _s(a.dtype)
        self.elements = a.elements
        self.tensor = a.tensor  # position among the launch's tensor pointers; -1

    def __repr__(self):
        if self.tensor >= 0:
            return "Arg(%s %s %s[%d])" % (self.kind, self.name, self.dtype, self.elements)
        return "Arg(%s %s)" % (self.kind, self.name)


class Selection:
    """A kernel selected for one request: where it runs and what it takes."""

    def __init__(self, rt, request, sel):
        self._rt = rt
        self._sel = sel
        self.request = tuple(request)
        self.match = _lib.MATCH_NAMES[sel.match]
        self.dims = tuple(sel.dims[:sel.ndims])
        self.padded = bool(sel.padded)
        self.grid = tuple(sel.grid)
        self.block = tuple(sel.block)
        self.smem = sel.smem
        self.workspace_bytes = sel.workspace_bytes
        self.workspace_align = sel.workspace_align
        self.align = sel.align
        L = _lib.lib()
        self.args = []
        for i in range(L.ptxtune_arg_count(ctypes.byref(sel))):
            a = _lib.ArgInfo()
            L.ptxtune_arg_get(ctypes.byref(sel), i, ctypes.byref(a))
            self.args.append(Arg(i, a))
        self.tensors = sorted((a for a in self.args if a.tensor >= 0), key=lambda a: a.tensor)
        info = _lib.EntryInfo()
        L.ptxtune_entry_info_get(sel.entry, ctypes.byref(info))
        self.entry = Entry(sel.entry, info)

    def __repr__(self):
        return "Selection(%s match, dims=%s%s, kernel tuned for %r)" % (
            self.match, self.dims, ", padded" if self.padded else "", self.entry.problem)

    def launch(self, *tensors, workspace=None, stream=None, scalars=None, **named):
        """Launches with the tensors in argument order (positionally) or by
        argument name; see Runtime.launch."""
        return self._rt._launch(self, tensors, named, workspace, stream, scalars)


def _is_torch(x):
    return hasattr(x, "data_ptr") and hasattr(x, "is_cuda") and hasattr(x, "numel")


def _is_numpy(x):
    return hasattr(x, "__array_interface__") and hasattr(x, "ctypes")


class Runtime:
    """An open table (ptxtune_open): a bundle or a JSON table exported by
    `ptxtune export`.

    fingerprint: None serves the entries tuned on this device; else a
    fingerprint key (or a prefix naming one), served as is. eager: load every
    kernel now. allow_ptx_jit: a kernel without a cubin for this device goes
    through the driver's PTX JIT. allow_pad: sizes a kernel bakes in may
    serve smaller requests (the selection says padded; buffers are then of
    the selection's dims). bucket_tuned: buckets are the tuned sizes."""

    def __init__(self, path, fingerprint=None, device=0, eager=False, allow_ptx_jit=False,
                 allow_pad=False, bucket_tuned=False):
        _driver.preload()
        L = _lib.lib()
        flags = ((_lib.LOAD_EAGER if eager else 0) | (_lib.ALLOW_PTX_JIT if allow_ptx_jit else 0)
                 | (_lib.ALLOW_PAD if allow_pad else 0)
                 | (_lib.BUCKET_TUNED if bucket_tuned else 0))
        self._fp = fingerprint.encode() if fingerprint else None
        o = _lib.Options(flags, self._fp, int(device))
        h = ctypes.c_void_p()
        e = _lib.Error()
        rc = L.ptxtune_open(str(path).encode(), ctypes.byref(o), ctypes.byref(h), ctypes.byref(e))
        if rc:
            _raise(rc, e)
        self._h = h
        self.path = str(path)
        self.device = int(device)
        self._drv = None
        self._ws = {}  # zero-filled workspaces by kind, (pointer, bytes, keep-alive)
        self._lock = threading.Lock()

    def close(self):
        if getattr(self, "_h", None):
            _lib.lib().ptxtune_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _handle(self):
        if not self._h:
            raise PtxtuneError("the runtime is closed")
        return self._h

    @property
    def fingerprint(self):
        return _s(_lib.lib().ptxtune_fingerprint(self._handle()))

    @property
    def entries(self):
        L = _lib.lib()
        out = []
        for i in range(L.ptxtune_entry_count(self._handle())):
            k = L.ptxtune_entry_get(self._h, i)
            info = _lib.EntryInfo()
            L.ptxtune_entry_info_get(k, ctypes.byref(info))
            out.append(Entry(k, info))
        return out

    def classes(self):
        """The distinct problem classes of the table, sorted."""
        return sorted({e.klass for e in self.entries})

    def find_class(self, *words, op=None, **keys):
        """The one class whose text holds every word and KEY=VALUE (e.g.
        find_class("softmax", dtype="f32"), find_class(op="gemm",
        layout="nn")); ptxtune.NotFoundError when none or several do."""
        want = list(words) + ["%s=%s" % kv for kv in keys.items()]
        hits = [c for c in self.classes()
                if (op is None or c.split(" ", 1)[0] == op) and all(w in c for w in want)]
        if len(hits) != 1:
            raise NotFoundError("%d classes match %s%s: %s" % (
                len(hits), " ".join(want), " op=" + op if op else "", self.classes()),
                _lib.ENOTFOUND)
        return hits[0]

    def select(self, klass, dims):
        """The kernel for class klass at the sizes dims (the store's order:
        gemm m n k batch; elementwise every size of the shape list)."""
        dims = [int(d) for d in dims]
        arr = (ctypes.c_int64 * max(len(dims), 1))(*dims)
        sel = _lib.Selection()
        e = _lib.Error()
        rc = _lib.lib().ptxtune_select(self._handle(), klass.encode(), arr, len(dims),
                                       ctypes.byref(sel), ctypes.byref(e))
        if rc:
            _raise(rc, e)
        return Selection(self, dims, sel)

    def load(self, sel):
        e = _lib.Error()
        rc = _lib.lib().ptxtune_load(self._handle(), sel._sel.entry, ctypes.byref(e))
        if rc:
            _raise(rc, e)

    def launch(self, klass, dims, *tensors, workspace=None, stream=None, scalars=None, **named):
        """Selects for (klass, dims) and launches; the Selection.

        tensors: in argument order, or by argument name (x=..., y=...; see
        Selection.tensors): torch CUDA tensors (launched on
        torch.cuda.current_stream() unless stream is given), device pointers
        (ints), or numpy arrays (copied to device memory, outputs copied back
        after a synchronisation). workspace: a device pointer to
        workspace_bytes zero-filled bytes; None: the runtime keeps one.
        scalars: {name: value} overrides (alpha, beta)."""
        sel = self.select(klass, dims)
        self._launch(sel, tensors, named, workspace, stream, scalars)
        return sel

    # ---- launching ---------------------------------------------------------

    def driver(self):
        if self._drv is None:
            self._drv = _driver.Driver()
        return self._drv

    def _check_tensor(self, sel, a, x):
        """(pointer, kind) for argument a given x; ArgumentError naming it."""
        want_bytes, np_name, torch_name = DTYPES.get(a.dtype, (0, None, None))
        what = "argument '%s' (%s %s, %d elements at dims %s)" % (
            a.name, a.kind, a.dtype, a.elements, sel.dims)
        if isinstance(x, bool) or x is None:
            raise ArgumentError("%s: got %r" % (what, x))
        if isinstance(x, int):
            if x == 0 or (sel.align > 1 and x % sel.align):
                raise ArgumentError("%s: pointer 0x%x is null or not aligned to %d bytes"
                                    % (what, x, sel.align))
            return x, "ptr"
        if _is_torch(x):
            if not x.is_cuda:
                raise ArgumentError("%s: the tensor is on %s, not a CUDA device" % (what, x.device))
            idx = x.device.index
            if idx is not None and idx != self.device:
                raise ArgumentError("%s: the tensor is on %s, the runtime on cuda:%d"
                                    % (what, x.device, self.device))
            tname = str(x.dtype).replace("torch.", "")
            if torch_name and tname != torch_name:
                raise DTypeError("%s: dtype %s, the kernel takes %s (torch.%s)"
                                 % (what, x.dtype, a.dtype, torch_name))
            if not x.is_contiguous():
                raise ArgumentError("%s: the tensor is not contiguous (strides %s); "
                                    "call .contiguous()" % (what, tuple(x.stride())))
            if x.numel() != a.elements:
                raise ArgumentError("%s: the tensor has %d elements (shape %s)%s"
                                    % (what, x.numel(), tuple(x.shape), self._pad_hint(sel)))
            p = x.data_ptr()
            if sel.align > 1 and p % sel.align:
                raise ArgumentError("%s: data_ptr 0x%x is not aligned to %d bytes"
                                    % (what, p, sel.align))
            return p, "torch"
        if _is_numpy(x):
            if np_name and x.dtype.name != np_name:
                raise DTypeError("%s: dtype %s, the kernel takes %s (numpy %s)"
                                 % (what, x.dtype, a.dtype, np_name))
            if not x.flags["C_CONTIGUOUS"]:
                raise ArgumentError("%s: the array is not C-contiguous (strides %s); "
                                    "use numpy.ascontiguousarray" % (what, x.strides))
            if x.size != a.elements:
                raise ArgumentError("%s: the array has %d elements (shape %s)%s"
                                    % (what, x.size, x.shape, self._pad_hint(sel)))
            if a.kind == "output" and not x.flags["WRITEABLE"]:
                raise ArgumentError("%s: the output array is read-only" % what)
            return None, "numpy"
        raise ArgumentError("%s: a torch CUDA tensor, a numpy array or a device pointer "
                            "(int), not %s" % (what, type(x).__name__))

    @staticmethod
    def _pad_hint(sel):
        if sel.padded:
            return "; the selection is padded: buffers are of dims %s (request %s)" % (
                sel.dims, sel.request)
        return ""

    def _workspace(self, sel, kind, like):
        need = sel.workspace_bytes
        with self._lock:
            have = self._ws.get(kind)
            if have and have[1] >= need:
                return have[0]
            if kind == "torch":
                import torch
                buf = torch.zeros(need, dtype=torch.uint8, device=like.device)
                self._ws[kind] = (buf.data_ptr(), need, buf)
            else:
                d = self.driver()
                p = d.alloc(need)
                d.zero(p, need)
                self._ws[kind] = (p, need, None)
            return self._ws[kind][0]

    def _launch(self, sel, tensors, named, workspace, stream, scalars):
        if len(tensors) > len(sel.tensors):
            raise ArgumentError("%d tensors given, the kernel takes %d: %s"
                                % (len(tensors), len(sel.tensors),
                                   ", ".join(a.name for a in sel.tensors)))
        given = {}
        for a, x in zip(sel.tensors, tensors):
            given[a.name] = x
        names = {a.name for a in sel.tensors}
        # the PTX names (in_x, out_y) and the op's (x, y) both name a tensor
        alias = {}
        for a in sel.tensors:
            for pre in ("in_", "out_"):
                if a.name.startswith(pre):
                    alias.setdefault(a.name[len(pre):], []).append(a.name)
        for k, x in named.items():
            name = k
            if k not in names and len(alias.get(k, ())) == 1:
                name = alias[k][0]
            if name not in names:
                raise ArgumentError("no tensor argument '%s': the kernel takes %s"
                                    % (k, ", ".join(a.name for a in sel.tensors)))
            if name in given:
                raise ArgumentError("argument '%s' given twice" % k)
            given[name] = x
        missing = [a.name for a in sel.tensors if a.name not in given]
        if missing:
            raise ArgumentError("missing tensor argument%s %s (the kernel takes %s)"
                                % ("s" if len(missing) > 1 else "", ", ".join(missing),
                                   ", ".join(a.name for a in sel.tensors)))
        ptrs, kinds, like = [], set(), None
        for a in sel.tensors:
            p, k = self._check_tensor(sel, a, given[a.name])
            ptrs.append(p)
            kinds.add(k)
            if k == "torch":
                like = given[a.name]
        if "torch" in kinds and "numpy" in kinds:
            raise ArgumentError("torch tensors and numpy arrays in one launch: use one kind")
        staged = []  # numpy: (arg, array, device pointer)
        if "numpy" in kinds:
            d = self.driver()
            for i, a in enumerate(sel.tensors):
                if ptrs[i] is None:
                    x = given[a.name]
                    p = d.alloc(x.nbytes)
                    d.upload(p, x.ctypes.data, x.nbytes)  # outputs too: what it leaves stays
                    ptrs[i] = p
                    staged.append((a, x, p))
        ws = 0
        if sel.workspace_bytes:
            if workspace is not None:
                ws = workspace.data_ptr() if _is_torch(workspace) else int(workspace)
            else:
                ws = self._workspace(sel, "torch" if like is not None else "driver", like)
        if stream is None and like is not None:
            import torch
            stream = torch.cuda.current_stream(like.device).cuda_stream
        elif stream is not None and hasattr(stream, "cuda_stream"):
            stream = stream.cuda_stream
        sc = scalars or {}
        sc_arr = (_lib.Scalar * max(len(sc), 1))(
            *[_lib.Scalar(str(k).encode(), float(v)) for k, v in sc.items()])
        t_arr = (ctypes.c_uint64 * max(len(ptrs), 1))(*ptrs)
        la = _lib.LaunchArgs(t_arr, len(ptrs), ws, ctypes.c_void_p(int(stream) if stream else 0),
                             sc_arr, len(sc))
        e = _lib.Error()
        try:
            rc = _lib.lib().ptxtune_launch(self._handle(), ctypes.byref(sel._sel),
                                           ctypes.byref(la), ctypes.byref(e))
            if rc:
                _raise(rc, e)
            if staged:
                d = self.driver()
                d.sync()
                for a, x, p in staged:
                    if a.kind == "output":
                        d.download(x.ctypes.data, p, x.nbytes)
        finally:
            for _, _, p in staged:
                self.driver().free(p)
