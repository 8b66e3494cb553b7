"""Block pointers (Triton's `tl.make_block_ptr`, `tl.advance`, and `tl.load` / `tl.store` of a
block pointer with `boundary_check` and `padding_option`).

A block pointer names a `block_shape` window at `offsets` into the tensor of `shape` and
`strides` (elements) at `base`. Loading it reads the window (elements outside the tensor along
the dimensions of `boundary_check` read as zero, or NaN with padding_option="nan"); storing
writes the window where it is inside the tensor along those dimensions; `tl.advance` moves the
window. A block pointer flows through loops and ifs like a tuple of tensors (its offsets are
the loop-carried values; base, shape and strides stay those it was made with).

When the last stride is the constant 1 (a row-major window, the usual case) the access is the
one of a tensor descriptor made from the same base, shape and strides
(`tl.make_tensor_descriptor`): the same masked loads and stores, and on sm_90a the TMA where the
launcher can encode a tensor map from the launch's arguments. Otherwise the window is a tile of
pointers with a mask built from `boundary_check`.
"""

import builtins as _py

from .core import (_const_int, _const_str, _describe, _gen, _map, _t, _unwrap, _wrap, arange,
                   broadcast_to, builtin, cast, constexpr, expand_dims, int32, pointer_type,
                   tensor)

__all__ = ["make_block_ptr", "advance", "block_pointer"]


class block_pointer:
    """The value of `tl.make_block_ptr(...)` inside a kernel."""

    def __init__(self, base, shape, strides, offsets, block, order, desc):
        self.base, self.shape, self.strides = base, list(shape), list(strides)
        self.offsets = list(offsets)  # int32 tensors
        self.block, self.order, self._desc = list(block), tuple(order), desc
        self.element_ty = base.dtype.element_ty

    @property
    def dtype(self):
        """As in Triton, a pointer type: `p.dtype.element_ty` is what the block holds
        (flash-linear-attention's `b.to(p.dtype.element_ty)`)."""
        return self.base.dtype

    type = dtype

    @property
    def block_shape(self):
        return [constexpr(b) for b in self.block]

    # Control flow carries the offsets (run-time values); the rest is fixed (statements.py).
    def __kiln_flatten__(self):
        return self.offsets

    def __kiln_static__(self):
        def key(v):
            return ("t", v.handle) if isinstance(v, tensor) else ("c", _unwrap(v))
        return ("block_ptr", key(self.base), tuple(key(s) for s in self.shape),
                tuple(key(s) for s in self.strides), tuple(self.block), self.order, self._desc)

    def __kiln_rebuild__(self, offsets):
        return block_pointer(self.base, self.shape, self.strides, offsets, self.block,
                             self.order, self._desc)

    def _row_major(self):
        last = _unwrap(self.strides[-1])
        return isinstance(last, _py.int) and not isinstance(last, _py.bool) and last == 1

    def _checked(self, boundary_check, what):
        dims = _unwrap(boundary_check)
        if dims is None:
            return []
        if not isinstance(dims, (tuple, list)):
            dims = [dims]
        out = []
        for d in dims:
            d = _const_int(d, f"{what} boundary_check")
            if not 0 <= d < len(self.block):
                raise ValueError(f"{what}: boundary_check dimension {d} is out of range for a "
                                 f"block pointer of rank {len(self.block)}")
            out.append(d)
        return sorted(set(out))

    def _tile(self, checked):
        """The pointer tile of the window and its mask (None when nothing is checked)."""
        g = _gen()
        rank = len(self.block)
        ptrs, mask = self.base, None
        for d in range(rank):
            idx = g.binary("add", arange(0, self.block[d]), self.offsets[d])
            others = [o for o in range(rank) if o != d]
            if others:
                idx = expand_dims(idx, others)
            ptrs = g.binary("add", ptrs, g.binary("mul", idx, self.strides[d]))
            if d in checked:
                inside = g.binary("and", g.binary("ge", idx, constexpr(0)),
                                  g.binary("lt", idx, self.shape[d]))
                mask = inside if mask is None else g.binary("and", mask, inside)
        if mask is not None:
            mask = broadcast_to(mask, self.block)
        return ptrs, mask

    def _offset_handles(self):
        return [o.handle for o in self.offsets]

    def _handles(self, values):
        return [_t(v).handle for v in values]

    def _kiln_load(self, boundary_check, padding_option, cache_modifier, eviction_policy,
                   volatile):
        checked = self._checked(boundary_check, "tl.load of a block pointer")
        padding = _const_str(padding_option, "padding_option")
        if padding not in ("", "zero", "nan"):
            raise ValueError(f"tl.load of a block pointer: padding_option must be '', 'zero' "
                             f"or 'nan', found {padding!r}")
        if padding == "nan" and not self.element_ty.is_floating():
            raise ValueError(f"tl.load of a block pointer: padding_option='nan' needs a "
                             f"floating-point element type, found {self.element_ty}")
        g = _gen()
        plain = not _const_str(cache_modifier, "cache_modifier") and \
            not _const_str(eviction_policy, "eviction_policy") and not _unwrap(volatile)
        if self._row_major() and padding != "nan" and plain:
            return _wrap(g.session.descriptor_load(
                _map(self._desc), self.base.handle, self._offset_handles(),
                self._handles(self.shape), self._handles(self.strides[:-1]), self.block))
        ptrs, mask = self._tile(checked)
        other = -1
        if mask is not None:
            zero = 0.0 if self.element_ty.is_floating() else 0
            other = _t(constexpr(float("nan") if padding == "nan" else zero)).handle
        return _wrap(g.session.load(ptrs.handle, -1 if mask is None else mask.handle, other,
                                    _const_str(cache_modifier, "cache_modifier"),
                                    _const_str(eviction_policy, "eviction_policy"),
                                    bool(_unwrap(volatile))))

    def _kiln_store(self, value, boundary_check, cache_modifier, eviction_policy):
        checked = self._checked(boundary_check, "tl.store of a block pointer")
        g = _gen()
        value = _t(value)
        plain = not _const_str(cache_modifier, "cache_modifier") and \
            not _const_str(eviction_policy, "eviction_policy")
        if self._row_major() and plain:
            g.session.descriptor_store(_map(self._desc), self.base.handle,
                                       self._offset_handles(), value.handle,
                                       self._handles(self.shape),
                                       self._handles(self.strides[:-1]), self.block)
            return None
        ptrs, mask = self._tile(checked)
        g.session.store(ptrs.handle, value.handle, -1 if mask is None else mask.handle,
                        _const_str(cache_modifier, "cache_modifier"),
                        _const_str(eviction_policy, "eviction_policy"))
        return None

    def __repr__(self):
        return f"block_pointer<{self.element_ty}, {self.block}>"


