"""kiln.language.core.dot_scaled: Triton's matrix product of microscaled blocks (the OCP MX
formats), emulated as Triton emulates it where the hardware has no scaled MMA (Hopper, the
CPU backend): each operand is upcast to bf16 (fp16 when either format is fp16), multiplied by
its scales, and the two go to an ordinary ``tl.dot``.

Everything here composes builtins of kiln.language (bit operations, casts, join, reshape,
broadcast, where, dot); the C++ Builder checks each of them. What this module checks itself
is what only dot_scaled knows: the format names, the operand dtypes a format allows, the
packed and scaled shapes.

Element formats (Triton 3.6's names): ``e2m1`` (fp4, two elements per uint8, the first in the
low four bits), ``e4m3`` and ``e5m2`` (fp8, given as uint8 bits or as float8e4nv/float8e5),
``bf16`` and ``fp16`` (given as uint16 bits or as the float type). Scales are e8m0 (uint8 s
means 2^(s - 127)), one per 32 consecutive elements along K; s = 255 is NaN.
"""

from .core import (_const_bool, _describe, _dtype, _gen, _t, _unwrap, bfloat16, broadcast_to,
                   builtin, cast, dot, expand_dims, float16, float32, float8e4nv, float8e5,
                   int32, permute, reshape, tensor, trans, uint8, uint16, where)

__all__ = ["dot_scaled"]

# The formats dot_scaled takes, with the dtype that holds one element (None: e2m1, packed)
# and the unsigned integer dtype that may carry its bits instead.
_FORMATS = {"e2m1": (None, uint8), "e4m3": (float8e4nv, uint8), "e5m2": (float8e5, uint8),
            "bf16": (bfloat16, uint16), "fp16": (float16, uint16)}
# Elements along K that share one e8m0 scale (the OCP MX block size).
_SCALE_GROUP = 32
# e8m0 code 0xFF is NaN (OCP MX v1.0, section 5.4.1).
_E8M0_NAN = 0xFF
# IEEE binary32 fields: the exponent field starts at bit 23 (8 bits, bias 127), the sign at 31.
_F32_MANTISSA_BITS = 23
_F32_SIGN_BIT = 31


def _b(op, a, b):
    return _gen().binary(op, a, b)


def _format(fmt, side):
    f = _unwrap(fmt)
    if not isinstance(f, str):
        raise TypeError(f"expected a constexpr string as dot_scaled's {side}_format, found "
                        f"{_describe(fmt)}")
    if f not in _FORMATS:
        raise ValueError(f"dot_scaled's {side}_format '{f}' is not supported: expected one of "
                         f"{', '.join(_FORMATS)} (Triton 3.6's formats)")
    return f


def _elements(x, fmt, side):
    """x as a tensor of the format's element dtype (bitcast from its unsigned bits)."""
    elem, bits = _FORMATS[fmt]
    if x.dtype == elem:
        return x
    if x.dtype != bits:
        want = f"{bits}" if elem is None else f"{elem} or {bits} (its bits)"
        raise TypeError(f"dot_scaled's {side} in format '{fmt}' must be {want}, found "
                        f"{x.dtype}" + (" (two e2m1 values per byte)" if elem is None else ""))
    return x if elem is None else cast(x, elem, bitcast=True)


