"""kiln.language.core: the language's objects and builtins, as triton.language.core holds
them: dtypes, constexpr, the compile-time tensor; program ids, tile creation, loads and stores,
tensor descriptors, elementwise selection, casts and hints, shapes, iterators and
compile-time helpers, atomics, debugging, associative_scan and dot (dot_scaled,
map_elementwise, inline_asm_elementwise and extern_elementwise in modules of their own). The
math functions are in kiln.language.math, the functions written over these (sum, max,
softmax, cdiv, zeros, ...) in kiln.language.standard.

Everything here mirrors ``triton.language`` (Triton 3.x). None of it holds type rules: a
tensor is a handle into the C++ front-end session (``kiln._C.Session``), and every
operation on tensors is one call into ``kiln::Builder`` through it.
"""

import builtins as _py
import sys
import threading

__all__ = [
    "dtype", "pointer_type", "block_type", "constexpr", "tensor", "builtin",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5", "float8e4b15",
    "float8e4b8", "float8e5b16", "void", "pi32_t", "str_to_ty", "PropagateNan", "program_id", "num_programs", "arange", "full", "load",
    "store", "tensor_descriptor", "make_tensor_descriptor", "where", "minimum", "maximum",
    "clamp", "cast", "multiple_of", "max_contiguous", "max_constancy", "expand_dims",
    "broadcast_to", "broadcast", "reshape", "view", "trans", "permute", "static_range", "range",
    "static_assert", "static_print", "assume", "atomic_add", "atomic_max", "atomic_min",
    "atomic_and",
    "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas", "device_print", "device_assert",
    "associative_scan", "dot", "dot_scaled", "debug_barrier", "inline_asm_elementwise",
    "map_elementwise",
]


# ---------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------

class dtype:
    """A scalar element type, named as Triton names it ("fp32", "int32", "bf16")."""

    SINT_TYPES = ("int8", "int16", "int32", "int64")
    UINT_TYPES = ("int1", "uint8", "uint16", "uint32", "uint64")
    # Triton's fp8 types; the last three have no format on sm_90 or the CPU (NO_FORMAT).
    FP8_TYPES = ("fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16")
    NO_FORMAT = ("fp8e4b15", "fp8e4b8", "fp8e5b16")
    STANDARD_FP_TYPES = ("fp16", "bf16", "fp32", "fp64")
    FP_TYPES = STANDARD_FP_TYPES + FP8_TYPES
    _BITS = {"int1": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8,
             "uint16": 16, "uint32": 32, "uint64": 64, "fp16": 16, "bf16": 16, "fp32": 32,
             "fp64": 64, "fp8e4nv": 8, "fp8e5": 8, "fp8e4b15": 8, "fp8e4b8": 8, "fp8e5b16": 8,
             "void": 0}
    # (mantissa bits, exponent bias) of each float, as Triton's dtype has them.
    _FP = {"fp16": (10, 15), "bf16": (7, 127), "fp32": (23, 127), "fp64": (52, 1023),
           "fp8e4nv": (3, 7), "fp8e5": (2, 15), "fp8e4b15": (3, 15), "fp8e4b8": (3, 8),
           "fp8e5b16": (2, 16)}
    # The Python-visible attribute name of each dtype (tl.float32 prints as such).
    _PUBLIC = {"int1": "int1", "int8": "int8", "int16": "int16", "int32": "int32",
               "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
               "uint64": "uint64", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
               "fp64": "float64", "fp8e4nv": "float8e4nv", "fp8e5": "float8e5",
               "fp8e4b15": "float8e4b15", "fp8e4b8": "float8e4b8", "fp8e5b16": "float8e5b16",
               "void": "void"}

    def __init__(self, name):
        if name not in self._BITS:
            raise ValueError(f"unknown dtype '{name}'")
        self.name = name
        self.primitive_bitwidth = self._BITS[name]

    # Queries, as on triton.language.dtype.
    def is_fp16(self): return self.name == "fp16"
    def is_bf16(self): return self.name == "bf16"
    def is_fp32(self): return self.name == "fp32"
    def is_fp64(self): return self.name == "fp64"
    def is_fp8(self): return self.name in self.FP8_TYPES
    def is_fp8e4nv(self): return self.name == "fp8e4nv"
    def is_fp8e5(self): return self.name == "fp8e5"
    def is_fp8e4b15(self): return self.name == "fp8e4b15"
    def is_fp8e4b8(self): return self.name == "fp8e4b8"
    def is_fp8e5b16(self): return self.name == "fp8e5b16"
    def is_floating(self): return self.name in self.FP_TYPES
    def is_int1(self): return self.name == "int1"
    def is_bool(self): return self.is_int1()
    def is_int_signed(self): return self.name in self.SINT_TYPES
    def is_int_unsigned(self): return self.name in self.UINT_TYPES
    def is_int(self): return self.is_int_signed() or self.is_int_unsigned()
    def is_standard_floating(self): return self.name in self.STANDARD_FP_TYPES
    def is_ptr(self): return False
    def is_block(self): return False
    def is_void(self): return self.name == "void"

    @property
    def scalar(self):
        return self

    @property
    def fp_mantissa_width(self):
        return self._FP.get(self.name, (0, 0))[0]

    @property
    def exponent_bias(self):
        return self._FP.get(self.name, (0, 0))[1]

    @property
    def int_bitwidth(self):
        return self.primitive_bitwidth if self.is_int() else 0

    def to(self, *args, **kwargs):
        raise TypeError(f"'{self}' is a dtype; .to() converts tensors")

    def __eq__(self, other):
        return isinstance(other, dtype) and type(other) is type(self) and other.name == self.name

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((type(self).__name__, self.name))

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"kiln.language.{self._PUBLIC.get(self.name, self.name)}"


