"""Shared host-side helpers of the dense ops: reading an array's shape and dtype whatever its
kind (numpy array, kiln.DeviceArray, torch tensor), argument checks that raise a ValueError or
TypeError naming the op and the argument, and the backend a launch takes.

Nothing here allocates or synchronizes: the checks read only shapes, dtypes and flags.
"""
import contextlib
import os
import threading

import numpy as np

#: The activation dtypes every dense op takes (all math is fp32 inside the kernels).
FLOAT_DTYPES = ("float32", "bfloat16", "float16")


def dtype_name(a):
    """The dtype of `a` as a numpy-style name ("float32", "bfloat16", "int32", ...)."""
    if isinstance(a, np.ndarray):
        return a.dtype.name
    name = getattr(a, "dtype_name", None)  # kiln.DeviceArray
    if name is not None:
        return name
    dt = getattr(a, "dtype", None)
    if dt is None:
        raise TypeError(f"expected an array, found {type(a).__name__}")
    return str(dt).replace("torch.", "")


def is_contiguous(a):
    if isinstance(a, np.ndarray):
        return a.flags.c_contiguous
    fn = getattr(a, "is_contiguous", None)  # torch
    return fn() if callable(fn) else True  # kiln.DeviceArray is always contiguous


def check_array(op, name, a, shape, dtypes):
    """Checks that argument `name` of `op` is a contiguous array of `shape` (a tuple whose
    None entries take any size) and of one of `dtypes`; returns its shape."""
    if a is None or not hasattr(a, "shape"):
        raise TypeError(f"{op}: expected '{name}' to be an array (numpy, kiln.DeviceArray or "
                        f"torch tensor), found {type(a).__name__}")
    got = tuple(int(s) for s in a.shape)
    if len(got) != len(shape) or any(e is not None and e != g for e, g in zip(shape, got)):
        want = ", ".join("*" if e is None else str(e) for e in shape)
        raise ValueError(f"{op}: expected '{name}' of shape [{want}], found {list(got)}")
    dt = dtype_name(a)
    if dt not in dtypes:
        raise TypeError(f"{op}: expected '{name}' of dtype {' or '.join(dtypes)}, found {dt}")
    if not is_contiguous(a):
        raise ValueError(f"{op}: expected '{name}' to be contiguous (row-major), found strides "
                         f"{tuple(getattr(a, 'strides', ()))}")
    return got


def check_same_dtype(op, arrays):
    """Checks that the named arrays (a dict name -> array) share one dtype."""
    names = {n: dtype_name(a) for n, a in arrays.items()}
    if len(set(names.values())) > 1:
        found = ", ".join(f"'{n}' {d}" for n, d in names.items())
        raise TypeError(f"{op}: expected one activation dtype, found {found}")


def check_positive_int(op, name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{op}: expected '{name}' to be a non-negative int, found {v!r}")
    return int(v)


def check_float(op, name, v, lo=None, hi=None, lo_open=False):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise TypeError(f"{op}: expected '{name}' to be a float, found {type(v).__name__}")
    v = float(v)
    if v != v or (lo is not None and (v < lo or (lo_open and v == lo))) or \
            (hi is not None and v > hi):
        lo_s = "(" if lo_open else "["
        raise ValueError(f"{op}: expected '{name}' in {lo_s}{lo}, {hi}], found {v}")
    return v


def launch_device(device, *arrays):
    """The `device=` of a launch: "cpu" when asked or when the arrays are numpy arrays (the
    CPU backend), else None (Kiln's choice: the GPU of the arrays)."""
    if device is not None:
        if device not in ("cpu", "gpu"):
            raise ValueError(f"expected device None, 'cpu' or 'gpu', found {device!r}")
        return device
    if any(isinstance(a, np.ndarray) for a in arrays):
        return "cpu"
    return None


def on_cpu(device):
    return device == "cpu"


def next_power_of_2(n):
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


#: Programmatic dependent launch (PDL) of the kernels that support it: KILN_MODELS_PDL=0 turns
#: it off. Such a kernel is launched with Triton's `launch_pdl=True` and starts while the
#: kernel before it on the stream finishes: it issues the loads that need nothing from earlier
#: kernels (weights, norm scales, the host-written step inputs), then `gdc_wait()` (waits for
#: the previous kernel to complete and its writes to be visible), then
#: `gdc_launch_dependents()`, then everything else. Waiting before releasing keeps the chain
#: safe: a kernel's body runs only after every earlier kernel has completed, so no read or
#: write of activations can overtake one (a kernel launched without PDL waits as usual).
#: Only launches inside `dependent_launches()` use it: a kernel's early loads must not read
#: what the kernel just before it writes, which holds for the model's steps (weights and
#: cache are written kernels earlier) but not for any caller's sequence of ops.
PDL_ENV = "KILN_MODELS_PDL"
_pdl_arch = {}
_pdl_scope = threading.local()


@contextlib.contextmanager
def dependent_launches(enabled=True):
    """Within it (on this thread) the ops that support it launch with PDL (see PDL_ENV)."""
    before = getattr(_pdl_scope, "on", False)
    _pdl_scope.on = bool(enabled)
    try:
        yield
    finally:
        _pdl_scope.on = before


def pdl_supported():
    """Whether launches use programmatic dependent launch now: inside dependent_launches(), on a
    GPU that has it (sm_90 and later), unless KILN_MODELS_PDL=0."""
    if not getattr(_pdl_scope, "on", False) or os.environ.get(PDL_ENV, "1") == "0":
        return False
    import kiln
    try:
        drv = kiln.runtime.driver.active
        dev = drv.get_current_device()
        if dev not in _pdl_arch:
            target = drv.get_current_target()
            _pdl_arch[dev] = target.backend == "cuda" and int(target.arch) >= 90
        return _pdl_arch[dev]
    except Exception:  # no driver: nothing to launch on
        return False


def launch_opts(device, stream, pdl=False):
    """Launch keyword arguments: the backend and the stream (GPU only); `pdl`: the kernel waits
    with gdc_wait() before touching earlier kernels' outputs, so it may be launched with
    programmatic dependent launch (done where the GPU has it, see PDL_ENV)."""
    opts = {}
    if device is not None:
        opts["device"] = device
    if device != "cpu":
        if stream is not None:
            opts["stream"] = int(stream)
        if pdl and pdl_supported():
            opts["launch_pdl"] = True
    return opts
