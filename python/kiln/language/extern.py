"""kiln.language.core.extern_elementwise: Triton's generic call of an external elementwise
function, for libdevice symbols (``__nv_*``), the one library Kiln links (on the GPU) and knows
(on the CPU backend). kiln.language.extra.cuda.libdevice is written over the same Builder
operation."""

from .core import _dtype, _gen, _t, _unwrap, _wrap, builtin


def extern(fn):
    """Marks a function that calls extern_elementwise as a kiln.language builtin (Triton's
    core.extern): kernels call it with tensors; it runs in Python while the kernel is built."""
    return builtin(fn)


@builtin
def extern_elementwise(lib_name, lib_path, args, arg_type_symbol_dict, is_pure, _semantic=None):
    """Applies the overload of `arg_type_symbol_dict` ({(dtype, ...): (symbol, result dtype)})
    whose argument dtypes are those of `args`, element by element, broadcasting the
    arguments (as Triton; Kiln also promotes arguments no overload takes, as libdevice's
    functions do). `lib_name` and `lib_path` are accepted and ignored: symbols must be
    libdevice's. Call it from an ``@extern`` function (the dict is built in Python, as in
    Triton's libdevice module)."""
    table = _unwrap(arg_type_symbol_dict)
    if not isinstance(table, dict) or not table:
        raise TypeError("extern_elementwise: expected a non-empty dict {(dtype, ...): "
                        "(symbol, dtype)} for arg_type_symbol_dict")
    overloads = []
    for key, value in table.items():
        symbol, result = value
        if not isinstance(symbol, str) or not symbol.startswith("__nv_"):
            raise ValueError(f"extern_elementwise: only libdevice symbols (__nv_*) are supported "
                             f"by Kiln, found {symbol!r}")
        names = [_dtype(k, "extern_elementwise argument dtype").name for k in key]
        overloads.append((names, symbol, _dtype(result, "extern_elementwise result").name))
    handles = [_t(a).handle for a in _unwrap(args)]
    return _wrap(_gen().session.extern_elementwise(handles, overloads, bool(_unwrap(is_pure)),
                                                   "extern_elementwise"))
