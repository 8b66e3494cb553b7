"""kiln.language.math: the math functions of kiln.language (as triton.language.math):
elementwise exp, exp2, log, log2, sqrt, rsqrt, sin, cos, erf, floor, ceil, abs, fdiv, and the
names Triton's math module has that Kiln does not implement yet (umulhi, fma).
``cdiv``, ``sigmoid`` (kiln.language.standard), ``maximum`` and ``minimum``
(kiln.language.core) are here too, as before."""

from .core import _gen, _tensor_member_fn, _unsupported, builtin, maximum, minimum

__all__ = ["abs", "ceil", "cdiv", "cos", "erf", "exp", "exp2", "fdiv", "floor", "log", "log2",
           "maximum", "minimum", "rsqrt", "sigmoid", "sin", "sqrt"]


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


umulhi = _unsupported("umulhi")
fma = _unsupported("fma")


_tensor_member_fn(exp, exp2, log, log2, sqrt, rsqrt, sin, cos, erf, floor, ceil, abs)

from .standard import cdiv, sigmoid  # noqa: E402  (standard's sigmoid uses exp)
