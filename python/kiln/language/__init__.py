"""kiln.language: Triton's language (triton.language, Triton 3.x) for Kiln kernels.

``import kiln.language as tl`` gives the same names, signatures and defaults as Triton for
what Kiln implements. Each builtin forwards to one ``kiln::Builder`` operation through the
front-end session; the semantics (promotion, broadcasting, checks) live in C++. Names that
Triton has and Kiln does not implement yet exist and raise a CompilationError naming them.
"""

import builtins as _py

from . import core
from .core import (block_type, builtin, constexpr, dtype, pointer_type, tensor, str_to_ty,
                   _gen, _unwrap, int1, int8, int16, int32, int64, uint8, uint16, uint32,
                   uint64, float16, bfloat16, float32, float64, float8e4nv, float8e5, void,
                   pi32_t)

__all__ = [
    "program_id", "num_programs", "arange", "full", "zeros", "zeros_like", "load", "store",
    "where", "minimum", "maximum", "clamp", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
    "sin", "cos", "erf", "floor", "ceil", "abs", "fdiv", "cdiv", "sigmoid", "expand_dims",
    "broadcast_to", "broadcast", "reshape", "view", "trans", "permute", "cast",
    "multiple_of", "max_contiguous", "max_constancy", "static_range", "range", "sum", "max",
    "min", "argmax", "argmin", "xor_sum", "reduce", "softmax", "associative_scan", "cumsum",
    "cumprod", "dot", "tensor_descriptor",
    "static_assert", "static_print", "device_print", "device_assert", "constexpr", "dtype",
    "pointer_type", "block_type", "tensor", "PropagateNan", "int1", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16", "float32",
    "float64", "float8e4nv", "float8e5", "void", "pi32_t",
]


class PropagateNan:
    """NaN handling of minimum/maximum: NONE returns the non-NaN operand, ALL propagates."""
    NONE = 0
    ALL = 0xFFFF


# ---------------------------------------------------------------------------------------
# Helpers: compile-time values in, handles out
# ---------------------------------------------------------------------------------------

def _describe(x):
    if isinstance(x, tensor):
        return repr(x)
    if isinstance(x, constexpr):
        return f"constexpr {x.value!r}"
    return f"{type(x).__name__} {x!r}"


def _const_int(x, what):
    v = _unwrap(x)
    if isinstance(v, _py.bool) or not isinstance(v, _py.int):
        raise TypeError(f"expected a constexpr integer for {what}, found {_describe(x)}")
    return v


def _const_bool(x, what):
    v = _unwrap(x)
    if not isinstance(v, (_py.bool, _py.int)):
        raise TypeError(f"expected a constexpr bool for {what}, found {_describe(x)}")
    return _py.bool(v)


def _const_str(x, what):
    v = _unwrap(x)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TypeError(f"expected a constexpr string for {what}, found {_describe(x)}")
    return v


def _dtype(x, what):
    v = _unwrap(x)
    if isinstance(v, str):
        v = str_to_ty(v)
    if not isinstance(v, dtype) or isinstance(v, block_type):
        raise TypeError(f"expected a dtype (tl.float32, tl.int32, ...) for {what}, "
                        f"found {_describe(x)}")
    return v


def _shape(args, what):
    """A shape given as `*shape` or as one list/tuple: a tuple of constexpr ints."""
    if len(args) == 1:
        a = _unwrap(args[0])
        if isinstance(a, (list, tuple)):
            args = a
    return [_const_int(s, f"{what} shape") for s in args]


def _t(x):
    """A tensor for `x` (Python numbers become weak literals)."""
    return _gen().to_tensor(x)


def _opt(x):
    """The handle of an optional operand (-1 for None)."""
    return -1 if _unwrap(x) is None else _t(x).handle


def _wrap(h):
    return tensor(h)


def _unsupported(name, why="not supported by Kiln yet"):
    @builtin
    def stub(*args, **kwargs):
        raise NotImplementedError(f"tl.{name} is {why}")
    stub.__name__ = name
    stub.__qualname__ = name
    stub.__doc__ = f"tl.{name}: {why} (raises a CompilationError)."
    return stub


# ---------------------------------------------------------------------------------------
# Grid and tile creation
# ---------------------------------------------------------------------------------------

