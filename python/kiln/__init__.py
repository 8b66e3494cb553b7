"""Kiln: a block-based GPU kernel DSL and JIT compiler, compatible with Triton's language.

    import kiln
    import kiln.language as tl

    @kiln.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) +
                 tl.load(y_ptr + offs, mask=mask), mask=mask)

    add_kernel[(kiln.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
"""

from . import _C
from .errors import CompilationError, KilnError
from .runtime.jit import CompiledKernel, JITFunction, compile, jit
from .runtime.driver import (DeviceArray, cdiv, current_device, device_count, empty, from_numpy,
                             has_gpu, next_power_of_2, synchronize, zeros)
from .runtime.autotuner import AutotuneError, Autotuner, Config, autotune
from .runtime.heuristics import Heuristics, heuristics
from .runtime.graphs import (CUDAGraph, Stream, graph, max_memory_allocated, memory_allocated,
                             reset_peak_memory_stats)
from .tensor_descriptor import TensorDescriptor
from . import knobs, language, runtime, testing, tools
from .language.values import constexpr_function  # Triton's triton.constexpr_function too

__version__ = _C.version()

_allocator = None


def set_allocator(allocator):
    """Triton's `set_allocator`: `allocator(size, alignment, stream)` returns a buffer for the
    global scratch a launch needs (Triton: the tensor maps of `tl.make_tensor_descriptor`).
    Kiln's kernels need none (a descriptor made in a kernel addresses its blocks with the
    base, shape and strides it was made from), so the allocator is kept, checked to be
    callable, and not called; Triton code that sets one runs unchanged."""
    global _allocator
    if allocator is not None and not callable(allocator):
        raise TypeError(f"kiln.set_allocator expects a callable (size, alignment, stream) -> "
                        f"buffer or None, found {type(allocator).__name__}")
    _allocator = allocator

__all__ = ["jit", "JITFunction", "compile", "CompiledKernel", "CompilationError", "KilnError",
           "DeviceArray", "empty", "zeros", "from_numpy", "has_gpu", "device_count",
           "current_device", "synchronize", "cdiv",
           "next_power_of_2", "language", "testing", "autotune", "Config", "Autotuner",
           "AutotuneError", "TensorDescriptor", "set_allocator", "heuristics", "Heuristics",
           "runtime", "tools", "Stream", "CUDAGraph", "graph", "memory_allocated",
           "max_memory_allocated", "reset_peak_memory_stats", "constexpr_function", "knobs"]
