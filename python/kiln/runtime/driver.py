"""kiln.runtime.driver: the device side of the runtime as Python sees it: Kiln's small device
array (kiln.DeviceArray, kiln.empty, kiln.zeros, kiln.from_numpy, .numpy()), the devices
(kiln.has_gpu, device_count, current_device, synchronize) and host helpers (kiln.cdiv,
next_power_of_2).

The array type is kiln._C.DeviceArray (device memory owned through kiln::rt::DeviceBuffer);
kernels read its pointer and dtype in C++. This module adds the numpy-facing methods.
numpy is imported only when an array crosses to the host.
"""

from .. import _C

__all__ = ["DeviceArray", "empty", "zeros", "from_numpy", "has_gpu", "device_count",
           "current_device", "synchronize", "cdiv", "next_power_of_2"]

DeviceArray = _C.DeviceArray

_NAMES = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
          "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
          "float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
          "float64": "float64",
          # kiln.language dtype names
          "int1": "bool", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
          "fp64": "float64"}
_TYPESTR = {"bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
            "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
            "float16": "<f2", "float32": "<f4", "float64": "<f8"}


def _dtype_name(dtype):
    """The numpy name of `dtype`: a string, a numpy dtype, a kiln.language dtype, a torch
    dtype."""
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        name = str(dtype)
    name = str(name).replace("torch.", "")
    if name not in _NAMES:
        raise TypeError(f"kiln: unsupported dtype {dtype!r}")
    return _NAMES[name]


def _shape(shape):
    if isinstance(shape, int):
        return [shape]
    return [int(s) for s in shape]


def _device_index(device):
    """The ordinal a device= argument names: None (the current device: -1 for the C++ side),
    an int, "cuda", "cuda:N", or a torch.device / object with .type and .index."""
    if device is None:
        return -1
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if kind is None and isinstance(device, str):
        kind, _, rest = device.partition(":")
        index = int(rest) if rest.isdigit() else None
    if kind not in ("cuda", "gpu"):
        raise ValueError(f"kiln: device={device!r}: expected a GPU index, 'cuda' or 'cuda:N'")
    return -1 if index is None else int(index)


def empty(shape, dtype="float32", device=None):
    """An uninitialized device array on `device` (an index or "cuda:N"; None: the current
    device)."""
    return DeviceArray.empty(_shape(shape), _dtype_name(dtype), _device_index(device))


def zeros(shape, dtype="float32", device=None):
    """A device array of zeros."""
    a = empty(shape, dtype, device)
    if a.nbytes % 4 == 0:
        a.fill32(0)
    else:
        import numpy as np
        a.copy_from_host(np.zeros(a.shape, dtype=_np_dtype(a.dtype_name)))
    return a


def _np_dtype(name):
    import numpy as np
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError("numpy has no bfloat16: install ml_dtypes, or read bfloat16 arrays "
                            "through torch or as uint16 bits (a.view('uint16'))") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _bits(a):
    """`a` as the buffer protocol can pass it: 2-byte floats numpy's buffer export does not
    name (ml_dtypes' bfloat16) as their uint16 bits."""
    import numpy as np
    if a.dtype.name == "bfloat16":
        return a.view(np.uint16)
    return a


def from_numpy(array, device=None):
    """A device copy of a numpy array (made C-contiguous) on `device` (None: the current
    device); ml_dtypes' bfloat16 arrays become bfloat16 device arrays."""
    import numpy as np
    a = np.ascontiguousarray(array)
    return DeviceArray.from_host(_bits(a), _dtype_name(a.dtype.name), _device_index(device))


def _numpy(self):
    """A host copy as a numpy array (bfloat16 as ml_dtypes.bfloat16)."""
    import numpy as np
    out = np.empty(self.shape, dtype=_np_dtype(self.dtype_name))
    self.copy_to_host(_bits(out))
    return out


