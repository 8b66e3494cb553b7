"""kiln.language.math: the math functions of kiln.language (as triton.language.math)."""

from . import (abs, ceil, cdiv, cos, erf, exp, exp2, fdiv, floor, log, log2, maximum, minimum,
               rsqrt, sigmoid, sin, sqrt)

__all__ = ["abs", "ceil", "cdiv", "cos", "erf", "exp", "exp2", "fdiv", "floor", "log", "log2",
           "maximum", "minimum", "rsqrt", "sigmoid", "sin", "sqrt"]
