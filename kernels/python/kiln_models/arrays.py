"""kiln_models.arrays: the one small array interface the model uses, over numpy arrays on the
CPU backend and kiln.DeviceArray on the GPU.

The model allocates everything through an Arrays object once (weights, KV cache, activation
buffers), copies host inputs into those fixed buffers, takes row views (`rows(a, n)`: the first
n rows, sharing the buffer, at a fixed address) and downloads results. The allocator counts the
bytes it handed out (current and peak), which is the model's device memory.
"""

import numpy as np

from .checkpoint import np_dtype

__all__ = ["Arrays", "dtype_name"]

_NAMES = {"fp32": "float32", "float32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16",
          "fp16": "float16", "float16": "float16", "int32": "int32", "int8": "int8",
          "uint8": "uint8"}


def dtype_name(dtype):
    """The numpy-style name of a dtype given as "fp32"/"bf16"/"fp16"/"int32", a long name or a
    numpy dtype."""
    key = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if key not in _NAMES:
        raise ValueError(f"unsupported dtype '{dtype}': expected fp32, bf16, fp16, int32, int8 "
                         f"or uint8")
    return _NAMES[key]


def _host_dtype(name):
    return np.dtype(name) if name in ("int32", "int8", "uint8") else np_dtype(name)


class Arrays:
    """Allocation, copies and views on one device: "cpu" (numpy arrays, kernels on the CPU
    backend) or "gpu" (kiln.DeviceArray on the current GPU). `launch_device` is what the ops
    take as device=. On the GPU, copies in and out are ordered on `stream` (a kiln.Stream or
    None: the legacy default stream), the stream the model launches on."""

    def __init__(self, device="cpu", stream=None):
        if device not in ("cpu", "gpu"):
            raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
        self.device = device
        self.launch_device = "cpu" if device == "cpu" else None
        self.allocated = self.peak = 0
        if device == "gpu":
            import kiln
            if not kiln.has_gpu():
                raise RuntimeError("device='gpu' but no GPU is available (no CUDA driver or "
                                   "device); use device='cpu'")
            self._kiln = kiln
        self.stream = stream
        self._handle = int(getattr(stream, "handle", stream) or 0)

    def _count(self, nbytes):
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)

    def empty(self, shape, dtype):
        """An uninitialized array of `shape` and `dtype` ("fp32", "bf16", "fp16", "int32")."""
        name = dtype_name(dtype)
        shape = tuple(int(s) for s in shape)
        if self.device == "cpu":
            a = np.empty(shape, _host_dtype(name))
        else:
            a = self._kiln.empty(shape, name)
        self._count(a.nbytes)
        return a

    def zeros(self, shape, dtype):
        a = self.empty(shape, dtype)
        if self.device == "cpu":
            a.fill(0)
        else:
            self.copy_in(a, np.zeros(a.shape, _host_dtype(dtype_name(dtype))))
        return a

    def upload(self, host, dtype=None):
        """A new array holding numpy array `host` (cast to `dtype` when given)."""
        host = np.asarray(host)
        name = dtype_name(dtype if dtype is not None else host.dtype)
        if self.device == "cpu":
            a = host.astype(_host_dtype(name), order="C", copy=True)  # owns its memory
        else:
            host = np.ascontiguousarray(host.astype(_host_dtype(name), copy=False))
            bits = host.view(np.uint16) if name == "bfloat16" else host
            a = self._kiln.DeviceArray.from_host(bits, name, -1)
        self._count(a.nbytes)
        return a

    def copy_in(self, dst, host):
        """Copies numpy array `host` into the existing array `dst` (same number of elements),
        keeping dst's address: how per-step inputs reach a fixed buffer."""
        host = np.ascontiguousarray(np.asarray(host).astype(self.host_dtype(dst), copy=False))
        if host.size != self.numel(dst):
            raise ValueError(f"copy_in: {host.size} elements into an array of "
                             f"{self.numel(dst)} ({tuple(dst.shape)})")
        if self.device == "cpu":
            dst.reshape(-1)[...] = host.reshape(-1)
        else:
            dst.copy_from_host(host.view(np.uint16) if self.dtype(dst) == "bfloat16" else host,
                               self._handle)

    def copy(self, dst, src):
        """Copies device array `src` into `dst` (same shape and dtype) on the model's stream,
        without waiting: a value the device computed (the chosen tokens) becomes another
        step's input or part of a history with no trip through the host."""
        if self.device == "cpu":
            dst[...] = src
        else:
            dst.copy_(src, stream=self._handle)

    def download(self, a):
        """A numpy copy of `a` (bf16 as ml_dtypes.bfloat16)."""
        if self.device == "cpu":
            return np.array(a)
        name = self.dtype(a)
        if name == "bfloat16":
            bits = np.empty(tuple(a.shape), np.uint16)
            a.copy_to_host(bits, self._handle)
            return bits.view(_host_dtype(name))
        out = np.empty(tuple(a.shape), _host_dtype(name))
        a.copy_to_host(out, self._handle)  # pageable memory: returns when the copy is done
        return out

    def rows(self, a, stop, start=0):
        """Rows start..stop of `a` as a view sharing its buffer (contiguous)."""
        if self.device == "cpu":
            return a[start:stop]
        try:
            return a[start:stop]
        except TypeError:
            raise NotImplementedError(
                "kiln.DeviceArray has no row views (a[i:j]) in this build; the model needs "
                "them on the GPU") from None

    def reshape(self, a, shape):
        """A view of contiguous `a` with another shape."""
        return a.reshape(tuple(int(d) for d in shape))

    def dtype(self, a):
        return a.dtype.name if isinstance(a, np.ndarray) else a.dtype_name

    def host_dtype(self, a):
        return _host_dtype(self.dtype(a))

    def numel(self, a):
        return int(np.prod(a.shape, dtype=np.int64))

    def synchronize(self):
        if self.device == "gpu":
            if hasattr(self.stream, "synchronize"):
                self.stream.synchronize()
            else:
                self._kiln.synchronize()