def _strides(self):
    """Byte strides of the (C-contiguous) array, as numpy's."""
    out, step = [], self.itemsize
    for d in reversed(self.shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _cai(self):
    if self.dtype_name not in _TYPESTR:
        raise AttributeError("no __cuda_array_interface__ typestr for " + self.dtype_name)
    return {"shape": self.shape, "typestr": _TYPESTR[self.dtype_name],
            "data": (self.data_ptr(), False), "version": 3, "strides": None}


def _repr(self):
    return (f"kiln.DeviceArray(shape={self.shape}, dtype={self.dtype_name}, "
            f"device='cuda:{self.device}')")


DeviceArray.numpy = _numpy
DeviceArray.strides = property(_strides)
DeviceArray.__cuda_array_interface__ = property(_cai)
DeviceArray.__repr__ = _repr
DeviceArray.dtype = property(lambda self: self.dtype_name)
DeviceArray.size = property(lambda self: self.numel())
DeviceArray.ndim = property(lambda self: len(self.shape))
DeviceArray.__len__ = lambda self: self.shape[0] if self.shape else 0


def _reshape(self, *shape):
    """A view of the same memory with another shape (-1 once: inferred), as numpy's."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    shape = [int(d) for d in shape]
    n = self.numel()
    if shape.count(-1) > 1:
        raise ValueError("kiln.DeviceArray.reshape: only one dimension can be -1")
    if -1 in shape:
        known = 1
        for d in shape:
            known *= d if d != -1 else 1
        if known == 0 or n % known:
            raise ValueError(f"kiln.DeviceArray.reshape: cannot reshape {self.shape} to "
                             f"{tuple(shape)}")
        shape[shape.index(-1)] = n // known
    total = 1
    for d in shape:
        total *= d
    if total != n:
        raise ValueError(f"kiln.DeviceArray.reshape: cannot reshape {self.shape} "
                         f"({n} elements) to {tuple(shape)}")
    return self._view(0, shape, self.dtype_name)


def _getitem(self, key):
    """a[i] and a[i:j] on the first dimension: views sharing the memory (contiguous)."""
    if not self.shape:
        raise IndexError("kiln.DeviceArray: a 0-d array cannot be indexed")
    rows, rest = self.shape[0], list(self.shape[1:])
    row_bytes = self.itemsize
    for d in rest:
        row_bytes *= d
    if isinstance(key, slice):
        start, stop, step = key.indices(rows)
        if step != 1:
            raise IndexError("kiln.DeviceArray: only contiguous slices (step 1) are views")
        stop = max(stop, start)
        return self._view(start * row_bytes, [stop - start] + rest, self.dtype_name)
    if isinstance(key, int) or hasattr(key, "__index__"):
        i = int(key)
        if i < -rows or i >= rows:
            raise IndexError(f"kiln.DeviceArray: index {i} is out of bounds for a first "
                             f"dimension of {rows}")
        i %= rows
        return self._view(i * row_bytes, rest, self.dtype_name)
    raise IndexError("kiln.DeviceArray: index the first dimension with an int or a slice "
                     f"(views), found {type(key).__name__}")


def _as_dtype(self, dtype):
    """The same bytes read as `dtype` (numpy's a.view(dtype)): the last dimension scales by
    the ratio of item sizes."""
    name = _dtype_name(dtype)
    size = DeviceArray._itemsize_of(name)
    shape = list(self.shape) or [1]
    last_bytes = shape[-1] * self.itemsize
    if last_bytes % size:
        raise ValueError(f"kiln.DeviceArray.view: a last dimension of {last_bytes} bytes does "
                         f"not hold whole {name} items")
    shape[-1] = last_bytes // size
    return self._view(0, shape, name)


def _copy_(self, src, stream=None):
    """Copies `src` (a kiln.DeviceArray of the same byte size: device to device; else a host
    array) into this array, on `stream` when given (an int handle or a kiln.Stream)."""
    s = _stream_handle(stream)
    if isinstance(src, DeviceArray):
        self.copy_from_device(src, s)
    else:
        import numpy as np
        host = src.numpy() if hasattr(src, "numpy") and not isinstance(src, np.ndarray) else src
        self.copy_from_host(_bits(np.ascontiguousarray(host)), s)
    return self


def _fill_(self, value, stream=None):
    """Sets every element to `value` (on `stream` when given): any value for 4-byte dtypes,
    zero for every dtype."""
    import numpy as np
    if self.itemsize == 4:
        np_name = {"float32": "float32", "int32": "int32", "uint32": "uint32"}[self.dtype_name]
        bits = int(np.array([value], dtype=np_name).view(np.uint32)[0])
        self.fill32(bits, _stream_handle(stream))
    elif value == 0 and self.nbytes % 4 == 0:
        self.fill32(0, _stream_handle(stream))
    else:
        host = np.full(self.shape, value, dtype=_np_dtype(self.dtype_name))
        self.copy_from_host(_bits(host), _stream_handle(stream))
    return self


def _stream_handle(stream):
    if stream is None:
        return 0
    return int(getattr(stream, "handle", stream))


DeviceArray.reshape = _reshape
DeviceArray.__getitem__ = _getitem
DeviceArray.view = _as_dtype
DeviceArray.copy_ = _copy_
DeviceArray.fill_ = _fill_
DeviceArray.zero_ = lambda self, stream=None: _fill_(self, 0, stream)
DeviceArray._itemsize_of = staticmethod(lambda name: {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}[name])


def has_gpu():
    """True when a CUDA driver and a device are present (never raises)."""
    return _C.has_gpu()


def _device_of(values):
    """The CUDA device of the first tensor among `values` that names one (torch tensors,
    kiln arrays, __cuda_array_interface__, DLPack, tensor descriptors), else None. The
    launcher finds a launch's device in C++; this serves the autotuner's timing."""
    for v in values:
        v = getattr(v, "base", v) if hasattr(v, "block_shape") else v
        get_device = getattr(v, "get_device", None)
        if get_device is not None and type(v).__module__.startswith("torch"):
            d = get_device()
            if d >= 0:
                return d
        elif isinstance(v, DeviceArray):
            return v.device
        elif hasattr(v, "__cuda_array_interface__"):
            d = _C.pointer_device(v.__cuda_array_interface__["data"][0])
            if d >= 0:
                return d
        elif hasattr(v, "__dlpack_device__"):
            kind, index = v.__dlpack_device__()
            if kind == 2:  # kDLCUDA
                return int(index)
    return None


class _OnDevice:
    """with _OnDevice(d): device d is current inside (None: unchanged); restored after."""

    def __init__(self, device):
        self.device, self.previous = device, None

    def __enter__(self):
        if self.device is not None and _C.has_gpu():
            self.previous = _C.current_device()
            if self.previous != self.device:
                _C.set_device(self.device)
        return self

    def __exit__(self, *exc):
        if self.previous is not None and self.previous != self.device:
            _C.set_device(self.previous)
        return False


def device_count():
    """The number of CUDA devices (0 without a driver or a GPU; never raises)."""
    return _C.device_count()


def current_device():
    """The device a launch without tensor arguments runs on: the one current on this thread
    (torch.cuda.set_device, cupy.cuda.Device, ... set it), else 0."""
    return _C.current_device()


def synchronize(device=None):
    """Waits for all work on `device` (None: the current device)."""
    _C.synchronize(_device_index(device))


def cdiv(x, y):
    """ceil(x / y) for host integers (triton.cdiv)."""
    return (x + y - 1) // y


def next_power_of_2(n):
    """The smallest power of two >= n (triton.next_power_of_2)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


# ---------------------------------------------------------------------------------------
# kiln.runtime.driver.active: Triton's `triton.runtime.driver.active`
# ---------------------------------------------------------------------------------------

class GPUTarget:
    """What triton.runtime.driver.active.get_current_target() returns: ``backend`` ("cuda",
    or "cpu" for Kiln's host backend), ``arch`` (the compute capability as an int, 90 for
    sm_90a; "cpu" on the host backend) and ``warp_size``."""

    __slots__ = ("backend", "arch", "warp_size")

    def __init__(self, backend, arch, warp_size):
        self.backend, self.arch, self.warp_size = backend, arch, warp_size

    def __eq__(self, other):
        return isinstance(other, GPUTarget) and (self.backend, self.arch, self.warp_size) == \
            (other.backend, other.arch, other.warp_size)

    def __hash__(self):
        return hash((self.backend, self.arch, self.warp_size))

    def __repr__(self):
        return f"GPUTarget(backend={self.backend!r}, arch={self.arch!r}, " \
               f"warp_size={self.warp_size})"


# CUdevice_attribute values (cuda.h) behind Triton's get_device_properties keys.
_DEVICE_ATTRIBUTES = {"max_shared_mem": 97,  # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
                      "max_num_regs": 12,  # MAX_REGISTERS_PER_BLOCK
                      "multiprocessor_count": 16, "warpSize": 10, "sm_clock_rate": 13,
                      "mem_clock_rate": 36, "mem_bus_width": 37}


class _DriverUtils:
    """driver.active.utils: get_device_properties(device) as Triton's CUDA driver returns it."""

    @staticmethod
    def get_device_properties(device):
        """A dict of max_shared_mem (opt-in bytes per block), max_num_regs (per block),
        multiprocessor_count, warpSize, sm_clock_rate and mem_clock_rate (kHz), mem_bus_width
        (bits) of GPU `device` (an index or None: the current one). Without a GPU: the host
        backend's view (the CPU's cores as multiprocessors, warpSize 1), as Triton's CPU
        drivers report it."""
        if not _C.has_gpu():
            import os as _os
            return {"max_shared_mem": 1 << 20, "max_num_regs": 0,
                    "multiprocessor_count": _os.cpu_count() or 1, "warpSize": 1,
                    "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}
        ordinal = _C.current_device() if device is None else int(getattr(device, "index",
                                                                         device) or 0)
        return {k: _C.device_attribute(ordinal, a) for k, a in _DEVICE_ATTRIBUTES.items()}


class ActiveDriver:
    """triton.runtime.driver.active for Kiln: the CUDA driver when there is a GPU, else the
    host backend ("cpu"), on which kernels take CPU tensors and numpy arrays."""

    utils = _DriverUtils()

    @staticmethod
    def is_active():
        return True

    @staticmethod
    def get_current_device():
        """The index of the current GPU (0 on the host backend)."""
        return _C.current_device() if _C.has_gpu() else 0

    @staticmethod
    def set_current_device(device):
        _C.set_device(int(device))

    @staticmethod
    def get_current_stream(device=None):
        """The stream launches use: torch's current stream of `device` when torch is loaded,
        else the default stream (0)."""
        import sys as _sys
        torch = _sys.modules.get("torch")
        if torch is None or not _C.has_gpu():
            return 0
        d = ActiveDriver.get_current_device() if device is None else device
        return torch.cuda.current_stream(d).cuda_stream

    @staticmethod
    def get_current_target():
        """GPUTarget("cuda", 90, 32) on an H100 (the capability as an int, as Triton's);
        GPUTarget("cpu", "cpu", 1) without a GPU."""
        if not _C.has_gpu():
            return GPUTarget("cpu", "cpu", 1)
        arch = _C.get_arch(ActiveDriver.get_current_device())  # "sm_90a"
        return GPUTarget("cuda", int("".join(c for c in arch[3:] if c.isdigit())), 32)

    @staticmethod
    def get_active_torch_device():
        """torch.device("cuda", i) for the current GPU i (equal to a tensor's .device made on
        it), torch.device("cpu") on the host backend."""
        import torch
        if not _C.has_gpu():
            return torch.device("cpu")
        return torch.device("cuda", ActiveDriver.get_current_device())

    @staticmethod
    def get_device_interface():
        import torch
        return torch.cuda


active = ActiveDriver()
