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
                   builtin)

__all__ = ["join", "split", "interleave", "cat", "flip", "sort", "topk", "histogram", "gather"]


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


_tensor_member_fn(split, flip, sort, histogram, gather)