@builtin
def program_id(axis):
    """The index of this program along `axis` (0, 1 or 2) of the launch grid (int32)."""
    return _wrap(_gen().session.program_id(_const_int(axis, "program_id axis")))


@builtin
def num_programs(axis):
    """The number of programs along `axis` of the launch grid (int32)."""
    return _wrap(_gen().session.num_programs(_const_int(axis, "num_programs axis")))


@builtin
def arange(start, end):
    """The int32 tile [start, end); end - start must be a power of two."""
    return _wrap(_gen().session.arange(_const_int(start, "arange start"),
                                       _const_int(end, "arange end")))


@builtin
def full(shape, value, dtype):
    """A tile of `shape` filled with the scalar `value` converted to `dtype`."""
    return _wrap(_gen().session.full(_shape((shape,), "full"), _t(value).handle,
                                     _dtype(dtype, "full").name))


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
# Memory
# ---------------------------------------------------------------------------------------

@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="",
         cache_modifier="", eviction_policy="", volatile=False):
    """Loads the tile at `pointer` (a pointer or tile of pointers). Masked-off lanes read
    `other` (undefined when `other` is None)."""
    if _unwrap(boundary_check) or _unwrap(padding_option):
        raise NotImplementedError("tl.load with boundary_check/padding_option (block pointers) "
                                  "is not supported by Kiln yet")
    g = _gen()
    return _wrap(g.session.load(_t(pointer).handle, _opt(mask), _opt(other),
                                _const_str(cache_modifier, "cache_modifier"),
                                _const_str(eviction_policy, "eviction_policy"),
                                _const_bool(volatile, "volatile")))


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """Stores `value` (broadcast to the pointer's shape) at `pointer` where `mask` holds."""
    if _unwrap(boundary_check):
        raise NotImplementedError("tl.store with boundary_check (block pointers) is not "
                                  "supported by Kiln yet")
    _gen().session.store(_t(pointer).handle, _t(value).handle, _opt(mask),
                         _const_str(cache_modifier, "cache_modifier"),
                         _const_str(eviction_policy, "eviction_policy"))
    return None


class tensor_descriptor:
    """A tensor descriptor parameter inside a kernel (Triton's `tl.tensor_descriptor`): the
    host passed a `kiln.TensorDescriptor`; `load` and `store` move blocks of `block_shape` at
    integer offsets, zero-filled (loads) or clipped (stores) outside the tensor. On sm_90 the
    loads that feed a loop's dots are copied by the tensor memory accelerator."""

    def __init__(self, desc, base, shape, strides, dtype, block_shape):
        self._desc, self._base, self._shape, self._strides = desc, base, shape, strides
        self.dtype = dtype
        self.block_shape = [constexpr(b) for b in block_shape]
        self._block = list(block_shape)

    @property
    def shape(self):
        return [tensor(h) for h in self._shape]

    @property
    def strides(self):
        return [tensor(h) for h in self._strides] + [constexpr(1)]

    def _offsets(self, offsets):
        offsets = _unwrap(offsets)
        if not isinstance(offsets, (list, tuple)):
            offsets = [offsets]
        return [_t(o).handle for o in offsets]

    def load(self, offsets):
        """The block whose first element is at `offsets` (zero outside the tensor)."""
        return _wrap(_gen().session.descriptor_load(_map(self._desc), self._base,
                                                    self._offsets(offsets), self._shape,
                                                    self._strides, self._block))

    def store(self, offsets, value):
        """Writes `value` (the block's shape) at `offsets`, where it is inside the tensor."""
        _gen().session.descriptor_store(_map(self._desc), self._base, self._offsets(offsets),
                                        _t(value).handle, self._shape, self._strides,
                                        self._block)
        return None

    load.__kiln_builtin__ = True
    store.__kiln_builtin__ = True

    def __repr__(self):
        return f"tensor_descriptor<{self.dtype}, {self._block}>"