def _offset32(o, what):
    """`o`, an offset of a block pointer, as int32 (Triton's rule: a 64-bit scalar or a
    constant past int32's range is an error, not an offset cut to its low 32 bits)."""
    u = _unwrap(o)
    if isinstance(u, _py.int) and not isinstance(u, _py.bool) and \
            not -2**31 <= u < 2**31:
        raise ValueError(f"{what}: expected offsets in int32's range, found {u}")
    if isinstance(o, tensor) and o.dtype.is_int() and o.dtype.primitive_bitwidth > 32:
        raise TypeError(f"{what}: expected int32 offsets, found {_describe(o)} (convert it "
                        f"with .to(tl.int32), as Triton asks)")
    return cast(o, int32)


def _tuple(x, what):
    v = _unwrap(x)
    if isinstance(v, tensor) or not isinstance(v, (tuple, list)):
        v = [x]
    return list(v)


@builtin
def make_block_ptr(base, shape, strides, offsets, block_shape, order):
    """A block pointer: the `block_shape` window at `offsets` of the tensor of `shape` and
    `strides` (in elements) at `base`; `order` lists the dimensions from the fastest-varying
    (Triton's; a hint here, as the strides say the layout)."""
    base = _t(base)
    if not isinstance(base.dtype, pointer_type) or base.shape:
        raise TypeError(f"tl.make_block_ptr: expected a scalar pointer as the base, found "
                        f"{_describe(base)}")
    shape, strides = _tuple(shape, "shape"), _tuple(strides, "strides")
    offsets = _tuple(offsets, "offsets")
    block = [_const_int(b, "tl.make_block_ptr block_shape") for b in _tuple(block_shape, "")]
    order = [_const_int(o, "tl.make_block_ptr order") for o in _tuple(order, "")]
    rank = len(block)
    if not rank or not (len(shape) == len(strides) == len(offsets) == len(order) == rank):
        raise ValueError(f"tl.make_block_ptr: shape, strides, offsets, block_shape and order "
                         f"must have one rank, found {len(shape)}, {len(strides)}, "
                         f"{len(offsets)}, {rank} and {len(order)}")
    for b in block:
        if b <= 0 or b & (b - 1):
            raise ValueError(f"tl.make_block_ptr: block_shape entries must be powers of two, "
                             f"found {block}")
    if sorted(order) != list(range(rank)):
        raise ValueError(f"tl.make_block_ptr: order must be a permutation of "
                         f"0..{rank - 1}, found {tuple(order)}")
    g = _gen()
    for what, vals in (("shape", shape), ("strides", strides), ("offsets", offsets)):
        for v in vals:
            u = _unwrap(v)
            if isinstance(v, tensor):
                if v.shape or not v.dtype.is_int():
                    raise TypeError(f"tl.make_block_ptr: {what} must be integer scalars, "
                                    f"found {_describe(v)}")
            elif isinstance(u, _py.bool) or not isinstance(u, _py.int):
                raise TypeError(f"tl.make_block_ptr: {what} must be integer scalars, found "
                                f"{_describe(v)}")
    offs = [_offset32(o, "tl.make_block_ptr") for o in offsets]
    desc = None
    last = _unwrap(strides[-1])
    if isinstance(last, _py.int) and not isinstance(last, _py.bool) and last == 1:
        desc = g.derived_tensor_map(base, shape, strides[:-1], block)
    return block_pointer(base, shape, strides, offs, block, order, desc)


@builtin
def advance(base, offsets):
    """The block pointer `base` moved by `offsets` (one integer per dimension)."""
    if not isinstance(base, block_pointer):
        raise TypeError(f"tl.advance: expected a block pointer (tl.make_block_ptr), found "
                        f"{_describe(base)}")
    offsets = _tuple(offsets, "offsets")
    if len(offsets) != len(base.block):
        raise ValueError(f"tl.advance: expected {len(base.block)} offsets for a block pointer "
                         f"of rank {len(base.block)}, found {len(offsets)}")
    g = _gen()
    moved = [cast(g.binary("add", o, _offset32(d, "tl.advance")), int32)
             for o, d in zip(base.offsets, offsets)]
    return base.__kiln_rebuild__(moved)