class pointer_type(dtype):
    """pointer<element_ty> (the dtype of tensors of addresses)."""

    def __init__(self, element_ty, address_space=1, const=False):
        if not isinstance(element_ty, dtype) or isinstance(element_ty, pointer_type):
            raise TypeError(f"expected a scalar dtype as pointee, found {element_ty!r}")
        self.element_ty = element_ty
        self.address_space = address_space
        self.const = const
        self.name = f"pointer<{element_ty.name}>"
        self.primitive_bitwidth = 64

    def is_ptr(self): return True
    def is_floating(self): return False
    def is_int(self): return False
    def is_int_signed(self): return False
    def is_int_unsigned(self): return False
    def is_bool(self): return False
    def is_int1(self): return False

    def __eq__(self, other):
        return isinstance(other, pointer_type) and other.element_ty == self.element_ty

    def __hash__(self):
        return hash(("pointer", self.element_ty.name))

    def __repr__(self):
        return f"pointer_type({self.element_ty!r})"


class block_type(dtype):
    """The type of a tile: element dtype and shape (tensor.type of a non-scalar)."""

    def __init__(self, element_ty, shape):
        self.element_ty = element_ty
        self.shape = tuple(shape)
        self.numel = 1
        for s in self.shape:
            self.numel *= s
        self.name = f"<{list(self.shape)}, {element_ty.name}>"
        self.primitive_bitwidth = element_ty.primitive_bitwidth

    def is_block(self): return True
    def get_block_shapes(self): return self.shape

    @property
    def scalar(self):
        return self.element_ty

    def __eq__(self, other):
        return isinstance(other, block_type) and other.element_ty == self.element_ty and \
            other.shape == self.shape

    def __hash__(self):
        return hash(("block", self.element_ty.name, self.shape))

    def __repr__(self):
        return self.name


int1 = dtype("int1")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
uint16 = dtype("uint16")
uint32 = dtype("uint32")
uint64 = dtype("uint64")
float16 = dtype("fp16")
bfloat16 = dtype("bf16")
float32 = dtype("fp32")
float64 = dtype("fp64")
float8e4nv = dtype("fp8e4nv")
float8e5 = dtype("fp8e5")
float8e4b15 = dtype("fp8e4b15")
float8e4b8 = dtype("fp8e4b8")
float8e5b16 = dtype("fp8e5b16")
void = dtype("void")
pi32_t = pointer_type(int32)

_SCALARS = {d.name: d for d in (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                                float16, bfloat16, float32, float64, float8e4nv, float8e5,
                                float8e4b15, float8e4b8, float8e5b16)}
