"""Kiln's language objects: dtypes, constexpr, and the compile-time tensor.

Everything here mirrors ``triton.language`` (Triton 3.x). None of it holds type rules: a
tensor is a handle into the C++ front-end session (``kiln._C.Session``), and every
operation on tensors is one call into ``kiln::Builder`` through it.
"""

import threading

__all__ = [
    "dtype", "pointer_type", "block_type", "constexpr", "tensor", "builtin",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "void", "pi32_t",
]


# ---------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------

class dtype:
    """A scalar element type, named as Triton names it ("fp32", "int32", "bf16")."""

    SINT_TYPES = ("int8", "int16", "int32", "int64")
    UINT_TYPES = ("int1", "uint8", "uint16", "uint32", "uint64")
    FP8_TYPES = ("fp8e4nv", "fp8e5")
    FP_TYPES = ("fp16", "bf16", "fp32", "fp64") + FP8_TYPES
    _BITS = {"int1": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8,
             "uint16": 16, "uint32": 32, "uint64": 64, "fp16": 16, "bf16": 16, "fp32": 32,
             "fp64": 64, "fp8e4nv": 8, "fp8e5": 8, "void": 0}
    # The Python-visible attribute name of each dtype (tl.float32 prints as such).
    _PUBLIC = {"int1": "int1", "int8": "int8", "int16": "int16", "int32": "int32",
               "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
               "uint64": "uint64", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
               "fp64": "float64", "fp8e4nv": "float8e4nv", "fp8e5": "float8e5",
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
    def is_floating(self): return self.name in self.FP_TYPES
    def is_int1(self): return self.name == "int1"
    def is_bool(self): return self.is_int1()
    def is_int_signed(self): return self.name in self.SINT_TYPES
    def is_int_unsigned(self): return self.name in self.UINT_TYPES
    def is_int(self): return self.is_int_signed() or self.is_int_unsigned()
    def is_standard_floating(self): return self.is_floating()
    def is_ptr(self): return False
    def is_block(self): return False
    def is_void(self): return self.name == "void"

    @property
    def scalar(self):
        return self

    @property
    def fp_mantissa_width(self):
        return {"fp16": 10, "bf16": 7, "fp32": 23, "fp64": 52, "fp8e4nv": 3,
                "fp8e5": 2}.get(self.name, 0)

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
void = dtype("void")
pi32_t = pointer_type(int32)

_SCALARS = {d.name: d for d in (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                                float16, bfloat16, float32, float64, float8e4nv, float8e5)}
# Short spellings used in signatures ("*fp32", "i32", "u8").
_ALIASES = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
            "u1": "int1", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
            "bool": "int1", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32",
            "float64": "fp64", "half": "fp16", "float": "fp32", "double": "fp64",
            "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv", "float8e5": "fp8e5",
            "float8_e5m2": "fp8e5"}


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

    # Methods (Triton's tensor member functions) are attached in kiln.language.__init__.
