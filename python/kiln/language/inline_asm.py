"""kiln.language.core.inline_asm_elementwise: Triton's inline assembly over the elements of
tensors. The asm is PTX and runs on the GPU only; the CPU backend rejects it (a
CompilationError at the call). The Builder broadcasts the arguments and checks the
constraints against the registers the values take."""

from .core import _const_bool, _const_int, _const_str, _dtype, _gen, _t, _unwrap, _wrap, builtin


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack, _semantic=None):
    """Runs `asm` over the elements of `args` (broadcast to one shape), `pack` elements per
    invocation, and returns a tensor of `dtype`, or a tuple of tensors when `dtype` is a
    sequence of dtypes. `constraints` names the output registers (``=r``, ...), result by
    result, then the input registers, argument by argument: a value of fewer than 32 bits
    with `pack` > 1 shares each register among min(32 / bits, pack) elements, any other
    value takes one register per element. `is_pure` lets the compiler remove or move the
    asm."""
    asm = _const_str(asm, "inline_asm_elementwise asm")
    constraints = _const_str(constraints, "inline_asm_elementwise constraints")
    pure = _const_bool(is_pure, "inline_asm_elementwise is_pure")
    pack = _const_int(pack, "inline_asm_elementwise pack")
    items = _unwrap(args)
    if not isinstance(items, (list, tuple)):
        items = [items]
    types = _unwrap(dtype)
    several = isinstance(types, (list, tuple))
    types = [_dtype(d, "inline_asm_elementwise dtype") for d in (types if several else [types])]
    handles = [_t(a).handle for a in items]
    out = _gen().session.inline_asm_elementwise(asm, constraints, handles,
                                                [d.name for d in types], pure, pack)
    results = tuple(_wrap(h) for h in out)
    return results if several else results[0]