def _map(desc):
    """The tensor map handle of a descriptor; -1 for one the kernel built."""
    return -1 if desc is None else desc


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """A tensor descriptor built in the kernel (Triton's `tl.make_tensor_descriptor`): the
    row-major tensor of `shape` at `base` with `strides` in elements (the last must be the
    constant 1), read and written in blocks of `block_shape` (powers of two). Its `load` and
    `store` are the masked accesses of the block (zero outside the tensor on loads); they do
    not go through the TMA."""
    shape, strides = list(_unwrap(shape)), list(_unwrap(strides))
    block = [_const_int(b, "tl.make_tensor_descriptor block_shape") for b in _unwrap(block_shape)]
    if not (len(shape) == len(strides) == len(block)) or not block:
        raise ValueError(f"expected shape, strides and block_shape of one non-zero rank for "
                         f"tl.make_tensor_descriptor, found {len(shape)}, {len(strides)} and "
                         f"{len(block)}")
    last = _unwrap(strides[-1])
    if isinstance(last, _py.bool) or not isinstance(last, _py.int) or last != 1:
        raise ValueError(f"expected the constant 1 as the last stride of "
                         f"tl.make_tensor_descriptor (a contiguous last dimension), found "
                         f"{_describe(strides[-1])}")
    if _unwrap(padding_option) != "zero":
        raise ValueError(f"expected padding_option 'zero' for tl.make_tensor_descriptor "
                         f"(Kiln zero-fills), found {_unwrap(padding_option)!r}")
    base = _t(base)
    if not isinstance(base.dtype, pointer_type):
        raise TypeError(f"expected a pointer as the base of tl.make_tensor_descriptor, found "
                        f"{_describe(base)}")
    return tensor_descriptor(None, base.handle, [_t(x).handle for x in shape],
                             [_t(x).handle for x in strides[:-1]], base.dtype.element_ty,
                             block)


# ---------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------

@builtin
def where(condition, x, y):
    """condition ? x : y elementwise, with x and y promoted and all three broadcast."""
    return _wrap(_gen().session.where(_t(condition).handle, _t(x).handle, _t(y).handle))


