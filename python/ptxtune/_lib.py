"""ctypes declarations of include/ptxtune/runtime.h and the library's lookup.

The structures mirror the header field for field (C layout, ctypes' native
alignment); tests/test_python.c runs the package against the built library.
"""
import ctypes
import ctypes.util
import os
import shutil
import subprocess

MAX_DIMS = 16

OK, EINVAL, ENOTFOUND, ENODRIVER, EDRIVER, EIO, ENOMEM = range(7)

LOAD_EAGER = 1 << 0
ALLOW_PTX_JIT = 1 << 1
BUCKET_TUNED = 1 << 2
ALLOW_PAD = 1 << 3

MATCH_NAMES = ("exact", "bucket", "default")


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class Options(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint), ("fingerprint", ctypes.c_char_p),
                ("device", ctypes.c_int)]


class EntryInfo(ctypes.Structure):
    _fields_ = [("op", ctypes.c_char_p), ("klass", ctypes.c_char_p),
                ("problem", ctypes.c_char_p), ("config", ctypes.c_char_p),
                ("entry", ctypes.c_char_p), ("arch", ctypes.c_char_p),
                ("ndims", ctypes.c_int),
                ("tuned", ctypes.c_int64 * MAX_DIMS), ("min", ctypes.c_int64 * MAX_DIMS),
                ("max", ctypes.c_int64 * MAX_DIMS),
                ("nargs", ctypes.c_int), ("time_s", ctypes.c_double), ("loaded", ctypes.c_int)]


class Selection(ctypes.Structure):
    _fields_ = [("entry", ctypes.c_void_p), ("match", ctypes.c_int), ("ndims", ctypes.c_int),
                ("dims", ctypes.c_int64 * MAX_DIMS), ("padded", ctypes.c_int),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("smem", ctypes.c_size_t), ("workspace_bytes", ctypes.c_size_t),
                ("workspace_align", ctypes.c_size_t), ("align", ctypes.c_size_t)]


class ArgInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_char_p),
                ("dtype", ctypes.c_char_p), ("elements", ctypes.c_int64),
                ("tensor", ctypes.c_int)]


class Scalar(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_double)]


class LaunchArgs(ctypes.Structure):
    _fields_ = [("tensors", ctypes.POINTER(ctypes.c_uint64)), ("ntensors", ctypes.c_int),
                ("workspace", ctypes.c_uint64), ("stream", ctypes.c_void_p),
                ("scalars", ctypes.POINTER(Scalar)), ("nscalars", ctypes.c_int)]


_PROTOS = {
    "ptxtune_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(Options),
                                    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Error)]),
    "ptxtune_close": (None, [ctypes.c_void_p]),
    "ptxtune_fingerprint": (ctypes.c_char_p, [ctypes.c_void_p]),
    "ptxtune_entry_count": (ctypes.c_int, [ctypes.c_void_p]),
    "ptxtune_entry_get": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    "ptxtune_entry_info_get": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(EntryInfo)]),
    "ptxtune_select": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p,
                                      ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                      ctypes.POINTER(Selection), ctypes.POINTER(Error)]),
    "ptxtune_arg_count": (ctypes.c_int, [ctypes.POINTER(Selection)]),
    "ptxtune_arg_get": (ctypes.c_int, [ctypes.POINTER(Selection), ctypes.c_int,
                                       ctypes.POINTER(ArgInfo)]),
    "ptxtune_load": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(Error)]),
    "ptxtune_launch": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(Selection),
                                      ctypes.POINTER(LaunchArgs), ctypes.POINTER(Error)]),
}


def _candidates():
    """Where libptxtune may be, in the order tried."""
    env = os.environ.get("PTXTUNE_LIB")
    if env:
        if os.path.isdir(env):
            yield os.path.join(env, "libptxtune.so.0")
            yield os.path.join(env, "libptxtune.so")
        else:
            yield env
        return  # named: nothing else is tried
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libptxtune.so.0")  # a wheel that carries the library
    if shutil.which("pkg-config"):
        try:
            libdir = subprocess.run(["pkg-config", "--variable=libdir", "ptxtune"],
                                    capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            libdir = ""
        if libdir:
            yield os.path.join(libdir, "libptxtune.so.0")
    found = ctypes.util.find_library("ptxtune")
    if found:
        yield found
    for prefix in ("/usr/local/lib", "/usr/local/lib/x86_64-linux-gnu", "/usr/lib",
                   "/usr/lib/x86_64-linux-gnu"):
        yield os.path.join(prefix, "libptxtune.so.0")
    yield "libptxtune.so.0"


_lib = None


def lib():
    """The loaded library (once), with every prototype set."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            handle = ctypes.CDLL(path)
        except OSError as exc:
            tried.append("%s (%s)" % (path, exc))
            continue
        for name, (res, args) in _PROTOS.items():
            fn = getattr(handle, name)
            fn.restype = res
            fn.argtypes = args
        _lib = handle
        return _lib
    raise OSError("libptxtune not found (set PTXTUNE_LIB to the library or its folder); tried: "
                  + ", ".join(tried))
