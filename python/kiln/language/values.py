"""kiln.language.values: the names of triton.language (Triton 3.6) about values and types that
kiln.language.core leaves out: the limit TRITON_MAX_TENSOR_NUMEL; the classes const (a pointer
parameter's annotation), constexpr_type (the type of a constexpr), tuple and slice (the
compile-time tuples and slices of kernels), condition (a while loop's condition with loop
attributes); the decorator constexpr_function; and the functions to_tensor, add, sub, mul,
load_tensor_descriptor and store_tensor_descriptor.

Kernels see Python tuples and slices: ``tl.tuple`` and ``tl.slice`` are classes whose
instances are those (``isinstance((a, b), tl.tuple)`` holds in and out of kernels), and which
kernels may also build by name (``tl.tuple([a, b])``, ``t[tl.slice(0, 2, None)]``).
"""

import builtins as _py
import functools
import inspect

from .core import (_const_bool, _gen, _unwrap, builtin, constexpr, dtype, full,
                   int1, int32, int64, float32, float64, tensor, uint32, uint64)

__all__ = ["TRITON_MAX_TENSOR_NUMEL", "const", "constexpr_type", "condition", "slice", "tuple",
           "constexpr_function", "to_tensor", "add", "sub", "mul", "load_tensor_descriptor",
           "store_tensor_descriptor"]

# The largest number of elements of one tile Triton accepts (2**20, its _utils).
TRITON_MAX_TENSOR_NUMEL = 1048576


class const:
    """The annotation of a pointer parameter whose data the kernel only reads
    (``def k(x_ptr: tl.const, ...)``): tl.store and the atomics through it, or through pointers
    computed from it by arithmetic, are CompilationErrors. It is not a type of values."""


class constexpr_type:
    """The type of a compile-time value: ``c.type`` of a constexpr `c` (Triton's
    constexpr_type); two are equal when their values are."""

    __kiln_builtin__ = True  # kernels may build one: tl.constexpr_type(4)

    def __init__(self, value):
        self.value = _unwrap(value)

    def __eq__(self, other):
        return isinstance(other, constexpr_type) and self.value == other.value

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(("constexpr_type", self.value))

    def __repr__(self):
        return f"constexpr_type[{self.value!r}]"

    def mangle(self):
        return repr(self)


# A constexpr's type, as Triton gives it (`constexpr(4).type == constexpr_type(4)`).
constexpr.type = property(lambda self: constexpr_type(self.value))


class condition:
    """A while loop's condition with attributes for the loop (Triton's tl.condition):
    ``while tl.condition(i < n, disable_licm=True): ...``. disable_licm asks the compiler not to
    hoist loop-invariant code out of this loop; Kiln checks it is a bool and otherwise runs the
    loop as `while i < n` (its loops keep no such attribute)."""

    __kiln_builtin__ = True

    def __init__(self, arg1, disable_licm=False):
        self.condition = arg1
        self.disable_licm = _const_bool(disable_licm, "tl.condition's disable_licm")

    def __repr__(self):
        return f"condition({self.condition!r}, disable_licm={self.disable_licm})"


class _SliceMeta(type):
    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or isinstance(obj, _py.slice)


class slice(metaclass=_SliceMeta):
    """A compile-time slice (Triton's tl.slice): what ``t[1:3]`` indexes a tuple with in a
    kernel. Python's slices count as instances; kernels may build one by name and index tuples
    (and tensors, with ``tl.slice(None, None, None)`` for ':') with it."""

    __kiln_builtin__ = True

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = _unwrap(start), _unwrap(stop), _unwrap(step)

    def to_py(self):
        return _py.slice(self.start, self.stop, self.step)

    def __eq__(self, other):
        if isinstance(other, (slice, _py.slice)):
            return (self.start, self.stop, self.step) == (other.start, other.stop, other.step)
        return NotImplemented

    def __hash__(self):
        return hash((self.start, self.stop, self.step))

    def __repr__(self):
        return f"slice({self.start!r}, {self.stop!r}, {self.step!r})"


class _TupleMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _py.tuple)


class tuple(_py.tuple, metaclass=_TupleMeta):
    """A tuple of kernel values (Triton's tl.tuple): kernels' tuples are Python tuples, and
    every Python tuple is a tl.tuple (``isinstance(t, tl.tuple)``). ``tl.tuple([a, b])`` builds
    one from a sequence; ``values`` lists its elements."""

    __kiln_builtin__ = True

    def __new__(cls, args=(), type=None):
        return _py.tuple.__new__(cls, _unwrap(args))

    @property
    def values(self):
        return list(self)

    def __getitem__(self, idx):
        idx = _unwrap(idx)
        if isinstance(idx, slice) and not isinstance(idx, _py.slice):
            idx = idx.to_py()
        r = _py.tuple.__getitem__(self, idx)
        return tuple(r) if isinstance(idx, _py.slice) else r

    def __add__(self, other):
        return tuple(_py.tuple(self) + _py.tuple(_unwrap(other)))

    def __repr__(self):
        return f"tuple({list(self)!r})"


# ---------------------------------------------------------------------------------------
# constexpr_function
# ---------------------------------------------------------------------------------------

