"""kiln.language: Triton's language (triton.language, Triton 3.x) for Kiln kernels.

``import kiln.language as tl`` gives the same names, signatures and defaults as Triton for
what Kiln implements. Each builtin forwards to one ``kiln::Builder`` operation through the
front-end session; the semantics (promotion, broadcasting, checks) live in C++. Triton's fp8
types without a format on sm_90 or the CPU (float8e4b15, float8e4b8, float8e5b16) exist as
dtypes; any use that needs their values is a CompilationError naming them.

As in Triton, the names live in ``core`` (dtypes, constexpr, tensor and the builtins),
``math`` (the math functions), ``standard`` (reductions, scans, softmax, cdiv, zeros,
... written over the builtins), ``shapes`` (join, split, cat, flip, sort, topk, histogram,
gather, bitonic_merge, squeeze, unsqueeze, ...), ``values`` (tuple, slice, const,
constexpr_type, condition, constexpr_function, to_tensor, add/sub/mul, the tensor descriptor
functions, TRITON_MAX_TENSOR_NUMEL), ``target_info`` and ``random`` (Philox random numbers:
rand, randn, randint, ...); this package gathers them.
"""

from . import core  # noqa: F401
from .core import (  # noqa: F401
    PropagateNan, arange, assume, associative_scan, atomic_add, atomic_and, atomic_cas,
    atomic_max, atomic_min, atomic_or, atomic_xchg, atomic_xor, bfloat16, block_type,
    broadcast, broadcast_to, builtin, cast, clamp, constexpr, debug_barrier, device_assert,
    device_print, dot, dot_scaled, dtype, expand_dims, float16, float32, float64, float8e4nv,
    float8e5, float8e4b15, float8e4b8, float8e5b16, full, inline_asm_elementwise, int1, int8,
    int16, int32, int64,
    load, make_tensor_descriptor, map_elementwise, max_constancy, max_contiguous, maximum,
    minimum, multiple_of, num_programs, permute, pi32_t, pointer_type, program_id, range,
    reshape, static_assert, static_print, static_range, store, str_to_ty,
    tensor, tensor_descriptor, trans, uint8, uint16, uint32, uint64, view, void, where)
from .block_ptr import advance, block_pointer, make_block_ptr  # noqa: F401
from . import math  # noqa: F401
from .math import (  # noqa: F401
    abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2, rsqrt, sin, sqrt,
    sqrt_rn, umulhi)
from . import standard  # noqa: F401
from .standard import (  # noqa: F401
    argmax, argmin, cdiv, cumprod, cumsum, max, min, ravel, reduce, reduce_or,
    sigmoid, softmax, sum, swizzle2d, xor_sum, zeros, zeros_like)
from . import extra  # noqa: F401  (tl.extra.cuda.libdevice)
from . import shapes  # noqa: F401
from .shapes import (  # noqa: F401
    bitonic_merge, cat, flip, gather, histogram, interleave, join, sort, split, squeeze, topk,
    unsqueeze)
from . import values  # noqa: F401
from .values import (  # noqa: F401
    TRITON_MAX_TENSOR_NUMEL, add, condition, const, constexpr_function, constexpr_type,
    load_tensor_descriptor, mul, slice, store_tensor_descriptor, sub, to_tensor, tuple)
from . import target_info  # noqa: F401

__all__ = [
    "program_id", "num_programs", "arange", "full", "zeros", "zeros_like", "load", "store",
    "where", "minimum", "maximum", "clamp", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
    "sin", "cos", "erf", "floor", "ceil", "abs", "fdiv", "cdiv", "sigmoid", "expand_dims",
    "broadcast_to", "broadcast", "reshape", "view", "trans", "permute", "cast",
    "multiple_of", "max_contiguous", "max_constancy", "static_range", "range", "sum", "max",
    "min", "argmax", "argmin", "xor_sum", "reduce_or", "reduce", "softmax", "associative_scan",
    "cumsum", "cumprod", "dot", "dot_scaled", "map_elementwise", "tensor_descriptor", "fma",
    "umulhi", "div_rn", "sqrt_rn",
    "assume", "debug_barrier", "swizzle2d", "ravel", "join", "split", "interleave", "cat",
    "flip", "sort", "topk", "histogram", "gather", "bitonic_merge", "squeeze", "unsqueeze",
    "TRITON_MAX_TENSOR_NUMEL", "add", "sub", "mul", "condition", "const", "constexpr_function",
    "constexpr_type", "load_tensor_descriptor", "store_tensor_descriptor", "slice", "tuple",
    "to_tensor", "target_info",
    "static_assert", "static_print", "device_print", "device_assert", "constexpr", "dtype",
    "pointer_type", "block_type", "tensor", "PropagateNan", "int1", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16", "float32",
    "float64", "float8e4nv", "float8e5", "float8e4b15", "float8e4b8", "float8e5b16", "void",
    "pi32_t",
    "philox", "philox_impl", "randint", "randint4x", "rand", "randn", "rand4x", "randn4x",
    "uint_to_uniform_float", "pair_uniform_to_normal",
]

# kiln.language.random is written in @kiln.jit functions, and kiln.runtime.jit (where @kiln.jit
# lives) imports this package: the module is imported when one of its names is first asked
# for (PEP 562), by then the runtime is complete. Its names then become attributes here.
_RANDOM = ("philox", "philox_impl", "randint", "randint4x", "rand", "randn", "rand4x",
           "randn4x", "uint_to_uniform_float", "pair_uniform_to_normal")


def __getattr__(name):
    if name == "random" or name in _RANDOM:
        import importlib
        random = importlib.import_module(__name__ + ".random")
        globals().update({n: getattr(random, n) for n in _RANDOM})
        return random if name == "random" else getattr(random, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_RANDOM) | {"random"})
