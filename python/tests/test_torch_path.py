"""The package's torch path without torch (tests/test_python.c runs it): a
stand-in `torch` module whose CUDA tensors live in the fake driver's memory
(tests/fake_cuda.c over the emulator), so Runtime.launch takes the torch
branch (data_ptr, dtype, numel, is_contiguous, device, current_stream,
torch.zeros for the workspace) and the kernel really runs. It checks that
each bad tensor is refused naming the argument, and that a good launch is
correct. It does not test torch itself (no torch on the test machines).

    python3 test_torch_path.py BUNDLE FINGERPRINT
"""
import ctypes
import sys
import types

import numpy as np

import ptxtune

bundle, fp = sys.argv[1], sys.argv[2]
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
    except Exception as e:
        check(False, "%s raised %s: %s" % (what, type(e).__name__, e))
    check(False, "%s raised nothing" % what)


rt = ptxtune.Runtime(bundle, fingerprint=fp, allow_ptx_jit=True, allow_pad=True)
drv = rt.driver()
streams = []


class DType:
    def __init__(self, name, np_dtype):
        self.name, self.np = name, np_dtype

    def __str__(self):
        return "torch." + self.name


float32 = DType("float32", np.float32)
float16 = DType("float16", np.float16)
uint8 = DType("uint8", np.uint8)


class Device:
    def __init__(self, kind, index):
        self.type, self.index = kind, index

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)


class Tensor:
    """A contiguous (or strided) tensor in the fake's device memory."""

    def __init__(self, host, dtype, device=None, stride=None):
        self.host = np.ascontiguousarray(host, dtype=dtype.np)
        self.dtype = dtype
        self.device = device or Device("cuda", 0)
        self.is_cuda = self.device.type == "cuda"
        self.shape = self.host.shape
        self._stride = stride
        self.ptr = drv.alloc(self.host.nbytes)
        drv.upload(self.ptr, self.host.ctypes.data, self.host.nbytes)

    def data_ptr(self):
        return self.ptr

    def numel(self):
        return self.host.size

    def stride(self):
        return self._stride or tuple(s // self.host.itemsize for s in self.host.strides)

    def is_contiguous(self):
        return self._stride is None

    def numpy(self):
        out = np.empty_like(self.host)
        drv.sync()
        drv.download(out.ctypes.data, self.ptr, out.nbytes)
        return out


class Stream:
    cuda_stream = 0  # the default stream


torch = types.ModuleType("torch")
torch.float32, torch.float16, torch.uint8 = float32, float16, uint8
torch.cuda = types.SimpleNamespace(
    current_stream=lambda device=None: streams.append(device) or Stream())
torch.zeros = lambda n, dtype=None, device=None: Tensor(np.zeros(n), dtype or float32, device)
sys.modules["torch"] = torch

softmax = rt.find_class("softmax", dtype="f32")
sel = rt.select(softmax, (40, 256))
rows = sel.dims[0]
rng = np.random.default_rng(5)
xh = np.zeros((rows, 256), np.float32)
xh[:40] = rng.uniform(-2, 2, (40, 256))
x = Tensor(xh, float32)
y = Tensor(np.zeros((rows, 256)), float32)
rt.launch(softmax, (40, 256), x=x, y=y)
check(len(streams) == 1, "launched on torch.cuda.current_stream() of the tensors' device")
ref = np.exp(xh[:40] - xh[:40].max(1, keepdims=True))
ref /= ref.sum(1, keepdims=True)
err = float(np.max(np.abs(y.numpy()[:40] - ref)))
check(err < 1e-5, "softmax on stand-in torch tensors matches numpy (max error %.2g)" % err)

raises(ptxtune.DTypeError, "argument 'in_x'",
       lambda: sel.launch(x=Tensor(xh, float16), y=y), "an f16 tensor for an f32 argument")
raises(ptxtune.ArgumentError, "not contiguous",
       lambda: sel.launch(x=Tensor(xh, float32, stride=(1, rows)), y=y), "a transposed tensor")
raises(ptxtune.ArgumentError, "not a CUDA device",
       lambda: sel.launch(x=Tensor(xh, float32, Device("cpu", None)), y=y), "a CPU tensor")
raises(ptxtune.ArgumentError, "the runtime on cuda:0",
       lambda: sel.launch(x=Tensor(xh, float32, Device("cuda", 1)), y=y), "a tensor on cuda:1")
raises(ptxtune.ArgumentError, "argument 'out_y'",
       lambda: sel.launch(x=x, y=Tensor(np.zeros((40, 256)), float32)),
       "an unpadded output of a padded selection")
raises(ptxtune.ArgumentError, "torch tensors and numpy arrays",
       lambda: sel.launch(x=x, y=np.zeros((rows, 256), np.float32)), "torch and numpy mixed")
rt.close()
print("%d checks passed" % checks)