# Short spellings used in signatures ("*fp32", "i32", "u8").
_ALIASES = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
            "u1": "int1", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
            "bool": "int1", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
            "float64": "fp64", "half": "fp16", "float": "fp32", "double": "fp64",
            "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv", "float8e5": "fp8e5",
            "float8_e5m2": "fp8e5", "float8e4b15": "fp8e4b15", "float8e4b8": "fp8e4b8",
            "float8_e4m3fnuz": "fp8e4b8", "float8e5b16": "fp8e5b16",
            "float8_e5m2fnuz": "fp8e5b16"}


def str_to_ty(name):
    """The dtype named `name`: "fp32", "float32", "i32", "*fp16", "pointer<fp16>"."""
    if isinstance(name, dtype):
        return name
    name = name.strip()
    if name.startswith("*"):
        return pointer_type(str_to_ty(name[1:]))
    if name.startswith("pointer<") and name.endswith(">"):
        return pointer_type(str_to_ty(name[8:-1]))
    name = _ALIASES.get(name, name)
    if name not in _SCALARS:
        raise ValueError(f"unknown dtype '{name}'")
    return _SCALARS[name]


# ---------------------------------------------------------------------------------------
# constexpr
# ---------------------------------------------------------------------------------------

class constexpr:
    """A value known at compile time (Triton's tl.constexpr): annotate a kernel parameter
    with it to specialize on the value, or wrap a global with it to use it in kernels."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"

    def __index__(self):
        return self.value.__index__()

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __bool__(self):
        return bool(self.value)

    def __hash__(self):
        return hash(self.value)

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)

    def __iter__(self):
        return iter(self.value)

    def __getitem__(self, i):
        return constexpr(self.value[_unwrap(i)])


# The Python values a kernel may fold in from a module global (see is_constexpr_annotated).
PLAIN_GLOBAL_TYPES = (bool, int, float, str, tuple)


def is_constexpr_annotated(module_globals, name, value):
    """Whether the global `name` holds a plain value (PLAIN_GLOBAL_TYPES) that its module
    annotates as constexpr (`SCALE: tl.constexpr = 0.5`, also spelled as a string under `from
    __future__ import annotations`): kernels read such a global as a constexpr, though Python
    keeps the plain value. Triton 3.6 rejects it (some later versions and forks accept it);
    LLM-kernel libraries write constants so."""
    if not isinstance(value, PLAIN_GLOBAL_TYPES):
        return False
    notes = module_globals.get("__annotations__")
    if notes is None:  # (annotations kept by the module object only, as from Python 3.14)
        module = sys.modules.get(module_globals.get("__name__", ""))
        try:
            notes = getattr(module, "__annotations__", None)
        except Exception:
            notes = None
    note = notes.get(name) if isinstance(notes, dict) else None
    if note is None:
        return False
    if isinstance(note, str):
        return note.rsplit(".", 1)[-1] == "constexpr"
    return note is constexpr or getattr(note, "__name__", None) == "constexpr"


def _unwrap(x):
    return x.value if isinstance(x, constexpr) else x


def _binary(op):
    def forward(self, other):
        return constexpr(op(self.value, _unwrap(other)))

    def reverse(self, other):
        return constexpr(op(_unwrap(other), self.value))
    return forward, reverse


import operator as _op  # noqa: E402

for _name, _fn in [("add", _op.add), ("sub", _op.sub), ("mul", _op.mul),
                   ("truediv", _op.truediv), ("floordiv", _op.floordiv), ("mod", _op.mod),
                   ("pow", _op.pow), ("and", _op.and_), ("or", _op.or_), ("xor", _op.xor),
                   ("lshift", _op.lshift), ("rshift", _op.rshift)]:
    _f, _r = _binary(_fn)
    setattr(constexpr, f"__{_name}__", _f)
    setattr(constexpr, f"__r{_name}__", _r)
for _name, _fn in [("eq", _op.eq), ("ne", _op.ne), ("lt", _op.lt), ("le", _op.le),
                   ("gt", _op.gt), ("ge", _op.ge)]:
    setattr(constexpr, f"__{_name}__", _binary(_fn)[0])
constexpr.__neg__ = lambda self: constexpr(-self.value)
constexpr.__pos__ = lambda self: constexpr(+self.value)
constexpr.__invert__ = lambda self: constexpr(~self.value)
constexpr.__abs__ = lambda self: constexpr(abs(self.value))


# ---------------------------------------------------------------------------------------
# The code generator in charge (builtins find it here)
# ---------------------------------------------------------------------------------------

_state = threading.local()


def _gen():
    g = getattr(_state, "gen", None)
    if g is None:
        raise RuntimeError("kiln.language functions can only be called inside a @kiln.jit "
                           "function (did you forget @kiln.jit?)")
    return g


def builtin(fn):
    """Marks a kiln.language function: the code generator calls it with compile-time values
    (tensors, constexprs, dtypes) while building a kernel."""
    fn.__kiln_builtin__ = True
    return fn


# ---------------------------------------------------------------------------------------
# tensor
# ---------------------------------------------------------------------------------------

class tensor:
    """A scalar or tile value of the kernel being built: a handle into the front-end
    session. Operators are applied by the code generator through kiln::Builder."""

    __slots__ = ("handle", "_dtype", "_shape")

    def __init__(self, handle):
        self.handle = handle
        self._dtype = None
        self._shape = None

    @property
    def dtype(self):
        if self._dtype is None:
            self._dtype = str_to_ty(_gen().session.dtype(self.handle))
        return self._dtype

    @property
    def shape(self):
        if self._shape is None:
            self._shape = tuple(_gen().session.shape(self.handle))
        return [constexpr(s) for s in self._shape]

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s.value
        return constexpr(n)

    @property
    def type(self):
        shape = [s.value for s in self.shape]
        return block_type(self.dtype, shape) if shape else self.dtype

    def is_tile(self):
        return bool(self.shape)

    def __repr__(self):
        try:
            shape = [s.value for s in self.shape]
            return f"tensor<{self.dtype.name}{shape if shape else ''}>"
        except RuntimeError:
            return f"tensor<handle {self.handle}>"

    def __bool__(self):
        raise TypeError("a kiln tensor has no truth value at compile time; use it in an `if` "
                        "or `while` of a @kiln.jit function, or compare constexprs")

    def __index__(self):
        raise TypeError("expected a constexpr integer, found a run-time tensor")

    # Methods (Triton's tensor member functions) are attached at the end of this module,
    # of kiln.language.math and of kiln.language.standard.


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
    no_format(v.element_ty if isinstance(v, pointer_type) else v, what)
    return v


def no_format(d, what):
    """Raises for Triton's fp8 types that have no format on sm_90 or the CPU backend."""
    if d.name in dtype.NO_FORMAT:
        raise TypeError(f"{what}: tl.{dtype._PUBLIC[d.name]} ({d.name}) has no hardware "
                        f"format on sm_90 or the CPU backend, and Kiln does not emulate it: "
                        f"it cannot be converted, loaded, stored or computed with (keep its "
                        f"bits in a tl.uint8 tile)")


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

