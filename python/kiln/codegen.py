"""The @kiln.jit code generator: walks a kernel's Python AST and builds it through the C++
front-end session (kiln._C.Session, a facade over kiln::Builder).

Python semantics stay Python: constexpr values (numbers, dtypes, None, tuples) are computed
here, `if` on a constexpr picks a branch, tl.static_range unrolls, and @kiln.jit callees are
inlined. Everything on run-time values is one Builder call; type rules live in C++.

Control flow follows Triton: a run-time `if`/`for`/`while` carries the variables that exist
before it and are assigned inside it (found from the AST); variables first assigned inside it
are not visible after it. Assigning a Python number to a variable makes it a run-time scalar
(Triton's to_tensor); annotate it `x: tl.constexpr = ...` to keep it a constexpr.
"""

import ast
import builtins
import numbers
import os

from . import _C
from .errors import CompilationError
from .language import core as lc
from .language.core import constexpr, dtype, str_to_ty, tensor

_UNSUPPORTED_STMT = {
    "With": "'with' statements", "AsyncWith": "'async with'", "Try": "'try' statements",
    "TryStar": "'try' statements", "Raise": "'raise' statements", "Delete": "'del'",
    "Global": "'global' declarations", "Nonlocal": "'nonlocal' declarations",
    "FunctionDef": "nested function definitions", "AsyncFunctionDef": "nested functions",
    "ClassDef": "class definitions", "Import": "'import' inside kernels",
    "ImportFrom": "'import' inside kernels", "Match": "'match' statements",
    "AsyncFor": "'async for'",
}
_UNSUPPORTED_EXPR = {
    "Lambda": "lambda expressions", "ListComp": "list comprehensions",
    "SetComp": "set comprehensions", "DictComp": "dict comprehensions",
    "GeneratorExp": "generator expressions", "Dict": "dict literals", "Set": "set literals",
    "Await": "'await'", "Yield": "'yield'", "YieldFrom": "'yield from'",
    "NamedExpr": "assignment expressions (:=)",
}
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


def assigned_names(stmts):
    """Names a list of statements assigns (not looking into nested scopes)."""
    out = set()

    def targets(t):
        if isinstance(t, ast.Name):
            out.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    class V(ast.NodeVisitor):
        def visit_Assign(self, n):
            for t in n.targets:
                targets(t)

        def visit_AugAssign(self, n):
            targets(n.target)

        def visit_AnnAssign(self, n):
            targets(n.target)

        def visit_For(self, n):
            targets(n.target)
            for s in n.body + n.orelse:
                self.visit(s)

        def visit_FunctionDef(self, n):
            pass

        visit_Lambda = visit_ClassDef = visit_AsyncFunctionDef = visit_FunctionDef

    v = V()
    for s in stmts:
        v.visit(s)
    return out


def _contains(stmts, kinds):
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, kinds):
                return n
    return None


def _is_constexpr_like(x):
    return x is None or isinstance(x, (constexpr, dtype))


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
        self.returned = False
        self.return_value = None
        self.region_depth = 0