class ConstexprFunction:
    """A Python function that kernels call at compile time (tl.constexpr_function): the
    arguments are unwrapped (constexprs give their values; tensors pass as they are, for their
    dtype and shape), the function runs in Python, and the kernel gets its result as a
    constexpr. Called outside a kernel it is the plain function. Its source is part of the
    key of every kernel that names it (editing it recompiles them)."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"tl.constexpr_function decorates a function, found "
                            f"{type(fn).__name__}")
        self.fn = fn
        functools.update_wrapper(self, fn)
        try:
            self.src = inspect.getsource(fn)
        except (OSError, TypeError):
            self.src = getattr(fn, "__qualname__", repr(fn))

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def call_in_kernel(self, args, kwargs):
        """The call from a kernel: values in, a constexpr (or a dtype, a tensor, a tuple as
        kernels keep them) out."""
        return call_at_compile_time(self.fn, args, kwargs)

    def __repr__(self):
        return f"<constexpr_function {getattr(self.fn, '__qualname__', self.fn)}>"


def call_at_compile_time(fn, args, kwargs):
    """fn called from a kernel at compile time: constexpr arguments as their values (tensors
    as they are), the result a constexpr unless it is a kernel value (a tensor, a dtype, a
    constexpr, a tuple holding tensors)."""
    r = fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
    if isinstance(r, (tensor, dtype, constexpr)) or \
            isinstance(r, _py.tuple) and any(isinstance(e, tensor) for e in r):
        return r
    return constexpr(r)


def constexpr_function(fn):
    """Marks `fn` as callable from kernels at compile time (see ConstexprFunction)."""
    return ConstexprFunction(fn)


# ---------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------

@builtin
def to_tensor(x):
    """`x` as a run-time scalar tensor, typed as Triton types Python values: a bool int1; an
    int int32, uint32, int64 or uint64 (the first that holds it); a float float32 unless its
    magnitude is outside float32's normal range (then float64). A tensor is returned as is."""
    if isinstance(x, tensor):
        return x
    v = _unwrap(x)
    if isinstance(v, _py.bool):
        d = int1
    elif isinstance(v, _py.int):
        if -2**31 <= v < 2**31:
            d = int32
        elif 2**31 <= v < 2**32:
            d = uint32
        elif -2**63 <= v < 2**63:
            d = int64
        elif 2**63 <= v < 2**64:
            d = uint64
        else:
            raise ValueError(f"expected an integer that 64 bits hold for tl.to_tensor, "
                             f"found {v}")
    elif isinstance(v, _py.float):
        a = _py.abs(v)
        fp32 = a == 0.0 or a != a or a == float("inf") or 2.0**-126 <= a <= (2 - 2**-23) * 2**127
        d = float32 if fp32 else float64
    else:
        raise TypeError(f"expected a tensor, a bool, an int or a float for tl.to_tensor, "
                        f"found {type(v).__name__} {v!r}")
    return full((), v, d)


def _arith(op, x, y):
    # As Triton, two constants make tensors (to_tensor's types), not a constexpr.
    if not isinstance(x, tensor) and not isinstance(y, tensor):
        x, y = to_tensor(x), to_tensor(y)
    return _gen().binary(op, x, y)


@builtin
def add(x, y, sanitize_overflow=True):
    """x + y (Triton's tl.add, the function behind `+`); a pointer plus an integer offset
    moves the pointer. sanitize_overflow is accepted as a bool: Kiln's `+` and tl.add are one
    operation, and neither adds Triton's debug-mode overflow checks."""
    _const_bool(sanitize_overflow, "tl.add's sanitize_overflow")
    return _arith("add", x, y)


@builtin
def sub(x, y, sanitize_overflow=True):
    """x - y (Triton's tl.sub, the function behind `-`); see tl.add for sanitize_overflow."""
    _const_bool(sanitize_overflow, "tl.sub's sanitize_overflow")
    return _arith("sub", x, y)


@builtin
def mul(x, y, sanitize_overflow=True):
    """x * y (Triton's tl.mul, the function behind `*`); see tl.add for sanitize_overflow."""
    _const_bool(sanitize_overflow, "tl.mul's sanitize_overflow")
    return _arith("mul", x, y)


def _descriptor(desc, what):
    from .core import tensor_descriptor
    if not isinstance(desc, tensor_descriptor):
        raise TypeError(f"expected a tensor descriptor (a kiln.TensorDescriptor argument or "
                        f"tl.make_tensor_descriptor's result) for {what}, found "
                        f"{type(desc).__name__}")
    return desc


@builtin
def load_tensor_descriptor(desc, offsets):
    """desc.load(offsets): the block of `desc` whose first element is at `offsets`."""
    return _descriptor(desc, "tl.load_tensor_descriptor").load(offsets)


@builtin
def store_tensor_descriptor(desc, offsets, value):
    """desc.store(offsets, value): writes the block `value` at `offsets`."""
    return _descriptor(desc, "tl.store_tensor_descriptor").store(offsets, value)


def check_store_pointer(gen, fn, args, kwargs):
    """Raises when tl.store or an atomic writes through a tl.const pointer (the code generator
    calls it before those builtins)."""
    ptr = args[0] if args else kwargs.get("pointer")
    if isinstance(ptr, tensor) and ptr.handle in gen.const_pointers:
        raise TypeError(f"{fn.__name__}: cannot store through a pointer to constant data (it "
                        f"comes from a parameter annotated tl.const)")

