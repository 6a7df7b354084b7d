"""The few CUDA driver calls the numpy path needs (device memory, copies, a
synchronisation), through cuGetProcAddress_v2 as libptxtune does.

PTXTUNE_CUDA_LIB names the libcuda to load (the tests' fake driver over the
emulator, tests/fake_cuda.c); it is loaded RTLD_GLOBAL before libptxtune
opens its table, so libptxtune's dlopen("libcuda.so.1") finds the same one.
"""
import ctypes
import os

CUDA_VERSION = 13000  # the cuda.h ABI libptxtune asks for

_handle = None


def preload():
    """Loads PTXTUNE_CUDA_LIB (when set) globally; the handle, or None."""
    global _handle
    if _handle is None:
        path = os.environ.get("PTXTUNE_CUDA_LIB")
        if path:
            _handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    return _handle


class DriverError(RuntimeError):
    pass


class Driver:
    """cuMemAlloc / cuMemcpyHtoD / cuMemcpyDtoH / cuMemsetD8 /
    cuCtxSynchronize of the current context."""

    _NAMES = {
        "cuInit": (ctypes.c_uint,),
        "cuMemAlloc": (ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t),
        "cuMemFree": (ctypes.c_uint64,),
        "cuMemcpyHtoD": (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t),
        "cuMemcpyDtoH": (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t),
        "cuMemsetD8": (ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t),
        "cuCtxSynchronize": (),
        "cuGetErrorName": (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)),
    }

    def __init__(self):
        lib = preload()
        if lib is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                raise DriverError("no CUDA driver (libcuda.so.1): %s" % exc) from None
        gpa = lib.cuGetProcAddress_v2
        gpa.restype = ctypes.c_int
        gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                        ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
        for name, args in self._NAMES.items():
            ptr = ctypes.c_void_p()
            status = ctypes.c_int()
            if gpa(name.encode(), ctypes.byref(ptr), CUDA_VERSION, 0, ctypes.byref(status)) \
                    or not ptr.value:
                raise DriverError("the CUDA driver has no %s" % name)
            setattr(self, name, ctypes.CFUNCTYPE(ctypes.c_int, *args)(ptr.value))
        self._check(self.cuInit(0), "cuInit")

    def _check(self, r, call):
        if r:
            name = ctypes.c_char_p()
            self.cuGetErrorName(r, ctypes.byref(name))
            raise DriverError("%s: %s (CUresult %d)"
                              % (call, (name.value or b"unknown error").decode(), r))

    def alloc(self, nbytes):
        p = ctypes.c_uint64()
        self._check(self.cuMemAlloc(ctypes.byref(p), max(int(nbytes), 1)), "cuMemAlloc")
        return p.value

    def free(self, p):
        self._check(self.cuMemFree(p), "cuMemFree")

    def upload(self, p, host_ptr, nbytes):
        self._check(self.cuMemcpyHtoD(p, host_ptr, nbytes), "cuMemcpyHtoD")

    def download(self, host_ptr, p, nbytes):
        self._check(self.cuMemcpyDtoH(host_ptr, p, nbytes), "cuMemcpyDtoH")

    def zero(self, p, nbytes):
        self._check(self.cuMemsetD8(p, 0, nbytes), "cuMemsetD8")

    def sync(self):
        self._check(self.cuCtxSynchronize(), "cuCtxSynchronize")