def _descriptor_params(name, spec, index, arg_specs, arg_params):
    """The kernel parameters of a tensor descriptor argument with spec
    "tensordesc:<dtype>:<block, 'x'-separated>:<per extent 'D' (a multiple of 16) or '-'>":
    its tensor map, base pointer, int32 extents and int64 strides (all but the last, which is
    1). Each gets an arg_params entry `index | field << 16` (kDescriptorField, read by the
    launcher in python/src/Launcher.cpp): field 1 the map, 2 the base, 3 + d extent d,
    3 + rank + d stride d. Returns (element dtype, block shape)."""
    _, dt, block, flags = spec.split(":")
    block = [int(b) for b in block.split("x")]
    rank = len(block)
    itemsize = str_to_ty(dt).primitive_bitwidth // 8
    arg_specs.append(_C.ArgSpec(f"{name}.map", "tensormap", 0))
    arg_specs.append(_C.ArgSpec(f"{name}.base", "*" + dt, 16))
    for d in range(rank):
        arg_specs.append(_C.ArgSpec(f"{name}.shape{d}", "i32", 16 if flags[d] == "D" else 0))
    for d in range(rank - 1):  # strides are multiples of 16 bytes (checked at launch)
        arg_specs.append(_C.ArgSpec(f"{name}.stride{d}", "i64", max(1, 16 // itemsize)))
    arg_params += [index | f << 16 for f in range(1, 3 + 2 * rank - 1)]
    return str_to_ty(dt), block


class CodeGenerator:
    """Builds one kernel variant. `info` is the kernel's FunctionInfo (kiln.jit)."""

    def __init__(self, info, debug=False):
        self.info = info
        self.debug = debug  # tl.device_assert acts only in debug mode (as in Triton)
        self.session = _C.Session()
        self.frames = []
        self.node = None
        self.globals_used = {}
        self.allow_globals = os.environ.get("KILN_ALLOW_NON_CONSTEXPR_GLOBALS") == "1"

    @property
    def frame(self):
        return self.frames[-1]

    # -----------------------------------------------------------------------------------
    # Entry point
    # -----------------------------------------------------------------------------------

    def generate(self, specs, values):
        """Builds the kernel for the parameter specs ("*fp32:16", "i32", "constexpr", ...)
        and values; returns (the kernel module, a kiln._C.KernelSource held in memory,
        indices of the parameters the kernel takes)."""
        prev = getattr(lc._state, "gen", None)
        lc._state.gen = self
        try:
            return self._generate(specs, values)
        except CompilationError as e:
            raise e.with_traceback(None) from None  # the user's location is in the message
        finally:
            lc._state.gen = prev

    def _generate(self, specs, values):
        info = self.info
        tree = info.tree
        scope, arg_specs, arg_params = {}, [], []
        runtime, descs = [], []
        from .language import tensor_descriptor
        for i, (name, spec, value) in enumerate(zip(info.arg_names, specs, values)):
            if spec == "constexpr":
                scope[name] = value if isinstance(value, (dtype, tuple)) else constexpr(value)
            elif spec == "none":
                scope[name] = constexpr(None)
            elif spec.startswith("tensordesc:"):
                descs.append((name, len(arg_specs), _descriptor_params(name, spec, i, arg_specs,
                                                                       arg_params)))
            elif spec.endswith(":1"):
                scope[name] = constexpr(1)
            else:
                ty, _, div = spec.partition(":")
                runtime.append((name, len(arg_specs)))
                arg_specs.append(_C.ArgSpec(name, ty, int(div) if div else 0))
                arg_params.append(i)
        self._set_loc(tree, info)
        self.node = tree
        self.frames.append(_Frame(info, scope))
        try:
            self.session.begin_kernel(info.name, arg_specs)
            for name, j in runtime:
                scope[name] = tensor(self.session.arg(j))
            for name, j, (dt, block) in descs:
                rank = len(block)
                h = [self.session.arg(j + k) for k in range(2 + 2 * rank - 1)]
                scope[name] = tensor_descriptor(h[0], h[1], h[2:2 + rank], h[2 + rank:], dt,
                                                block)
            self.exec_block(tree.body)
            self._set_loc(tree, info)
            source = self.session.finish_kernel()
        except _C.BuildError as e:
            raise self._from_build_error(e) from None
        finally:
            self.frames.pop()
        return source, arg_params

    # -----------------------------------------------------------------------------------
    # Locations and errors
    # -----------------------------------------------------------------------------------

    def _position(self, node, info):
        """(line, 1-based column) of `node` in its file; binary operators point at the
        operator."""
        line = info.begin_line + node.lineno - 1
        col = node.col_offset
        left = getattr(node, "left", None)
        if isinstance(node, (ast.BinOp, ast.Compare)) and left is not None and \
                left.end_lineno == node.lineno:
            text = info.src_lines[node.lineno - 1] if node.lineno - 1 < len(info.src_lines) else ""
            i = left.end_col_offset
            while i < len(text) and text[i] in " \t()":
                i += 1
            if i < len(text):
                col = i
        return line, col + 1 + info.col_shift

    def _set_loc(self, node, info=None):
        info = info or self.frame.info
        line, col = self._position(node, info)
        self.session.set_location(info.file, line, col)

    def _source_line(self, file, line):
        for f in reversed(self.frames) if self.frames else [_Frame(self.info, {})]:
            info = f.info
            if info.file == file and info.begin_line <= line < info.begin_line + len(info.src_lines):
                return info.raw_lines[line - info.begin_line]
        import linecache
        text = linecache.getline(file, line)
        return text or None

    def error(self, message, node=None):
        """A CompilationError at `node` (default: the node being visited)."""
        node = node or self.node
        info = self.frame.info if self.frames else self.info
        line, col = self._position(node, info)
        return CompilationError(self.info.name, info.file, line, col, message,
                                self._source_line(info.file, line))

    def unsupported(self, what, node=None):
        return self.error(f"unsupported construct: {what} are not supported in kiln kernels",
                          node)

    def _from_build_error(self, e):
        kernel, file, line, col, message = e.args[:5]
        return CompilationError(self.info.name, file, line, col, message,
                                self._source_line(file, line) if file else None)

    # -----------------------------------------------------------------------------------
    # Visiting
    # -----------------------------------------------------------------------------------

    def visit(self, node):
        prev = self.node
        located = hasattr(node, "lineno")
        if located:
            self.node = node
            self._set_loc(node)
        try:
            method = getattr(self, "visit_" + type(node).__name__, None)
            if method is None:
                name = type(node).__name__
                what = _UNSUPPORTED_STMT.get(name) or _UNSUPPORTED_EXPR.get(name) or \
                    f"'{name}' syntax"
                raise self.unsupported(what, node)
            return method(node)
        except CompilationError:
            raise
        except _C.BuildError as e:
            raise self._from_build_error(e) from None
        except RecursionError:
            raise
        except Exception as e:
            raise self.error(str(e) or type(e).__name__) from None
        finally:
            self.node = prev
            if located and prev is not None and hasattr(prev, "lineno"):
                self._set_loc(prev)

    def exec_block(self, stmts):
        for s in stmts:
            if self.frame.returned:
                break
            self.visit(s)

    # -----------------------------------------------------------------------------------
    # Names and values
    # -----------------------------------------------------------------------------------

    def lookup(self, name):
        scope = self.frame.scope
        if name in scope:
            v = scope[name]
            if isinstance(v, _Unavailable):
                raise self.error(v.reason)
            return v
        g = self.frame.info.globals
        if name in g:
            return self._global(g, name, g[name])
        if name in _BUILTINS:
            return _BUILTINS[name]
        if hasattr(builtins, name):
            raise self.error(f"Python builtin '{name}' is not supported in kernels (kernels use "
                             f"{', '.join(sorted(_BUILTINS))} on compile-time values)")
        raise self.error(f"name '{name}' is not defined")

    def _global(self, g, name, v):
        from .runtime.jit import JITFunction
        import types
        if isinstance(v, (constexpr, dtype)):
            self.globals_used[(id(g), name)] = (g, name, v)
            return v
        if v is None or isinstance(v, (types.ModuleType, JITFunction, type)) or \
                getattr(v, "__kiln_builtin__", False) or \
                getattr(v, "__module__", "") .startswith("kiln.language"):
            return v
        if self.allow_globals and isinstance(v, (bool, int, float, str, tuple)):
            self.globals_used[(id(g), name)] = (g, name, v)
            return constexpr(v)
        raise self.error(
            f"cannot access global variable '{name}' ({type(v).__name__}) from a @kiln.jit "
            f"function: kernels read only globals that are constexpr "
            f"(`{name} = tl.constexpr(...)`), dtypes, modules and @kiln.jit functions "
            f"(KILN_ALLOW_NON_CONSTEXPR_GLOBALS=1 lifts this)")

    def to_tensor(self, x, weak=True):
        """x as a tensor; Python numbers become (weak) literals."""
        if isinstance(x, tensor):
            return x
        v = _unwrap(x)
        s = self.session
        if isinstance(v, bool):
            h = s.bool_const(v)
        elif isinstance(v, numbers.Integral):
            v = int(v)
            if -(1 << 63) <= v < (1 << 63):
                h = s.int_const(v)
            elif (1 << 63) <= v < (1 << 64):
                h = s.uint_const(v)
            else:
                raise TypeError(f"expected an integer that fits 64 bits, found {v}")
        elif isinstance(v, numbers.Real):
            h = s.float_const(float(v))
        else:
            raise TypeError(f"expected a tensor or a number, found {_describe(x)}")
        if not weak:
            h = s.materialize(h)
        return tensor(h)

    def sanitize(self, v):
        """What assigning `v` to a variable stores (Triton's rule: numbers become run-time
        scalars; dtypes, None, strings and tuples stay what they are)."""
        if isinstance(v, tensor):
            return v
        if isinstance(v, tuple):
            return tuple(self.sanitize(e) for e in v)
        if isinstance(v, constexpr):
            inner = v.value
            if isinstance(inner, (bool, numbers.Real)) and not isinstance(inner, dtype):
                return self.to_tensor(inner, weak=False)
            if isinstance(inner, tuple):
                return tuple(self.sanitize(constexpr(e)) for e in inner)
            return v
        if v is None:
            return constexpr(None)
        if isinstance(v, (bool, numbers.Real)):
            return self.to_tensor(v, weak=False)
        return v

    def binary(self, op, a, b):
        """a <op> b: Python arithmetic on constexprs, kiln::Builder on tensors."""
        if not isinstance(a, tensor) and not isinstance(b, tensor):
            x, y = _unwrap(a), _unwrap(b)
            if isinstance(x, tuple) or isinstance(y, tuple):
                if op in ("eq", "ne", "add", "mul"):
                    return constexpr(_PY_BINOP[op](x, y)) if not (
                        isinstance(x, tuple) and any(isinstance(e, tensor) for e in x)) else \
                        _PY_BINOP[op](x, y)
            if op in ("minimum", "maximum", "minimum_nan", "maximum_nan", "cdiv"):
                if op == "cdiv":
                    return constexpr((x + y - 1) // y)
                return constexpr(builtins.min(x, y) if op.startswith("min") else builtins.max(x, y))
            try:
                return constexpr(_PY_BINOP[op](x, y))
            except ZeroDivisionError:
                raise ValueError(f"division by zero in constexpr '{_BINOP_TEXT.get(op, op)}'")
        if op == "pow":
            raise TypeError("'**' is not supported on tensors (use multiplication, or "
                            "tl.exp2(y * tl.log2(x)))")
        if op == "matmul":
            # Triton's tensor.__matmul__: tl.dot(a, b) with its defaults.
            from .language import dot
            return dot(a, b)
        for x in (a, b):
            if isinstance(x, tuple):
                raise TypeError(f"expected a tensor or a number for "
                                f"'{_BINOP_TEXT.get(op, op)}', found a tuple")
        ta, tb = self.to_tensor(a), self.to_tensor(b)
        return tensor(self.session.binary(op, ta.handle, tb.handle))

    def unary(self, op, x):
        if not isinstance(x, tensor):
            v = _unwrap(x)
            if op == "neg":
                return constexpr(-v)
            if op == "not":
                return constexpr(not v)
            if op == "invert":
                return constexpr(~v)
            if op == "abs":
                return constexpr(builtins.abs(v))
            x = self.to_tensor(x)
        return tensor(self.session.unary(op, x.handle))

    # -----------------------------------------------------------------------------------
    # Statements
    # -----------------------------------------------------------------------------------

    def visit_Expr(self, node):
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assert(self, node):
        # Triton: `assert cond, msg` in a kernel is tl.device_assert(cond, msg).
        from . import language as tl
        cond = self.visit(node.test)
        msg = self.visit(node.msg) if node.msg is not None else ""
        tl.device_assert(cond, msg)

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for t in node.targets:
            self.assign(t, value)

    def assign(self, target, value):
        if isinstance(target, ast.Name):
            self.frame.scope[target.id] = self.sanitize(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            v = _unwrap(value)
            if not isinstance(v, (tuple, list)):
                raise self.error(f"cannot unpack {_describe(value)} into "
                                 f"{len(target.elts)} names: expected a tuple", target)
            if len(v) != len(target.elts):
                raise self.error(f"cannot unpack a tuple of {len(v)} into "
                                 f"{len(target.elts)} names", target)
            for t, e in zip(target.elts, v):
                self.assign(t, e if isinstance(value, tuple) else constexpr(e))
        elif isinstance(target, ast.Subscript):
            raise self.unsupported("assignments to subscripts (tensors are immutable values)",
                                   target)
        elif isinstance(target, ast.Attribute):
            raise self.unsupported("assignments to attributes", target)
        else:
            raise self.unsupported(f"assignments to '{type(target).__name__}'", target)

    def visit_AnnAssign(self, node):
        annotation = self.visit(node.annotation)
        if node.value is None:
            raise self.unsupported("annotations without a value")
        if annotation is constexpr or annotation == "constexpr" or \
                annotation == "tl.constexpr":
            if not isinstance(node.target, ast.Name):
                raise self.unsupported("constexpr annotations on non-names")
            name = node.target.id
            value = self.visit(node.value)
            if isinstance(value, tensor):
                raise self.error(f"expected a compile-time value for '{name}: tl.constexpr', "
                                 f"found a run-time {value!r}")
            if name in self.frame.scope:
                raise self.error(f"'{name}' is already defined; a constexpr cannot be "
                                 f"reassigned")
            self.frame.scope[name] = value if isinstance(value, (dtype, tuple)) else \
                constexpr(value)
            return
        self.assign(node.target, self.visit(node.value))

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise self.unsupported("augmented assignments to subscripts or attributes")
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.unsupported(f"operator '{type(node.op).__name__}'")
        cur = self.lookup(node.target.id)
        value = self.visit(node.value)
        self.frame.scope[node.target.id] = self.sanitize(self.binary(op, cur, value))

    def visit_Return(self, node):
        if self.frame.region_depth:
            raise self.error("'return' inside a run-time if/for/while is not supported "
                             "(return at the end of the function, or in an `if` on a "
                             "constexpr)")
        value = self.visit(node.value) if node.value is not None else None
        if len(self.frames) == 1 and _unwrap(value) is not None:
            raise self.error(f"a kernel cannot return a value, found {_describe(value)}")
        self.frame.returned = True
        self.frame.return_value = value

    def visit_Break(self, node):
        raise self.unsupported("'break' statements (loops run to their bound; use a while "
                               "loop with a condition)")

    def visit_Continue(self, node):
        raise self.unsupported("'continue' statements (use an if around the rest of the body)")

    # --- if ----------------------------------------------------------------------------

    def visit_If(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, tensor):
            self._runtime_if(node, cond)
            return
        v = _unwrap(cond)
        if type(v) not in (bool, int, type(None)):
            raise self.error(f"expected a run-time scalar or a constexpr bool/int/None as the "
                             f"if condition, found {_describe(cond)}", node.test)
        self.exec_block(node.body if v else node.orelse)

    def _carried(self, names, liveins, what):
        """The names among `names` that flow through a run-time region: tensors (or
        tuples of tensors) defined before it. Constexprs may not be reassigned there."""
        out = []
        for n in sorted(names):
            if n not in liveins or isinstance(liveins[n], _Unavailable):
                continue
            v = liveins[n]
            if isinstance(v, tensor) or (isinstance(v, tuple) and _all_tensors(v)):
                out.append(n)
            elif not callable(v) or isinstance(v, constexpr):
                raise self.error(f"cannot reassign '{n}' ({_describe(v)}) inside {what}: "
                                 f"constexprs are fixed at compile time")
        return out

    def _flatten(self, value, name, out):
        if isinstance(value, tensor):
            out.append(value.handle)
            return "t"
        if isinstance(value, tuple):
            return tuple(self._flatten(v, name, out) for v in value)
        if isinstance(value, constexpr) and isinstance(value.value, (bool, numbers.Real)):
            out.append(self.to_tensor(value.value, weak=False).handle)
            return "t"
        raise self.error(f"'{name}' holds {_describe(value)} here; only tensors (and tuples "
                         f"of tensors) can flow through run-time control flow")

    @staticmethod
    def _unflatten(struct, handles, pos=0):
        if struct == "t":
            return tensor(handles[pos]), pos + 1
        vals = []
        for s in struct:
            v, pos = CodeGenerator._unflatten(s, handles, pos)
            vals.append(v)
        return tuple(vals), pos

    def _yield(self, scope, names, structs, what):
        handles = []
        for i, n in enumerate(names):
            if n not in scope or isinstance(scope[n], _Unavailable):
                raise self.error(f"'{n}' is assigned in only one branch of this if at run "
                                 f"time; define it before the if or in both branches")
            s = self._flatten(scope[n], n, handles)
            if structs[i] is None:
                structs[i] = s
            elif structs[i] != s:
                raise self.error(f"'{n}' changes structure {what}: {structs[i]} vs {s}")
        return handles

    def _runtime_if(self, node, cond):
        ret = _contains(node.body + node.orelse, ast.Return)
        if ret is not None:
            raise self.error("'return' inside an if on a run-time condition is not supported",
                             ret)
        frame = self.frame
        liveins = dict(frame.scope)
        then_names, else_names = assigned_names(node.body), assigned_names(node.orelse)
        carried = self._carried(then_names | else_names, liveins, "an if on a run-time value")
        new = sorted(n for n in then_names & else_names
                     if n not in liveins or isinstance(liveins[n], _Unavailable))
        names = carried + new
        structs = [None] * len(names)
        flat_names = []

        def then_fn():
            frame.scope = dict(liveins)
            frame.region_depth += 1
            try:
                self.exec_block(node.body)
            finally:
                frame.region_depth -= 1
            hs = self._yield(frame.scope, names, structs, "between the branches of the if")
            return hs

        def else_fn():
            frame.scope = dict(liveins)
            frame.region_depth += 1
            try:
                self.exec_block(node.orelse)
            finally:
                frame.region_depth -= 1
            return self._yield(frame.scope, names, structs, "between the branches of the if")

        # Non-tensor values assigned in both branches must agree (Python values are static).
        for n in names:
            flat_names.append(n)
        use_else = bool(node.orelse) or bool(names)
        try:
            results = self.session.if_then_else(cond.handle, then_fn,
                                                else_fn if use_else else None, flat_names)
        finally:
            frame.scope = liveins
            self.node = node
            self._set_loc(node)
        pos = 0
        for i, n in enumerate(names):
            frame.scope[n], pos = self._unflatten(structs[i], results, pos)
        for n in (then_names | else_names) - set(names):
            if n not in liveins:
                frame.scope[n] = _Unavailable(
                    f"'{n}' is defined in only one branch of the if at line "
                    f"{frame.info.begin_line + node.lineno - 1}; define it before the if or "
                    f"in both branches")

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, tensor):
            v = _unwrap(cond)
            if type(v) not in (bool, int, type(None)):
                raise self.error(f"expected a run-time scalar or a constexpr bool/int/None as "
                                 f"the condition, found {_describe(cond)}", node.test)
            return self.visit(node.body if v else node.orelse)
        frame = self.frame

        def branch(expr):
            def fn():
                frame.region_depth += 1
                try:
                    return [self.to_tensor(self.visit(expr)).handle]
                finally:
                    frame.region_depth -= 1
            return fn
        (h,) = self.session.if_then_else(cond.handle, branch(node.body), branch(node.orelse),
                                         ["<conditional expression>"])
        return tensor(h)

    # --- loops -------------------------------------------------------------------------

    def visit_For(self, node):
        if node.orelse:
            raise self.unsupported("'else' clauses on loops")
        if not isinstance(node.target, ast.Name):
            raise self.unsupported("for-loop targets other than a single name", node.target)
        it = node.iter
        if not isinstance(it, ast.Call):
            raise self.error("expected range(...), tl.range(...) or tl.static_range(...) as "
                             "the loop iterator", it)
        fn = self.visit(it.func)
        args = [self.visit(a) for a in it.args]
        kwargs = {k.arg: self.visit(k.value) for k in it.keywords}
        from .language import static_range, range as tl_range
        if fn is static_range:
            r = static_range(*args, **kwargs)
            for i in builtins.range(r.start.value, r.end.value, r.step.value):
                self.frame.scope[node.target.id] = constexpr(i)
                self.exec_block(node.body)
                if self.frame.returned:
                    break
            return
        if fn is builtins.range:
            if kwargs:
                raise self.error("range() takes no keyword arguments", it)
            if not 1 <= len(args) <= 3:
                raise self.error(f"range expected 1 to 3 arguments, got {len(args)}", it)
            flatten = False
            lb, ub, step = (constexpr(0), args[0], constexpr(1)) if len(args) == 1 else \
                (args[0], args[1], args[2] if len(args) == 3 else constexpr(1))
        elif fn is tl_range:
            r = tl_range(*args, **kwargs)
            lb, ub, step = r.start, r.end, r.step
            flatten = r.flatten
        else:
            raise self.error(f"expected range(...), tl.range(...) or tl.static_range(...) as "
                             f"the loop iterator, found {_describe(fn)}", it)
        self._runtime_for(node, lb, ub, step, flatten)

    def _run_loop_body(self, frame, body, names, structs):
        """Runs a run-time loop body one region deeper and returns its loop-carried values,
        flattened in the order of `names`; a value whose structure changed is an error."""
        frame.region_depth += 1
        try:
            self.exec_block(body)
        finally:
            frame.region_depth -= 1
        out = []
        for i, n in enumerate(names):
            if self._flatten(frame.scope[n], n, out) != structs[i]:
                raise self.error(f"loop-carried '{n}' changes structure in the loop")
        return out

    def _runtime_for(self, node, lb, ub, step, flatten=False):
        frame = self.frame
        target = node.target.id
        negative = isinstance(step, constexpr) and isinstance(step.value, int) and step.value < 0
        if isinstance(step, constexpr) and step.value == 0:
            raise self.error("expected a non-zero loop step, found 0", node.iter)
        if negative:
            # for i in range(lb, ub, -s): t in [0, cdiv(lb - ub, s)), i = lb - t * s.
            mag = constexpr(-step.value)
            start = self.to_tensor(lb, weak=False)
            trips = self.binary("cdiv", self.binary("sub", lb, ub), mag)
            lbt, ubt, stept = self.to_tensor(0, False), self.to_tensor(trips, False), \
                self.to_tensor(1, False)
        else:
            lbt, ubt, stept = (self.to_tensor(x, weak=False) for x in (lb, ub, step))
        ret = _contains(node.body, ast.Return)
        if ret is not None:
            raise self.error("'return' inside a run-time for loop is not supported", ret)
        liveins = dict(frame.scope)
        assigned = assigned_names(node.body) - {target}
        names = self._carried(assigned, liveins, "a run-time loop")
        structs, inits = [], []
        for n in names:
            structs.append(self._flatten(liveins[n], n, inits))

        def body(iv, iters):
            frame.scope = dict(liveins)
            pos = 0
            for i, n in enumerate(names):
                frame.scope[n], pos = self._unflatten(structs[i], iters, pos)
            ivt = tensor(iv)
            if negative:
                ivt = self.binary("sub", start, self.binary("mul", ivt, mag))
            frame.scope[target] = ivt
            return self._run_loop_body(frame, node.body, names, structs)

        try:
            results = self.session.for_loop(lbt.handle, ubt.handle, stept.handle, inits, body,
                                            _flat_names(names, structs), flatten)
        finally:
            frame.scope = liveins
            self.node = node
            self._set_loc(node)
        self._rebind(names, structs, results, assigned, liveins, node, "loop")
        frame.scope[target] = _Unavailable(
            f"loop variable '{target}' is not available after its run-time loop (line "
            f"{frame.info.begin_line + node.lineno - 1})")

    def _rebind(self, names, structs, results, assigned, liveins, node, what):
        frame = self.frame
        pos = 0
        for i, n in enumerate(names):
            frame.scope[n], pos = self._unflatten(structs[i], results, pos)
        for n in assigned - set(names):
            if n not in liveins or isinstance(liveins[n], _Unavailable):
                frame.scope[n] = _Unavailable(
                    f"'{n}' is defined inside the {what} at line "
                    f"{frame.info.begin_line + node.lineno - 1} and is not available after "
                    f"it; define it before the {what} to carry it")

    def visit_While(self, node):
        if node.orelse:
            raise self.unsupported("'else' clauses on loops")
        ret = _contains(node.body, ast.Return)
        if ret is not None:
            raise self.error("'return' inside a run-time while loop is not supported", ret)
        frame = self.frame
        liveins = dict(frame.scope)
        assigned = assigned_names(node.body)
        names = self._carried(assigned, liveins, "a run-time loop")
        structs, inits = [], []
        for n in names:
            structs.append(self._flatten(liveins[n], n, inits))

        def bind(args):
            frame.scope = dict(liveins)
            pos = 0
            for i, n in enumerate(names):
                frame.scope[n], pos = self._unflatten(structs[i], args, pos)

        def cond_fn(args):
            bind(args)
            c = self.visit(node.test)
            if not isinstance(c, tensor):
                v = _unwrap(c)
                if type(v) not in (bool, int):
                    raise self.error(f"expected a run-time scalar condition for while, found "
                                     f"{_describe(c)}", node.test)
                c = self.to_tensor(bool(v), weak=False)
            return c.handle

        def body_fn(args):
            bind(args)
            return self._run_loop_body(frame, node.body, names, structs)

        try:
            results = self.session.while_loop(inits, cond_fn, body_fn,
                                              _flat_names(names, structs))
        finally:
            frame.scope = liveins
            self.node = node
            self._set_loc(node)
        self._rebind(names, structs, results, assigned, liveins, node, "loop")

    # -----------------------------------------------------------------------------------
    # Expressions
    # -----------------------------------------------------------------------------------

    def visit_Constant(self, node):
        return constexpr(node.value)

    def visit_Name(self, node):
        return self.lookup(node.id)

    def visit_Tuple(self, node):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out.extend(_unwrap(self.visit(e.value)))
            else:
                out.append(self.visit(e))
        return tuple(out)

    visit_List = visit_Tuple

    def visit_JoinedStr(self, node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                x = self.visit(v.value)
                if isinstance(x, tensor):
                    raise self.error("f-strings may only format compile-time values, found "
                                     f"{x!r}", v)
                spec = ""
                if v.format_spec is not None:
                    spec = _unwrap(self.visit(v.format_spec))
                conv = {115: str, 114: repr, 97: ascii}.get(v.conversion, lambda y: y)
                parts.append(format(conv(_unwrap(x)), spec))
        return constexpr("".join(parts))

    def visit_Attribute(self, node):
        obj = self.visit(node.value)
        if isinstance(obj, tensor):
            if node.attr == "T":
                from . import language as tl
                return tl.trans(obj)
            if not hasattr(tensor, node.attr):
                raise self.error(f"a tensor has no attribute '{node.attr}'")
            return getattr(obj, node.attr)
        target = _unwrap(obj)
        try:
            v = getattr(target, node.attr)
        except AttributeError:
            raise self.error(f"{_describe(obj)} has no attribute '{node.attr}'") from None
        if isinstance(v, (bool, numbers.Real, str, tuple)) and not isinstance(v, dtype):
            return constexpr(v)
        return v

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(base, tensor):
            return self._index_tensor(base, index)
        b = _unwrap(base)
        i = _unwrap(index)
        if isinstance(i, tensor):
            raise self.error("expected a constexpr index, found a run-time tensor")
        if isinstance(b, (tuple, list)):
            r = b[i]
            if isinstance(base, constexpr) and not isinstance(r, (tensor, dtype)):
                return constexpr(r)
            return tuple(r) if isinstance(r, list) else r
        raise self.error(f"{_describe(base)} cannot be indexed")

    def _index_tensor(self, x, index):
        items = index if isinstance(index, tuple) else (index,)
        rank = len(x.shape)
        axis, kept = 0, 0
        for it in items:
            v = _unwrap(it)
            if v is None:
                x = tensor(self.session.expand_dims(x.handle, axis))
                axis += 1
            elif isinstance(v, slice) and v == slice(None, None, None):
                axis += 1
                kept += 1
            else:
                raise self.error(f"unsupported tensor index {_describe(it)}: kiln tensors take "
                                 f"None and ':' (x[:, None], x[None, :])")
        if kept > rank:
            raise self.error(f"too many ':' indices ({kept}) for a tensor of rank {rank}")
        return x

    def visit_Slice(self, node):
        parts = []
        for p in (node.lower, node.upper, node.step):
            v = self.visit(p) if p is not None else None
            if isinstance(v, tensor):
                raise self.error("expected constexpr slice bounds, found a run-time tensor")
            parts.append(_unwrap(v))
        return constexpr(slice(*parts))

    def visit_BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.unsupported(f"operator '{type(node.op).__name__}'")
        return self.binary(op, self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node):
        x = self.visit(node.operand)
        if isinstance(node.op, ast.UAdd):
            return x if isinstance(x, tensor) else constexpr(+_unwrap(x))
        op = {ast.USub: "neg", ast.Not: "not", ast.Invert: "invert"}[type(node.op)]
        return self.unary(op, x)

    def visit_Compare(self, node):
        if len(node.ops) != 1:
            raise self.unsupported("chained comparisons (a < b < c); split them with "
                                   "'&'")
        a, b = self.visit(node.left), self.visit(node.comparators[0])
        op = node.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)):
            same = _unwrap(a) is _unwrap(b)
            return constexpr(same if isinstance(op, ast.Is) else not same)
        if isinstance(op, (ast.In, ast.NotIn)):
            if isinstance(a, tensor) or isinstance(b, tensor):
                raise self.error("'in' needs compile-time values")
            r = _unwrap(a) in _unwrap(b)
            return constexpr(r if isinstance(op, ast.In) else not r)
        return self.binary(_CMPOPS[type(op)], a, b)

    def visit_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        cur = self.visit(node.values[0])
        for expr in node.values[1:]:
            if not isinstance(cur, tensor):
                v = _unwrap(cur)
                if (is_and and not v) or (not is_and and v):
                    return cur  # Python short-circuit on a constexpr
                cur = self.visit(expr)
                continue
            rhs = self.visit(expr)
            cur = tensor(self.session.binary("logical_and" if is_and else "logical_or",
                                             cur.handle, self.to_tensor(rhs).handle))
        return cur

    def visit_Starred(self, node):
        raise self.unsupported("starred expressions outside calls and tuples")

    # --- calls -------------------------------------------------------------------------

    def _call_args(self, node):
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.visit(a.value)
                args.extend(_unwrap(v) if not isinstance(v, tuple) else v)
            else:
                args.append(self.visit(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.unsupported("**kwargs in calls")
            kwargs[k.arg] = self.visit(k.value)
        return args, kwargs

    def visit_Call(self, node):
        from .runtime.jit import JITFunction
        from . import language as tl
        fn = self.visit(node.func)
        if fn is tl.static_assert:
            return self._static_assert(node)
        if fn is tl.static_print:
            args, kwargs = self._call_args(node)
            print(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
            return None
        if isinstance(fn, JITFunction):
            args, kwargs = self._call_args(node)
            return self._inline(fn, args, kwargs, node)
        if fn in (tl.static_range, tl.range) or fn is builtins.range:
            raise self.error(f"{getattr(fn, '__name__', fn)}(...) can only be the iterator of "
                             f"a for loop")
        if fn is constexpr:
            args, kwargs = self._call_args(node)
            return constexpr(_unwrap(args[0]) if args else None)
        if getattr(fn, "__kiln_builtin__", False):
            args, kwargs = self._call_args(node)
            r = fn(*args, **kwargs)
            return constexpr(None) if r is None else r
        special = _SPECIAL_BUILTINS.get(fn)
        if special is not None:
            args, kwargs = self._call_args(node)
            return special(self, args, kwargs)
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, (dtype, str, tuple, int, float)):
            # Methods of compile-time values: x.dtype.is_floating(), "{}".format(K), ...
            args, kwargs = self._call_args(node)
            if any(isinstance(a, tensor) for a in list(args) + list(kwargs.values())):
                raise TypeError(f"{getattr(fn, '__name__', fn)}() needs compile-time values")
            r = fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
            return r if isinstance(r, (dtype, tuple)) else constexpr(r)
        if isinstance(fn, type) and issubclass(fn, dtype):
            args, kwargs = self._call_args(node)
            return fn(*[_unwrap(a) for a in args])
        name = getattr(fn, "__qualname__", None) or _describe(fn)
        raise self.error(f"unsupported call to '{name}': kernels call kiln.language functions, "
                         f"@kiln.jit functions, and min, max, len, int, float, bool, abs, "
                         f"isinstance, getattr on compile-time values")

    def _static_assert(self, node):
        if not 1 <= len(node.args) <= 2 or node.keywords:
            raise self.error("tl.static_assert takes a condition and an optional message")
        cond = self.visit(node.args[0])
        if isinstance(cond, tensor):
            raise self.error("tl.static_assert needs a compile-time condition, found a "
                             "run-time tensor")
        if not _unwrap(cond):
            msg = _unwrap(self.visit(node.args[1])) if len(node.args) == 2 else ""
            raise self.error(f"static assertion failed{': ' + str(msg) if msg else ''}")
        return constexpr(None)

    def call_function(self, fn, args, kwargs=None):
        """Calls the @kiln.jit function `fn` (inlined) from a builtin, at the current node."""
        from .runtime.jit import JITFunction
        if not isinstance(fn, JITFunction):
            raise TypeError(f"expected a @kiln.jit function, found {_describe(fn)}")
        return self._inline(fn, list(args), dict(kwargs or {}), self.node)

    def _inline(self, fn, args, kwargs, node):
        info = fn.info
        for f in self.frames:
            if f.info is info:
                raise self.error(f"recursive call to @kiln.jit function '{info.name}' is not "
                                 f"supported")
        try:
            bound = info.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise self.error(f"bad call to '{info.name}': {e}") from None
        scope = {}
        for p in info.signature.parameters.values():
            if p.name in bound.arguments:
                v = bound.arguments[p.name]
            elif p.default is not p.empty:
                v = p.default
            else:
                raise self.error(f"missing argument '{p.name}' in call to '{info.name}'")
            if not isinstance(v, (tensor, constexpr, dtype, tuple)):
                v = constexpr(v) if v is None or isinstance(v, (bool, numbers.Real, str)) else v
            if p.name in info.constexpr_params and isinstance(v, tensor):
                raise self.error(f"expected a constexpr for parameter '{p.name}' of "
                                 f"'{info.name}', found a run-time {v!r}")
            scope[p.name] = v
        caller = self.frame
        line = caller.info.begin_line + node.lineno - 1
        frame = _Frame(info, scope, call_site=(caller.info.file, line))
        self.frames.append(frame)
        try:
            self.exec_block(info.tree.body)
        except CompilationError as e:
            e.add_note_line(f"in '{info.name}', called from {caller.info.file}:{line}")
            raise
        finally:
            self.frames.pop()
            self.node = node
            self._set_loc(node)
        return frame.return_value


def _all_tensors(t):
    return all(isinstance(e, tensor) or (isinstance(e, tuple) and _all_tensors(e)) for e in t)


def _flat_names(names, structs):
    out = []

    def walk(prefix, s):
        if s == "t":
            out.append(prefix)
        else:
            for i, x in enumerate(s):
                walk(f"{prefix}[{i}]", x)
    for n, s in zip(names, structs):
        walk(n, s)
    return out


# ---------------------------------------------------------------------------------------
# Python builtins usable in kernels
# ---------------------------------------------------------------------------------------

def _minmax(name):
    def fn(gen, args, kwargs):
        if kwargs:
            raise TypeError(f"{name}() takes no keyword arguments in kernels")
        if len(args) == 1:
            args = list(_unwrap(args[0]))
        if not args:
            raise TypeError(f"{name}() expected at least one argument")
        if not any(isinstance(a, tensor) for a in args):
            return constexpr(getattr(builtins, name)(_unwrap(a) for a in args))
        cur = args[0]
        for a in args[1:]:
            cur = gen.binary("minimum" if name == "min" else "maximum", cur, a)
        return cur
    return fn


def _static(pyfn):
    def fn(gen, args, kwargs):
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, tensor):
                raise TypeError(f"{pyfn.__name__}() needs compile-time values, found {a!r}"
                                + (" (use x.to(tl.int32))" if pyfn is int else
                                   " (use x.to(tl.float32))" if pyfn is float else ""))
        r = pyfn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
        return r if isinstance(r, (tensor, dtype)) or callable(r) and not \
            isinstance(r, (bool, numbers.Real)) else constexpr(r)
    return fn


def _abs(gen, args, kwargs):
    (x,) = args
    return gen.unary("abs", x)


def _len(gen, args, kwargs):
    (x,) = args
    if isinstance(x, tensor):
        shape = x.shape
        if not shape:
            raise TypeError("len() of a scalar tensor")
        return shape[0]
    return constexpr(len(_unwrap(x)))


def _getattr(gen, args, kwargs):
    obj, name = args[0], _unwrap(args[1])
    if isinstance(obj, tensor):
        return getattr(obj, name)
    v = getattr(_unwrap(obj), name)
    return constexpr(v) if isinstance(v, (bool, numbers.Real, str)) else v


def _print(gen, args, kwargs):
    # Triton: print(...) in a kernel is tl.device_print(...).
    from . import language as tl
    return tl.device_print(*args, **kwargs)


_SPECIAL_BUILTINS = {
    builtins.min: _minmax("min"), builtins.max: _minmax("max"), builtins.len: _len,
    builtins.int: _static(int), builtins.float: _static(float), builtins.bool: _static(bool),
    builtins.isinstance: _static(isinstance), builtins.getattr: _getattr,
    builtins.abs: _abs, builtins.print: _print,
}
_BUILTINS = {f.__name__: f for f in (builtins.range, builtins.min, builtins.max, builtins.len,
                                     builtins.int, builtins.float, builtins.bool,
                                     builtins.isinstance, builtins.getattr, builtins.abs,
                                     builtins.print)}