@builtin
def minimum(x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise minimum; NaNs propagate only with propagate_nan=PropagateNan.ALL."""
    op = "minimum_nan" if _unwrap(propagate_nan) == PropagateNan.ALL else "minimum"
    return _gen().binary(op, x, y)


@builtin
def maximum(x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise maximum; NaNs propagate only with propagate_nan=PropagateNan.ALL."""
    op = "maximum_nan" if _unwrap(propagate_nan) == PropagateNan.ALL else "maximum"
    return _gen().binary(op, x, y)


@builtin
def clamp(x, min, max, propagate_nan=PropagateNan.NONE):
    """minimum(maximum(x, min), max)."""
    return minimum(maximum(x, min, propagate_nan), max, propagate_nan)


def _math(name, doc):
    @builtin
    def fn(x):
        return _gen().unary(name, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


exp = _math("exp", "e**x (fp16/bf16 computed in fp32).")
exp2 = _math("exp2", "2**x.")
log = _math("log", "Natural logarithm.")
log2 = _math("log2", "Base-2 logarithm.")
sqrt = _math("sqrt", "Square root.")
rsqrt = _math("rsqrt", "1 / sqrt(x).")
sin = _math("sin", "Sine.")
cos = _math("cos", "Cosine.")
erf = _math("erf", "Error function.")
floor = _math("floor", "Largest integer not above x (floats).")
ceil = _math("ceil", "Smallest integer not below x (floats).")
abs = _math("abs", "Absolute value (floats and signed integers; identity on unsigned).")


@builtin
def fdiv(x, y, ieee_rounding=False):
    """x / y on floats."""
    return _gen().binary("truediv", x, y)


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
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    """input converted to `dtype` (Triton's rules), or reinterpreted with bitcast=True."""
    if _unwrap(fp_downcast_rounding) is not None:
        raise NotImplementedError("cast with fp_downcast_rounding is not supported by Kiln yet")
    d = _dtype(dtype, "cast")
    return _wrap(_gen().session.cast(_t(input).handle, d.name, _const_bool(bitcast, "bitcast")))


# Hints, as Triton's: facts about an integer tile the axis analysis takes over what it derives
# (one value per dimension, or one for all). A wrong hint gives wrong vector accesses.
def _hint(kind, input, values):
    values = _unwrap(values)
    values = [int(_unwrap(v)) for v in (values if isinstance(values, (list, tuple))
                                        else [values])]
    return _wrap(_gen().session.hint(_t(input).handle, kind, values))


@builtin
def multiple_of(input, values):
    """Hint that the first element of each contiguous run of `input` is a multiple of
    `values` (per dimension)."""
    return _hint("multiple_of", input, values)


@builtin
def max_contiguous(input, values):
    """Hint that `input` runs in contiguous (+1) runs of `values` elements (per dimension)."""
    return _hint("max_contiguous", input, values)


@builtin
def max_constancy(input, values):
    """Hint that `input` is constant in runs of `values` elements (per dimension)."""
    return _hint("max_constancy", input, values)


# ---------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------

@builtin
def expand_dims(input, axis):
    """Inserts unit dimensions at `axis` (an int or a sequence of ints)."""
    axes = _unwrap(axis)
    axes = [_const_int(a, "expand_dims axis")
            for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
    x = _t(input)
    if len(axes) > 1:
        rank = len(x.shape) + len(axes)
        axes = sorted(a + rank if a < 0 else a for a in axes)
    for a in axes:
        x = _wrap(_gen().session.expand_dims(x.handle, a))
    return x


@builtin
def broadcast_to(input, *shape):
    """input broadcast to `shape` (size-1 dimensions stretch; scalars splat)."""
    return _wrap(_gen().session.broadcast_to(_t(input).handle, _shape(shape, "broadcast_to")))


@builtin
def broadcast(input, other):
    """Both operands broadcast to their common shape."""
    a, b = _gen().session.broadcast(_t(input).handle, _t(other).handle)
    return (_wrap(a), _wrap(b))


@builtin
def reshape(input, *shape, can_reorder=False):
    """input with a new shape of the same number of elements."""
    return _wrap(_gen().session.reshape(_t(input).handle, _shape(shape, "reshape"),
                                        _const_bool(can_reorder, "can_reorder")))


@builtin
def view(input, *shape):
    """reshape(input, shape, can_reorder=True) (deprecated in Triton)."""
    return _wrap(_gen().session.reshape(_t(input).handle, _shape(shape, "view"), True))


@builtin
def trans(input, *dims):
    """The permutation `dims` of input's dimensions; (1, 0) by default."""
    order = _shape(dims, "trans") if dims else []
    return _wrap(_gen().session.trans(_t(input).handle, order))


@builtin
def permute(input, *dims):
    """The permutation `dims` of input's dimensions."""
    return _wrap(_gen().session.trans(_t(input).handle, _shape(dims, "permute")))


# ---------------------------------------------------------------------------------------
# Iterators and compile-time helpers (the code generator handles them)
# ---------------------------------------------------------------------------------------

class static_range:
    """for i in tl.static_range(start, end, step): unrolled at compile time; i is a
    constexpr in each copy of the body."""

    def __init__(self, arg1, arg2=None, step=None):
        if arg2 is None:
            start, end = 0, arg1
        else:
            start, end = arg1, arg2
        self.start = constexpr(_const_int(start, "static_range start"))
        self.end = constexpr(_const_int(end, "static_range end"))
        self.step = constexpr(1 if step is None else _const_int(step, "static_range step"))
        if self.step.value == 0:
            raise ValueError("static_range step must not be 0")


class range:
    """for i in tl.range(start, end, step, num_stages=..., flatten=...): a run-time loop like
    Python's range. flatten=True fuses the loop with the one loop nested in it (a persistent
    kernel's tile loop and its K loop) so that copies of the next outer iteration's operands
    overlap this one's end; the other tuning arguments are accepted and not used yet."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False):
        if arg2 is None:
            self.start, self.end = constexpr(0), arg1
        else:
            self.start, self.end = arg1, arg2
        self.step = constexpr(1) if step is None else step
        self.num_stages = num_stages
        self.flatten = _const_bool(flatten, "tl.range's flatten")


@builtin
def static_assert(cond, msg=""):
    """Compile-time assertion (handled by the code generator)."""
    raise AssertionError(msg)


@builtin
def static_print(*values, sep=" ", end="\n", file=None, flush=False):
    """Prints at compile time (handled by the code generator)."""
    _py.print(*values, sep=sep, end=end, file=file, flush=flush)


# ---------------------------------------------------------------------------------------
# Atomics
# ---------------------------------------------------------------------------------------

def _atomic_rmw(op):
    def fn(pointer, val, mask=None, sem=None, scope=None):
        g = _gen()
        return _wrap(g.session.atomic_rmw(op, _t(pointer).handle, _t(val).handle, _opt(mask),
                                          _const_str(sem or "", "sem"),
                                          _const_str(scope or "", "scope")))
    fn.__name__ = f"atomic_{op}"
    fn.__qualname__ = fn.__name__
    fn.__kiln_builtin__ = True
    fn.__doc__ = (f"Atomically applies {op} of `val` to each `*pointer` where `mask` holds "
                  f"(sem: acq_rel, acquire, release, relaxed; scope: gpu, cta, sys); returns "
                  f"the old values.")
    return fn


atomic_add = _atomic_rmw("add")
atomic_max = _atomic_rmw("max")
atomic_min = _atomic_rmw("min")
atomic_and = _atomic_rmw("and")
atomic_or = _atomic_rmw("or")
atomic_xor = _atomic_rmw("xor")
atomic_xchg = _atomic_rmw("xchg")


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    """Atomically stores `val` at each `*pointer` equal to `cmp`; returns the old values."""
    g = _gen()
    return _wrap(g.session.atomic_cas(_t(pointer).handle, _t(cmp).handle, _t(val).handle,
                                      _const_str(sem or "", "sem"),
                                      _const_str(scope or "", "scope")))


@builtin
def device_print(prefix, *args, hex=False):
    """Prints `prefix` and the run-time values of `args` from every program when the kernel
    runs (each element of a tile on its own line, with the program id and the element's
    index), integers in hexadecimal with hex=True. As in Triton, a prefix followed by values
    is made to read " prefix: ". ``print(...)`` in a kernel is this function."""
    import string
    p = _unwrap(prefix)
    if not isinstance(p, str):
        raise TypeError(f"expected a constexpr string as the device_print prefix, found "
                        f"{_describe(prefix)}")
    if any(ch not in string.printable for ch in p):
        raise TypeError(f"the device_print prefix {p!r} is not a printable ASCII string")
    handles = [_t(a).handle for a in args]
    # (the prefix becomes " prefix: " before values in kiln::Builder::print, as Triton's)
    _gen().session.device_print(p, handles, _const_bool(hex, "device_print hex"))
    return None


@builtin
def device_assert(cond, msg="", mask=None):
    """Fails the launch with `msg` where `cond` is false (where `mask` holds, when given). As
    in Triton it acts only in debug mode (``@kiln.jit(debug=True)`` or KILN_DEBUG=1) and
    compiles to nothing otherwise. A Python ``assert cond, msg`` in a kernel is this
    function."""
    g = _gen()
    c = _t(cond)
    message = _const_str(msg, "device_assert message")
    if not g.debug:
        return None
    if _unwrap(mask) is not None:
        c = _wrap(g.session.binary("logical_or", c.handle,
                                   g.session.unary("not", _t(mask).handle)))
    g.session.device_assert(c.handle, message)
    return None


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
def reduce(input, axis, combine_fn, keep_dims=False):
    """Reduces `input` (a tile or a tuple of same-shape tiles) along `axis` with
    `combine_fn`, a @kiln.jit function of (accumulators..., values...) returning the
    combined values."""
    g = _gen()
    single = not isinstance(input, tuple)
    inputs = [_t(x) for x in ((input,) if single else input)]
    if _unwrap(axis) is None:
        if len(inputs[0].shape) != 1:
            raise NotImplementedError("tl.reduce with axis=None on a tile of rank > 1 is not "
                                      "supported by Kiln yet; reduce one axis at a time")
        axis = 0

    def combine(acc, new):
        r = g.call_function(combine_fn, [_wrap(h) for h in list(acc) + list(new)])
        r = r if isinstance(r, tuple) else (r,)
        return [g.to_tensor(v).handle for v in r]
    out = g.session.reduce([x.handle for x in inputs], _const_int(axis, "reduce axis"), combine,
                           _const_bool(keep_dims, "keep_dims"))
    vals = tuple(_wrap(h) for h in out)
    return vals[0] if single else vals


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

def _scan_axis(x, axis, what):
    if _unwrap(axis) is None:
        raise TypeError(f"expected a constexpr integer for {what} axis, found None")
    return _const_int(axis, f"{what} axis")


@builtin
def associative_scan(input, axis, combine_fn, reverse=False):
    """Inclusive scan of `input` (a tile or a tuple of same-shape tiles) along `axis` with
    `combine_fn`, a @kiln.jit function of (accumulators..., values...) returning the combined
    values; `reverse` scans from the end. Results have the inputs' dtypes and shapes."""
    g = _gen()
    single = not isinstance(input, tuple)
    inputs = [_t(x) for x in ((input,) if single else input)]

    def combine(acc, new):
        r = g.call_function(combine_fn, [_wrap(h) for h in list(acc) + list(new)])
        r = r if isinstance(r, tuple) else (r,)
        return [g.to_tensor(v).handle for v in r]
    out = g.session.scan([x.handle for x in inputs], _scan_axis(inputs[0], axis, "scan"),
                         combine, _const_bool(reverse, "reverse"))
    vals = tuple(_wrap(h) for h in out)
    return vals[0] if single else vals


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
# Matrix product
# ---------------------------------------------------------------------------------------

@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None,
        max_num_imprecise_acc=None, out_dtype=float32):
    """The matrix product of two 2-D tiles (M x K and K x N; M, N, K powers of two >= 16)
    plus `acc` (zeros when None): fp16 -> fp32 or fp16 (`out_dtype`), bf16 -> fp32,
    fp32 -> fp32, int8 -> int32. For fp32 inputs `input_precision` is "tf32" (the default,
    as Triton), "tf32x3" or "ieee"; `allow_tf32=False` means "ieee"."""
    precision = _unwrap(input_precision)
    tf32 = _unwrap(allow_tf32)
    if precision is not None and tf32 is not None:
        raise ValueError("only one of input_precision and allow_tf32 can be given to tl.dot")
    if precision is None:
        precision = "tf32" if tf32 is None or tf32 else "ieee"
    precision = _const_str(precision, "dot input_precision")
    imprecise = _unwrap(max_num_imprecise_acc)
    imprecise = 0 if imprecise is None else _const_int(imprecise, "max_num_imprecise_acc")
    out = _dtype(out_dtype, "dot out_dtype")
    if _unwrap(acc) is not None and not isinstance(acc, tensor):
        raise TypeError(f"expected a tile accumulator for tl.dot, found {_describe(acc)}")
    return _wrap(_gen().session.dot(_t(input).handle, _t(other).handle, _opt(acc), precision,
                                    out.name, imprecise))


# ---------------------------------------------------------------------------------------
# Not implemented yet: present, named in the error
# ---------------------------------------------------------------------------------------

dot_scaled = _unsupported("dot_scaled")
sort = _unsupported("sort")
histogram = _unsupported("histogram")
debug_barrier = _unsupported("debug_barrier")
make_block_ptr = _unsupported("make_block_ptr")
advance = _unsupported("advance")
join = _unsupported("join")
split = _unsupported("split")
interleave = _unsupported("interleave")
umulhi = _unsupported("umulhi")
fma = _unsupported("fma")
inline_asm_elementwise = _unsupported("inline_asm_elementwise")
ravel = _unsupported("ravel")


# ---------------------------------------------------------------------------------------
# Tensor member functions (as in Triton: x.to(...), x.reshape(...), x.exp(), ...)
# ---------------------------------------------------------------------------------------

def _member(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__kiln_builtin__ = True
    return method


@builtin
def _to(input, dtype, fp_downcast_rounding=None, bitcast=False):
    return cast(input, dtype, fp_downcast_rounding, bitcast)


_to.__name__ = "to"
for _fn in (_to, broadcast_to, expand_dims, reshape, view, trans, permute, exp, exp2, log, log2,
            sqrt, rsqrt, sin, cos, erf, floor, ceil, abs, cdiv, sigmoid, sum, max, min, argmax,
            argmin, reduce, xor_sum, softmax, associative_scan, cumsum, cumprod, sort,
            multiple_of, max_contiguous, max_constancy, cast):
    setattr(tensor, _fn.__name__, _member(_fn))
tensor.T = property(lambda self: trans(self))


def _matmul(self, other):
    return dot(self, other)


_matmul.__name__ = "__matmul__"
_matmul.__kiln_builtin__ = True
tensor.__matmul__ = _matmul

from . import math  # noqa: E402,F401