def _fp4_to_float(nibble, compute):
    """e2m1 codes (int32 0..15: sign, 2 exponent bits of bias 1, 1 mantissa bit) as
    `compute` floats; built as fp32 bit patterns, exact: 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    sign = _b("lshift", _b("rshift", nibble, 3), _F32_SIGN_BIT)
    exp = _b("and", _b("rshift", nibble, 1), 3)
    man = _b("and", nibble, 1)
    # exponent e > 0: (1 + m/2) * 2^(e - 1), i.e. fp32 exponent field e - 1 + 127.
    normal = _b("or", _b("lshift", _b("add", exp, 126), _F32_MANTISSA_BITS),
                _b("lshift", man, _F32_MANTISSA_BITS - 1))
    # exponent 0: the subnormal m * 0.5 (fp32 exponent field 126 when m = 1).
    subnormal = _b("mul", man, 126 << _F32_MANTISSA_BITS)
    bits = _b("or", where(_b("eq", exp, 0), subnormal, normal), sign)
    return cast(cast(bits, float32, bitcast=True), compute)


def _unpack_fp4(x, operand, k_pack, compute):
    """The e2m1 tile packed in the uint8 tile x, unpacked along K (k_pack) or along M (lhs)
    or N (rhs): element 2i of the packed dimension is the low nibble of byte i."""
    byte = cast(x, int32)
    lo = _fp4_to_float(_b("and", byte, 0xF), compute)
    hi = _fp4_to_float(_b("rshift", byte, 4), compute)
    from .shapes import join
    pairs = join(lo, hi)  # [..., R, C, 2]: the pair of byte (r, c) last
    shape = [s.value for s in x.shape]
    rank = len(shape)
    packed_rows = (operand == "rhs") == bool(k_pack)  # rhs K and lhs M are the row dimension
    if packed_rows:  # [..., R, C, 2] -> [..., R, 2, C] -> [..., 2R, C]
        order = list(range(rank - 1)) + [rank, rank - 1]
        pairs = permute(pairs, order)
        return reshape(pairs, shape[:-2] + [2 * shape[-2], shape[-1]])
    return reshape(pairs, shape[:-1] + [2 * shape[-1]])


def _scale_factors(scale, operand, value_shape, fast_math, compute):
    """The e8m0 scales broadcast to the upcast operand's shape, as `compute` floats:
    2^(s - 127) (0 for s = 0, as Triton's bit-shift conversion), NaN for s = 255 unless
    fast_math (then infinity, as in Triton)."""
    rank = len(value_shape)
    k = value_shape[-1] if operand == "lhs" else value_shape[-2]
    rows = value_shape[-2] if operand == "lhs" else value_shape[-1]
    want = value_shape[:-2] + [rows, k // _SCALE_GROUP]
    shape = [s.value for s in scale.shape]
    if scale.dtype != uint8:
        raise TypeError(f"dot_scaled's {operand}_scale must be uint8 (e8m0 scales), found "
                        f"{scale.dtype}")
    if k % _SCALE_GROUP or shape != want:
        raise ValueError(f"dot_scaled's {operand}_scale must have shape {want} (one e8m0 scale "
                         f"per {_SCALE_GROUP} elements along K = {k}), found {shape}")
    s = cast(scale, int32)
    factor = cast(cast(_b("lshift", s, _F32_MANTISSA_BITS), float32, bitcast=True), compute)
    if not fast_math:
        factor = where(_b("eq", s, _E8M0_NAN), float("nan"), factor)
    # [..., rows, k/32] -> [..., rows, k/32, 32] -> [..., rows, k]
    factor = broadcast_to(expand_dims(factor, rank), want + [_SCALE_GROUP])
    factor = reshape(factor, value_shape[:-2] + [rows, k])
    if operand == "rhs":  # the rhs scales come as [N, K/32]: transpose to the rhs's [K, N]
        factor = trans(factor, list(range(rank - 2)) + [rank - 1, rank - 2])
    return factor


def _operand(x, scale, fmt, operand, k_pack, fast_math, compute):
    """One operand of the emulated product: upcast to `compute`, times its scales."""
    x = _elements(_t(x), fmt, operand)
    if fmt == "e2m1":
        v = _unpack_fp4(x, operand, k_pack, compute)
    else:
        if not k_pack:
            raise ValueError(f"dot_scaled's {operand}_k_pack=False applies to the packed "
                             f"format e2m1 only, found format '{fmt}'")
        v = x if x.dtype == compute else cast(x if x.dtype.primitive_bitwidth > 8 else
                                              cast(x, float32), compute)
    if _unwrap(scale) is None:
        return v
    if not isinstance(scale, tensor):
        raise TypeError(f"expected a uint8 tile or None as dot_scaled's {operand}_scale, found "
                        f"{_describe(scale)}")
    return _b("mul", v, _scale_factors(scale, operand, [s.value for s in v.shape], fast_math,
                                       compute))


@builtin
def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None,
               fast_math=False, lhs_k_pack=True, rhs_k_pack=True, out_dtype=float32):
    """The matrix product of two microscaled blocks: (lhs * 2^(lhs_scale - 127)) @
    (rhs * 2^(rhs_scale - 127)) + acc, lhs [M, K] (or [B, M, K]) and rhs [K, N] in the
    formats e2m1 (two per uint8 along K, or along M / N with *_k_pack=False), e4m3, e5m2,
    bf16 or fp16; scales uint8 e8m0 of shape [M, K // 32] and [N, K // 32] (or None: no
    scaling). Emulated as Triton does without scaled MMA: both operands upcast to bf16 (fp16
    if either format is fp16), scaled, then tl.dot. A scale of 255 gives NaN unless
    fast_math."""
    lf, rf = _format(lhs_format, "lhs"), _format(rhs_format, "rhs")
    fast = _const_bool(fast_math, "dot_scaled's fast_math")
    lk = _const_bool(lhs_k_pack, "dot_scaled's lhs_k_pack")
    rk = _const_bool(rhs_k_pack, "dot_scaled's rhs_k_pack")
    out = _dtype(out_dtype, "dot_scaled's out_dtype")
    a, b = _t(lhs), _t(rhs)
    if len(a.shape) not in (2, 3) or len(a.shape) != len(b.shape):
        raise ValueError(f"dot_scaled needs two 2-D or two 3-D tiles, found lhs "
                         f"{[s.value for s in a.shape]} and rhs {[s.value for s in b.shape]}")
    compute = float16 if "fp16" in (lf, rf) else bfloat16
    a = _operand(a, lhs_scale, lf, "lhs", lk, fast, compute)
    b = _operand(b, rhs_scale, rf, "rhs", rk, fast, compute)
    ka, kb = a.shape[-1].value, b.shape[-2].value
    if ka != kb:
        raise ValueError(f"dot_scaled's operands hold different K once unpacked: lhs "
                         f"{[s.value for s in a.shape]} and rhs {[s.value for s in b.shape]} "
                         f"(formats '{lf}' and '{rf}')")
    return dot(a, b, acc, out_dtype=out)