# ---------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------

@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="",
         cache_modifier="", eviction_policy="", volatile=False):
    """Loads the tile at `pointer` (a pointer or tile of pointers). Masked-off lanes read
    `other` (undefined when `other` is None)."""
    if hasattr(pointer, "_kiln_load"):  # a block pointer (block_ptr.py)
        if _unwrap(mask) is not None or _unwrap(other) is not None:
            raise ValueError("tl.load of a block pointer takes boundary_check and "
                             "padding_option, not mask and other")
        return pointer._kiln_load(boundary_check, padding_option, cache_modifier,
                                  eviction_policy, volatile)
    if _unwrap(boundary_check) or _unwrap(padding_option):
        raise ValueError("tl.load: boundary_check and padding_option apply to block pointers "
                         "(tl.make_block_ptr) only")
    g = _gen()
    return _wrap(g.session.load(_t(pointer).handle, _opt(mask), _opt(other),
                                _const_str(cache_modifier, "cache_modifier"),
                                _const_str(eviction_policy, "eviction_policy"),
                                _const_bool(volatile, "volatile")))


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """Stores `value` (broadcast to the pointer's shape) at `pointer` where `mask` holds."""
    if hasattr(pointer, "_kiln_store"):  # a block pointer (block_ptr.py)
        if _unwrap(mask) is not None:
            raise ValueError("tl.store of a block pointer takes boundary_check, not mask")
        return pointer._kiln_store(value, boundary_check, cache_modifier, eviction_policy)
    if _unwrap(boundary_check):
        raise ValueError("tl.store: boundary_check applies to block pointers "
                         "(tl.make_block_ptr) only")
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
    `store` are the masked accesses of the block (zero outside the tensor on loads), except
    where the launcher can encode a tensor map from the launch's arguments (see
    CodeGenerator.derived_tensor_map): then sm_90a copies blocks with the TMA."""
    for what, x in (("shape", shape), ("strides", strides), ("block_shape", block_shape)):
        if not isinstance(_unwrap(x), (tuple, list)):
            raise TypeError(f"expected a list as the {what} of tl.make_tensor_descriptor (one "
                            f"entry a dimension), found {_describe(x)}")
    shape, strides = list(_unwrap(shape)), list(_unwrap(strides))
    block = [_const_int(b, "tl.make_tensor_descriptor block_shape") for b in _unwrap(block_shape)]
    if not (len(shape) == len(strides) == len(block)) or not block:
        raise ValueError(f"expected shape, strides and block_shape of one non-zero rank for "
                         f"tl.make_tensor_descriptor, found {len(shape)}, {len(strides)} and "
                         f"{len(block)}")
    if any(b <= 0 or b & (b - 1) for b in block):
        raise ValueError(f"expected a block_shape of powers of two for "
                         f"tl.make_tensor_descriptor, found {block}")
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
    # The launcher encodes a tensor map for it where it can (the TMA then copies its blocks).
    desc = _gen().derived_tensor_map(base, shape, strides[:-1], block)
    return tensor_descriptor(desc, base.handle, [_t(x).handle for x in shape],
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


@builtin
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    """input converted to `dtype` (Triton's rules), or reinterpreted with bitcast=True. A float
    narrowed rounds to nearest even, or toward zero with fp_downcast_rounding="rtz"."""
    d = _dtype(dtype, "cast")
    rounding = _const_str(fp_downcast_rounding, "fp_downcast_rounding")
    return _wrap(_gen().session.cast(_t(input).handle, d.name, _const_bool(bitcast, "bitcast"),
                                     rounding))


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
        if len(set(axes)) != len(axes):
            raise ValueError(f"expand_dims: duplicate axes, normalized axes = {axes}")
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
    """for i in tl.range(start, end, step, ...): a run-time loop like Python's range, with
    Triton 3.6's keywords (constexprs). flatten=True fuses the loop with the one loop nested in
    it (a persistent kernel's tile loop and its K loop) so that copies of the next outer
    iteration's operands overlap this one's end; num_stages, loop_unroll_factor,
    disallow_acc_multi_buffer, warp_specialize and disable_licm are checked and kept as hints
    that Kiln's compiler does not read (docs/language.md)."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False,
                 disable_licm=False):
        if arg2 is None:
            self.start, self.end = constexpr(0), arg1
        else:
            self.start, self.end = arg1, arg2
        self.step = constexpr(1) if step is None else step
        def opt(v, n):
            return None if _unwrap(v) is None else _const_int(v, f"tl.range's {n}")
        self.num_stages = opt(num_stages, "num_stages")
        self.loop_unroll_factor = opt(loop_unroll_factor, "loop_unroll_factor")
        self.disallow_acc_multi_buffer = _const_bool(disallow_acc_multi_buffer,
                                                     "tl.range's disallow_acc_multi_buffer")
        self.flatten = _const_bool(flatten, "tl.range's flatten")
        self.warp_specialize = _const_bool(warp_specialize, "tl.range's warp_specialize")
        self.disable_licm = _const_bool(disable_licm, "tl.range's disable_licm")


@builtin
def static_assert(cond, msg=""):
    """Compile-time assertion (handled by the code generator)."""
    raise AssertionError(msg)


@builtin
def static_print(*values, sep=" ", end="\n", file=None, flush=False):
    """Prints at compile time (handled by the code generator)."""
    _py.print(*values, sep=sep, end=end, file=file, flush=flush)


@builtin
def assume(cond):
    """Lets the compiler assume `cond` (a truth value) holds; a hint: nothing is checked."""
    _gen().session.assume(_t(cond).handle)


@builtin
def debug_barrier():
    """A barrier of all threads of the program (bar.sync on the GPU; nothing on the CPU
    backend, where one thread runs a program)."""
    _gen().session.debug_barrier()


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
# Scan over a combine function (reduce and the standard scans are in kiln.language.standard)
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


# ---------------------------------------------------------------------------------------
# Matrix product
# ---------------------------------------------------------------------------------------

@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None,
        max_num_imprecise_acc=None, out_dtype=float32):
    """The matrix product of two 2-D tiles (M x K and K x N; M, N, K powers of two >= 16),
    or of two 3-D tiles batch by batch (B x M x K and B x K x N), plus `acc` (zeros when
    None): fp16 -> fp32 or fp16 (`out_dtype`), bf16 -> fp32, fp32 -> fp32, int8 -> int32.
    For fp32 inputs `input_precision` is "tf32" (the default, as Triton), "tf32x3" or "ieee";
    `allow_tf32=False` means "ieee"."""
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
# Tensor member functions (as in Triton: x.to(...), x.reshape(...), x.exp(), ...); each
# module of kiln.language attaches its own
# ---------------------------------------------------------------------------------------

