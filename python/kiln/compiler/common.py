"""What the parts of the code generator share: the operator tables, the values it keeps in
scopes (a name that may not be read here, a function being generated) and how it names a
compile-time value in messages."""

import ast

from ..language.core import constexpr, dtype, tensor

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or",
           ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift", ast.Pow: "pow",
           ast.MatMult: "matmul"}
_BINOP_TEXT = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
               "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "pow": "**",
               "matmul": "@"}
_PY_BINOP = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "truediv": lambda a, b: a / b, "floordiv": lambda a, b: a // b,
             "mod": lambda a, b: a % b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
             "xor": lambda a, b: a ^ b, "lshift": lambda a, b: a << b,
             "rshift": lambda a, b: a >> b, "pow": lambda a, b: a ** b,
             "matmul": lambda a, b: a @ b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
             "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b,
             "ne": lambda a, b: a != b}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
           ast.NotEq: "ne"}


class _Unavailable:
    """A name that exists but may not be read here (defined in one branch, in a loop)."""

    def __init__(self, reason):
        self.reason = reason


def _unwrap(x):
    return x.value if isinstance(x, constexpr) else x


def _describe(x):
    if isinstance(x, tensor):
        return repr(x)
    if isinstance(x, constexpr):
        return f"constexpr {x.value!r}"
    if isinstance(x, dtype):
        return f"dtype {x}"
    if isinstance(x, tuple):
        return f"tuple of {len(x)}"
    return f"{type(x).__name__}"


class _Frame:
    """One function being generated: the kernel or an inlined callee."""

    def __init__(self, info, scope, call_site=None):
        self.info = info
        self.scope = scope
        self.call_site = call_site
        self.returned = False  # returned at the top level (no run-time condition)
        self.return_value = None
        self.region_depth = 0
        self.loops = []  # "static" / "runtime", innermost last (kiln.compiler.exits)
        self.wanted = frozenset()  # new names that must flow out of the enclosing ifs
        self.return_sites = []  # (ast.Return, types) of returns under run-time conditions

