"""kiln.language.standard: the functions of kiln.language written over its builtins, as
triton.language.standard holds them: zeros and zeros_like, cdiv, sigmoid, softmax, the
reductions (sum, max, min, argmax, argmin, xor_sum) and scans (cumsum, cumprod), and the names
Triton's standard module has that Kiln does not implement yet (sort, interleave, ravel)."""

import builtins as _py

from .core import (_const_bool, _const_int, _describe, _dtype, _gen, _scan_axis, _shape, _t,
                   _tensor_member_fn, _unsupported, _unwrap, _wrap, builtin, cast, constexpr,
                   reshape, tensor)
from .math import exp, fdiv

__all__ = ["zeros", "zeros_like", "cdiv", "sigmoid", "sum", "max", "min", "argmax", "argmin",
           "xor_sum", "softmax", "cumsum", "cumprod", "sort", "interleave", "ravel"]


# ---------------------------------------------------------------------------------------
# Tile creation
# ---------------------------------------------------------------------------------------

@builtin
def zeros(shape, dtype):
    """A tile of `shape` and `dtype` filled with zeros."""
    return _wrap(_gen().session.zeros(_shape((shape,), "zeros"), _dtype(dtype, "zeros").name))


@builtin
def zeros_like(input):
    """zeros(input.shape, input.dtype)."""
    x = _t(input)
    return zeros([s.value for s in x.shape], x.dtype)


# ---------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------

@builtin
def cdiv(x, div):
    """ceil(x / div) for integers: (x + div - 1) // div. On constexprs, a constexpr."""
    a, b = _unwrap(x), _unwrap(div)
    if not isinstance(x, tensor) and not isinstance(div, tensor):
        return constexpr((a + b - 1) // b)
    return _gen().binary("cdiv", x, div)


@builtin
def sigmoid(x):
    """1 / (1 + exp(-x))."""
    g = _gen()
    return g.binary("truediv", constexpr(1.0),
                    g.binary("add", constexpr(1.0), exp(g.unary("neg", x))))


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------

def _reduction(op, input, axis, keep_dims):
    """`op` along `axis`; axis=None reduces every axis (Triton flattens first)."""
    g = _gen()
    x = _t(input)
    keep = _const_bool(keep_dims, "keep_dims")
    if _unwrap(axis) is not None:
        return _wrap(g.session.reduce_op(op, x.handle, _const_int(axis, f"{op} axis"), keep))
    rank = len(x.shape)
    if rank == 0:
        raise TypeError(f"expected a tile for tl.{op}, found {_describe(x)}")
    if op in ("argmax", "argmin") and rank > 1:
        numel = 1
        for s in x.shape:
            numel *= s.value
        x = reshape(x, [numel])
        r = _wrap(g.session.reduce_op(op, x.handle, 0, False))
        return reshape(r, [1] * rank) if keep else r
    for a in _py.range(rank - 1, -1, -1):
        x = _wrap(g.session.reduce_op(op, x.handle, a, keep))
    return x


@builtin
def sum(input, axis=None, keep_dims=False, dtype=None):
    """Sum along `axis` (every axis when None); narrow integers accumulate in (u)int32.
    `dtype` converts the input first."""
    if _unwrap(dtype) is not None:
        input = cast(input, dtype)
    return _reduction("sum", input, axis, keep_dims)


@builtin
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False):
    """Maximum along `axis`; with return_indices, (values, first indices)."""
    if _const_bool(return_indices, "return_indices"):
        return (_reduction("max", input, axis, keep_dims),
                _reduction("argmax", input, axis, keep_dims))
    return _reduction("max", input, axis, keep_dims)


@builtin
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False):
    """Minimum along `axis`; with return_indices, (values, first indices)."""
    if _const_bool(return_indices, "return_indices"):
        return (_reduction("min", input, axis, keep_dims),
                _reduction("argmin", input, axis, keep_dims))
    return _reduction("min", input, axis, keep_dims)


@builtin
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    """int32 index of the first maximum along `axis`."""
    return _reduction("argmax", input, axis, keep_dims)


@builtin
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    """int32 index of the first minimum along `axis`."""
    return _reduction("argmin", input, axis, keep_dims)


@builtin
def xor_sum(input, axis=None, keep_dims=False):
    """Bitwise xor along `axis` (integers)."""
    return _reduction("xor_sum", input, axis, keep_dims)


@builtin
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    """exp(x - max) / sum(exp(x - max)) along `dim` (0 when None), as Triton's."""
    d = 0 if _unwrap(dim) is None else dim
    z = _gen().binary("sub", x, max(x, d, keep_dims=keep_dims))
    num = exp(z)
    den = sum(num, d, keep_dims=keep_dims)
    return fdiv(num, den, ieee_rounding)


# ---------------------------------------------------------------------------------------
# Scans
# ---------------------------------------------------------------------------------------

@builtin
def cumsum(input, axis=0, reverse=False, dtype=None):
    """Cumulative sum along `axis` (inclusive; from the end with `reverse`). As Triton: bf16
    is summed in fp32 and, unless `dtype` is given, integers narrower than 32 bits in int32
    (uint32 for unsigned ones and int1)."""
    d = "" if _unwrap(dtype) is None else _dtype(dtype, "cumsum dtype").name
    return _wrap(_gen().session.scan_op("cumsum", _t(input).handle,
                                        _scan_axis(input, axis, "cumsum"),
                                        _const_bool(reverse, "reverse"), d))


@builtin
def cumprod(input, axis=0, reverse=False):
    """Cumulative product along `axis` (inclusive; from the end with `reverse`); bf16 is
    multiplied in fp32, other dtypes are kept (as Triton)."""
    return _wrap(_gen().session.scan_op("cumprod", _t(input).handle,
                                        _scan_axis(input, axis, "cumprod"),
                                        _const_bool(reverse, "reverse")))


# ---------------------------------------------------------------------------------------
# Not implemented yet: present, named in the error
# ---------------------------------------------------------------------------------------

sort = _unsupported("sort")
interleave = _unsupported("interleave")
ravel = _unsupported("ravel")


_tensor_member_fn(cdiv, sigmoid, sum, max, min, argmax, argmin, xor_sum, softmax, cumsum,
                  cumprod, sort)
