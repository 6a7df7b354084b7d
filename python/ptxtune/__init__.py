"""ptxtune from Python: run kernels from a table exported by `ptxtune export`
(ctypes over libptxtune's runtime, include/ptxtune/runtime.h) on torch
tensors or numpy arrays, and tune from a notebook (tune(), export())."""
from ._driver import DriverError
from .runtime import (DTYPES, Arg, ArgumentError, DTypeError, Entry, NotFoundError, PtxtuneError,
                      Runtime, Selection)
from .tune import TuneError, export, tune

__version__ = "0.1.0"


def open(path, **options):  # noqa: A001 (the C API's name)
    """Runtime(path, **options)."""
    return Runtime(path, **options)


__all__ = ["Runtime", "Selection", "Entry", "Arg", "PtxtuneError", "NotFoundError",
           "ArgumentError", "DTypeError", "DriverError", "TuneError", "tune", "export", "open",
           "DTYPES"]
