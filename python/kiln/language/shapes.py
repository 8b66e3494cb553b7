"""kiln.language.shapes: the ops of triton.language (Triton 3.6) that join, split, reorder,
sort, count and gather the elements of tiles: join, split, interleave, cat, flip, sort, topk,
histogram and gather, with Triton's names, signatures and defaults. (Triton keeps them in its
core and standard modules; ``kiln.language`` exports them all the same.)

Each is one call into ``kiln::Builder``, where the semantics and checks live; the Builder
composes them from ops both backends lower (reshapes, selects, reductions), moving values bit
for bit. As Triton's, tensors have the methods ``x.split()``, ``x.sort()``, ``x.flip()``,
``x.histogram(num_bins)`` and ``x.gather(index, axis)``.
"""

from .core import (_const_bool, _const_int, _gen, _opt, _t, _tensor_member_fn, _unwrap, _wrap,
                   builtin, expand_dims, reshape, where)

__all__ = ["join", "split", "interleave", "cat", "flip", "sort", "topk", "histogram", "gather",
           "bitonic_merge", "squeeze", "unsqueeze"]


def _dim(dim, what):
    """None or a constexpr integer dimension."""
    return None if _unwrap(dim) is None else _const_int(dim, what)


@builtin
def join(a, b):
    """a and b broadcast to one shape and stacked along a new minor dimension of size 2:
    (4, 8) and (4, 8) give (4, 8, 2); two scalars give (2,). join is the inverse of split."""
    return _wrap(_gen().session.join(_t(a).handle, _t(b).handle))


@builtin
def split(a):
    """The two halves of `a` along its last dimension, which must have size 2: (4, 8, 2)
    gives two (4, 8) tensors, (2,) two scalars. split is the inverse of join."""
    first, second = _gen().session.split(_t(a).handle)
    return _wrap(first), _wrap(second)


@builtin
def interleave(a, b):
    """The values of a and b alternating along their last dimension:
    join(a, b).reshape(a.shape[:-1] + [2 * a.shape[-1]])."""
    return _wrap(_gen().session.interleave(_t(a).handle, _t(b).handle))


@builtin
def cat(input, other, can_reorder=False):
    """The 1-D tiles `input` and `other` (one dtype and shape) concatenated. As in Triton, only
    can_reorder=True is supported: the order of the elements is then unspecified (Kiln keeps
    `input` then `other`)."""
    return _wrap(_gen().session.cat(_t(input).handle, _t(other).handle,
                                    _const_bool(can_reorder, "cat's can_reorder")))


@builtin
def flip(x, dim=None):
    """x reversed along `dim` (the last dimension when None; negative counts from the end)."""
    return _wrap(_gen().session.flip(_t(x).handle, _dim(dim, "flip's dim")))


@builtin
def sort(x, dim=None, descending=0):
    """x sorted along its last dimension (`dim` must be None or name it, as in Triton),
    ascending, or descending when `descending` is true."""
    return _wrap(_gen().session.sort(_t(x).handle, _dim(dim, "sort's dim"),
                                     _const_bool(descending, "sort's descending")))


@builtin
def topk(x, k, dim=None):
    """The k largest elements of x along its last dimension, largest first (shape
    x.shape[:-1] + [k]); k is a power of two no larger than that dimension."""
    return _wrap(_gen().session.topk(_t(x).handle, _const_int(k, "topk's k"),
                                     _dim(dim, "topk's dim")))


@builtin
def histogram(input, num_bins, mask=None):
    """int32 counts of the values 0 .. num_bins - 1 in the 1-D integer tile `input` (bins of
    width 1 from 0), over the elements where `mask` holds; values outside [0, num_bins) are
    not counted."""
    return _wrap(_gen().session.histogram(_t(input).handle,
                                          _const_int(num_bins, "histogram's num_bins"),
                                          _opt(mask)))


