"""kiln.language.standard: the functions of kiln.language written over its builtins, as
triton.language.standard holds them: zeros and zeros_like, cdiv, sigmoid, softmax, swizzle2d,
ravel, the reductions (reduce, sum, max, min, argmax, argmin, xor_sum, reduce_or) and scans
(cumsum, cumprod). Triton's sort, topk, flip and interleave are in kiln.language.shapes."""

import builtins as _py

from .core import (_const_bool, _const_int, _describe, _dtype, _gen, _scan_axis, _shape, _t,
                   _tensor_member_fn, _unwrap, _wrap, builtin, cast, constexpr,
                   reshape, tensor)
from .math import exp, fdiv
from .values import constexpr_function

__all__ = ["zeros", "zeros_like", "cdiv", "sigmoid", "swizzle2d", "ravel", "reduce", "sum",
           "max", "min", "argmax", "argmin", "xor_sum", "reduce_or", "softmax", "cumsum",
           "cumprod"]


# ---------------------------------------------------------------------------------------
# Compile-time helpers (Triton's, which kernels import: FlagGems' topk and sort call
# `_log2(x.shape[dim])` for a constexpr)
# ---------------------------------------------------------------------------------------

@constexpr_function
def _log2(i):
    """floor(log2(i)) of a positive int (0 for i <= 1), at compile time."""
    log2 = 0
    n = i
    while n > 1:
        n >>= 1
        log2 += 1
    return log2


@constexpr_function
def _is_power_of_two(i):
    """Whether the int i is a power of two, at compile time."""
    return (i & (i - 1)) == 0 and i != 0


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


@builtin
def swizzle2d(i, j, size_i, size_j, size_g):
    """The indices (i, j) of a row-major size_i x size_j grid mapped to the grid walked
    column-major within each group of size_g rows (the last group may have fewer rows), as
    Triton's: the k-th element of a group (row-major order) gets row k % rows of the group and
    column k // rows. For 4 x 4 and size_g = 2, (0, 1) -> (1, 0) and (0, 2) -> (0, 1)."""
    g = _gen()
    ij = g.binary("add", g.binary("mul", i, size_j), j)
    group_len = g.binary("mul", size_g, size_j)
    first = g.binary("mul", g.binary("floordiv", ij, group_len), size_g)
    rows = g.binary("minimum", g.binary("sub", size_i, first), size_g)
    k = g.binary("mod", ij, group_len)
    return g.binary("add", first, g.binary("mod", k, rows)), g.binary("floordiv", k, rows)


# ---------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------

@builtin
def ravel(x, can_reorder=False):
    """x as a 1-D tile of x.numel elements in row-major order (reshape(x, [x.numel]));
    with can_reorder the order of the elements may change, as in Triton."""
    x = _t(x)
    return reshape(x, [x.numel.value], can_reorder=can_reorder)


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------

@builtin
def reduce(input, axis, combine_fn, keep_dims=False):
    """Reduces `input` (a tile or a tuple of same-shape tiles) along `axis` (every axis when
    None) with `combine_fn`, a @kiln.jit function of (accumulators..., values...) returning
    the combined values."""
    g = _gen()

    def combine(acc, new):
        r = g.call_function(combine_fn, [_wrap(h) for h in list(acc) + list(new)])
        r = r if isinstance(r, tuple) else (r,)
        return [g.to_tensor(v).handle for v in r]
    return _reduce_with(input, axis, combine, keep_dims, "reduce")


def _reduce_with(input, axis, combine, keep_dims, what):
    """reduce over a Python `combine(acc_handles, new_handles) -> handles`. axis=None: as
    Triton, the tiles flattened (any order: the combination is associative and commutative)
    and reduced along 0; keep_dims then gives shape [1] * rank."""
    g = _gen()
    single = not isinstance(input, tuple)
    inputs = [_t(x) for x in ((input,) if single else input)]
    keep, rank = _const_bool(keep_dims, "keep_dims"), len(inputs[0].shape)
    flat = _unwrap(axis) is None and rank != 1
    if flat:
        inputs = [reshape(x, [x.numel.value], can_reorder=True) for x in inputs]
    out = g.session.reduce([x.handle for x in inputs],
                           0 if _unwrap(axis) is None else _const_int(axis, f"{what} axis"),
                           combine, keep and not flat)
    vals = tuple(reshape(_wrap(h), [1] * rank) if flat and keep else _wrap(h) for h in out)
    return vals[0] if single else vals



def _reduction(op, input, axis, keep_dims):
    """`op` along `axis`; axis=None reduces every axis (Triton flattens first)."""
    g = _gen()
    x = _t(input)
    keep = _const_bool(keep_dims, "keep_dims")
    name = "sum" if op == "sum_in_dtype" else op
    if _unwrap(axis) is not None:
        return _wrap(g.session.reduce_op(op, x.handle, _const_int(axis, f"{name} axis"), keep))
    rank = len(x.shape)
    if rank == 0:
        raise TypeError(f"expected a tile for tl.{name}, found {_describe(x)}")
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
    `dtype` converts the input first, and the sum is then in that dtype, as in Triton (an
    int8 sum wraps, an int1 sum is modulo 2)."""
    if _unwrap(dtype) is not None:
        return _reduction("sum_in_dtype", cast(input, dtype), axis, keep_dims)
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
def reduce_or(input, axis, keep_dims=False):
    """Bitwise or along `axis` (every axis when None) of an integer (or int1) tile."""
    x = _t(input)
    if not x.dtype.is_int():
        raise TypeError(f"expected an integer tile for tl.reduce_or, found {_describe(x)}")
    g = _gen()

    def combine(acc, new):
        return [g.binary("or", _wrap(a), _wrap(b)).handle for a, b in zip(acc, new)]
    return _reduce_with(x, axis, combine, keep_dims, "reduce_or")


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


_tensor_member_fn(cdiv, sigmoid, ravel, reduce, sum, max, min, argmax, argmin, xor_sum,
                  reduce_or, softmax, cumsum, cumprod)
