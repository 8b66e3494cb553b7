"""kiln.language.extra.cuda.libdevice: NVIDIA's libdevice math library, the functions of
Triton's triton.language.extra.cuda.libdevice with the same names and argument dtypes.

Each function takes tensors or numbers (Python numbers take the dtype the function wants) and
applies element by element, broadcasting its arguments. It picks the libdevice overload of the
arguments' dtypes (``asin`` on fp32 calls ``__nv_asinf``, on fp64 ``__nv_asin``); arguments
that no overload takes are promoted first: fp16/bf16 compute in fp32 with the result rounded
back (Triton rejects them), fp32 with fp64 in fp64, int8/int16 as int32. The rounding-mode
functions (``add_rz``, ``float2int_rd``, ...), conversions and bit casts take exact dtypes only.

On the GPU every call is the libdevice function, linked and inlined into the kernel. The CPU
backend computes the same functions with vector code or the C math library; the few it lacks
(see ``CPU_UNSUPPORTED``) raise a CompilationError naming the function there."""

from ... import core as _core
from ...core import _gen, _t, _wrap, builtin
from .... import _C

# The functions the CPU backend has no version of (they run on the GPU).
CPU_UNSUPPORTED = ("rcp64h",)

_CODES = {"f": "fp32", "d": "fp64", "i": "int32", "u": "uint32", "l": "int64", "L": "uint64"}


def _make(name, overloads, promotes):
    arity = len(overloads[0].split(":")[1])
    sigs = []
    for o in overloads:
        symbol, args, result = o.split(":")
        sigs.append(f"({', '.join(_CODES[c] for c in args)}) -> {_CODES[result]} "
                    f"[{symbol}]")

    @builtin
    def fn(*args):
        if len(args) != arity:
            raise TypeError(f"libdevice.{name} takes {arity} argument"
                            f"{'s' if arity != 1 else ''}, found {len(args)}")
        return _wrap(_gen().session.libdevice(name, [_t(a).handle for a in args]))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"libdevice {name}, element by element. Overloads:\n    " +
                  "\n    ".join(sigs) +
                  ("" if promotes else "\nExact dtypes only (no promotion).") +
                  ("\nGPU only: the CPU backend raises a CompilationError."
                   if name in CPU_UNSUPPORTED else ""))
    fn.__module__ = __name__
    return fn


__all__ = []
for _name, _overloads, _promotes in _C.libdevice_functions():
    globals()[_name] = _make(_name, _overloads, _promotes)
    __all__.append(_name)
del _name, _overloads, _promotes, _core
