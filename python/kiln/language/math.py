"""kiln.language.math: the math functions of kiln.language (as triton.language.math):
elementwise exp, exp2, log, log2, sqrt, rsqrt, sin, cos, erf, floor, ceil, abs, fdiv, fma,
umulhi, div_rn and sqrt_rn.
``cdiv``, ``sigmoid`` (kiln.language.standard), ``maximum`` and ``minimum``
(kiln.language.core) are here too, as before."""

from .core import _gen, _t, _tensor_member_fn, _wrap, builtin, maximum, minimum

__all__ = ["abs", "ceil", "cdiv", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma",
           "log", "log2", "maximum", "minimum", "rsqrt", "sigmoid", "sin", "sqrt", "sqrt_rn",
           "umulhi"]


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
def fma(x, y, z):
    """x * y + z rounded once (fused multiply-add), on floats; the operands are promoted and
    broadcast as for binary operators."""
    return _wrap(_gen().session.fma(_t(x).handle, _t(y).handle, _t(z).handle))


@builtin
def umulhi(x, y):
    """The most significant N bits of the 2N-bit product of x and y (N = 32 or 64: int32,
    uint32, int64, uint64), the operands read as unsigned."""
    return _wrap(_gen().session.binary("umulhi", _t(x).handle, _t(y).handle))


@builtin
def div_rn(x, y):
    """x / y on fp32, rounded to nearest as IEEE 754 requires (not the GPU's fast division)."""
    return _wrap(_gen().session.binary("div_rn", _t(x).handle, _t(y).handle))


@builtin
def sqrt_rn(x):
    """Square root of fp32 x, rounded to nearest as IEEE 754 requires."""
    return _gen().unary("sqrt_rn", x)


_tensor_member_fn(exp, exp2, log, log2, sqrt, rsqrt, sin, cos, erf, floor, ceil, abs, fma, umulhi)

from .standard import cdiv, sigmoid  # noqa: E402  (standard's sigmoid uses exp)