@builtin
def gather(src, index, axis):
    """src gathered along `axis`: out[..., i, ...] = src[..., index[..., i, ...], ...]; index
    is an integer tile of src's rank whose other dimensions equal src's, and the result has
    its shape (an index outside [0, src.shape[axis]) gives 0)."""
    return _wrap(_gen().session.gather(_t(src).handle, _t(index).handle,
                                       _const_int(axis, "gather's axis")))


@builtin
def bitonic_merge(x, dim=None, descending=0):
    """Triton's merge network on the last dimension of x (`dim` None or naming it), whose
    length n is a power of two: rounds of compare-and-swap at distances n/2, n/4, ..., 1, each
    putting the smaller of a pair first (the larger when `descending`), built as Triton builds
    it (partners by xor along a pair axis, a select by comparison). A bitonic row (rising then
    falling, or the reverse) comes out sorted; any row comes out as Triton's network leaves it
    (a NaN in a pair is kept in the first place and copied to the second)."""
    x = _t(x)
    shape = [s.value for s in x.shape]
    if not shape:
        raise ValueError("expected a tile for tl.bitonic_merge, found a scalar")
    rank = len(shape)
    d = _dim(dim, "bitonic_merge's dim")
    if d is not None and d not in (rank - 1, -1):
        raise ValueError(f"expected dim None or {rank - 1} (the last dimension) for "
                         f"tl.bitonic_merge, as Triton supports only that, found {d}")
    n = shape[-1]
    if n & (n - 1):
        raise ValueError(f"expected a power-of-two last dimension for tl.bitonic_merge, "
                         f"found {n}")
    flip = _const_bool(descending, "bitonic_merge's descending")
    from .core import arange, cast, dtype
    from .standard import xor_sum
    g, dt = _gen(), x.dtype
    bits = dtype({8: "int8", 16: "int16", 32: "int32", 64: "int64"}.get(
        dt.primitive_bitwidth, "int32")) if not dt.is_int1() else dt
    lead = shape[:-1]
    half = n // 2
    while half >= 1:
        # Pairs (j, j + half) within blocks of 2 * half face each other along the middle axis
        # of the view (..., blocks, 2, half); a pair's xor gives each its partner.
        h = reshape(x, lead + [n // (2 * half), 2, half])
        ih = cast(h, bits, bitcast=True) if bits != dt else h
        partner = g.binary("xor", ih, xor_sum(ih, len(lead) + 1, keep_dims=True))
        y = cast(partner, dt, bitcast=True) if bits != dt else partner
        right = g.binary("eq", reshape(arange(0, 2), [1] * (len(lead) + 1) + [2, 1]), 1)
        # Triton's compare-and-swap: take the partner where (h > y) != (descending ^ right).
        gt = g.binary("gt", h, y)
        take = g.binary("eq", gt, right) if flip else g.binary("ne", gt, right)
        x = reshape(where(take, y, h), shape)
        half //= 2
    return x


@builtin
def squeeze(x, dim):
    """x without its dimension `dim` (negative counts from the end), which must have length 1;
    the inverse of unsqueeze."""
    x = _t(x)
    shape = [s.value for s in x.shape]
    d = _const_int(dim, "squeeze's dim")
    if not -len(shape) <= d < len(shape):
        raise ValueError(f"expected a dimension of the rank-{len(shape)} tile for tl.squeeze, "
                         f"found {d}")
    d %= len(shape)
    if shape[d] != 1:
        raise ValueError(f"expected length 1 in dimension {d} for tl.squeeze, found "
                         f"{shape[d]} (shape {shape})")
    return reshape(x, shape[:d] + shape[d + 1:])


@builtin
def unsqueeze(x, dim):
    """x with a new dimension of length 1 at index `dim` (tl.expand_dims with one axis); the
    inverse of squeeze."""
    return expand_dims(x, _const_int(dim, "unsqueeze's dim"))


_tensor_member_fn(split, flip, sort, histogram, gather)