def _member(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__kiln_builtin__ = True
    return method


def _tensor_member_fn(*fns):
    """Attaches the builtins `fns` to tensor as methods of their names."""
    for fn in fns:
        setattr(tensor, fn.__name__, _member(fn))


@builtin
def _to(input, dtype, fp_downcast_rounding=None, bitcast=False):
    return cast(input, dtype, fp_downcast_rounding, bitcast)


_to.__name__ = "to"
_tensor_member_fn(_to, broadcast_to, expand_dims, reshape, view, trans, permute,
                  associative_scan, multiple_of, max_contiguous, max_constancy, cast)
tensor.T = property(lambda self: trans(self))


def _matmul(self, other):
    return dot(self, other)


_matmul.__name__ = "__matmul__"
_matmul.__kiln_builtin__ = True
tensor.__matmul__ = _matmul

from .extern import extern, extern_elementwise  # noqa: E402,F401  (as Triton's core)
from .inline_asm import inline_asm_elementwise  # noqa: E402,F401  (as Triton's core)
from .scaled import dot_scaled  # noqa: E402,F401  (as Triton's core)
from .elementwise import map_elementwise  # noqa: E402,F401  (as Triton's core)


# ---------------------------------------------------------------------------------------
# Names of Triton's core that generated code reaches for (TorchInductor's triton_helpers:
# select_one, sort_with_index and pow_integer call core.get_int_dtype; its split scan
# core._constexpr_to_value / core._unwrap_if_constexpr; its bucketize tensor.logical_and)
# ---------------------------------------------------------------------------------------

from .values import constexpr_function as _constexpr_function  # noqa: E402

_INT_DTYPES = {(1, True): "int1", (1, False): "int1", (8, True): "int8", (8, False): "uint8",
               (16, True): "int16", (16, False): "uint16", (32, True): "int32",
               (32, False): "uint32", (64, True): "int64", (64, False): "uint64"}


@_constexpr_function
def get_int_dtype(bitwidth, signed):
    """The integer dtype of `bitwidth` bits, signed or not (Triton's core.get_int_dtype)."""
    name = _INT_DTYPES.get((_unwrap(bitwidth), _py.bool(_unwrap(signed))))
    if name is None:
        raise ValueError(f"Unsupported bitwidth {_unwrap(bitwidth)} and signedness "
                         f"{_unwrap(signed)}")
    return globals()[name]


@builtin
def _unwrap_if_constexpr(o):
    """`o`'s value when it is a compile-time value, else `o` (Triton's)."""
    return o


_constexpr_to_value = _unwrap_if_constexpr  # (Triton's older name)


def _bool_tile(x):
    x = _t(x)
    return x if x.dtype == int1 else cast(x, int1)


@builtin
def _logical_and(input, other):
    return _wrap(_gen().session.binary("and", _bool_tile(input).handle, _bool_tile(other).handle))


@builtin
def _logical_or(input, other):
    return _wrap(_gen().session.binary("or", _bool_tile(input).handle, _bool_tile(other).handle))


_logical_and.__name__, _logical_or.__name__ = "logical_and", "logical_or"
_tensor_member_fn(_logical_and, _logical_or)
