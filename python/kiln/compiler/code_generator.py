"""The @kiln.jit code generator: walks a kernel's Python AST and builds it through the C++
front-end session (kiln._C.Session, a facade over kiln::Builder).

Python semantics stay Python: constexpr values (numbers, dtypes, None, tuples) are computed
here, `if` on a constexpr picks a branch, tl.static_range unrolls, and @kiln.jit callees are
inlined. Everything on run-time values is one Builder call; type rules live in C++.

Control flow follows Triton: a run-time `if`/`for`/`while` carries the variables that exist
before it and are assigned inside it (found from the AST); variables first assigned inside it
are not visible after it. Assigning a Python number to a variable makes it a run-time scalar
(Triton's to_tensor); annotate it `x: tl.constexpr = ...` to keep it a constexpr.

The class is split along its seams: this module holds the entry point, locations and errors,
the visitor's dispatch and the values it builds (literals, arithmetic on constexprs and
tensors); kiln.compiler.statements the statements and run-time control flow,
kiln.compiler.exits blocks and the exits from them (return, break, continue),
kiln.compiler.expressions the expressions, kiln.compiler.calls the calls (builtins, inlined
@kiln.jit functions, the Python builtins kernels may use).
"""

import ast
import builtins
import numbers
import os

from .. import _C
from ..errors import CompilationError
from ..language import core as lc
from ..language.core import constexpr, dtype, str_to_ty, tensor
from .calls import _BUILTINS, CallsMixin
from .common import _BINOP_TEXT, _PY_BINOP, _Frame, _Unavailable, _describe, _unwrap
from .exits import ExitsMixin
from .expressions import ExpressionsMixin
from .statements import StatementsMixin

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
    "Lambda": "lambda expressions",
    "SetComp": "set comprehensions", "DictComp": "dict comprehensions",
    "GeneratorExp": "generator expressions", "Dict": "dict literals", "Set": "set literals",
    "Await": "'await'", "Yield": "'yield'", "YieldFrom": "'yield from'",
    "NamedExpr": "assignment expressions (:=)",
}


def _launcher_recipe(kernel, recipe, arg_params):
    """A tensor map recipe on a kernel parameter (kTensorMapRecipeAttr: base, dtype code, rank,
    block, then per extent and per stride a parameter number (an extent's possibly plus a
    factor << 32, the int32 parameter times it) or -1 - value, and a final 0 for
    a map the kernel reads unguarded: Builder::derivedTensorMap's) in the launcher's terms
    (python/src/Launcher.cpp): the arguments' indices (a tuple element's with its field), and
    a final 1 for a map the compiler made (the kernel reads it only where its extents and
    strides are positive)."""
    rank = recipe[2]
    fields = 3 + 3 * rank - 1
    if len(recipe) not in (fields, fields + 1):
        raise RuntimeError(f"internal error: kernel '{kernel}': a malformed tensor map recipe "
                           f"{list(recipe)}")

    def index(p):
        # a plain argument, or an element of a tuple argument (its arg_params entry as is)
        ap = arg_params[p] if 0 <= p < len(arg_params) else None
        if not isinstance(ap, int) or (ap >> 16 and not
                                       TUPLE_FIELD <= ap >> 16 < TUPLE_FIELD + MAX_TUPLE_ELEMENTS):
            raise RuntimeError(f"internal error: kernel '{kernel}': a tensor map recipe "
                               f"names parameter {p}, which is not a plain argument")
        return ap

    def source(s):
        # -1 - a constant, a parameter, or a parameter times (s >> 32) (an extent)
        return s if s < 0 else index(s & 0xFFFFFFFF) | (s >> 32) << 32

    out = [index(recipe[0]), recipe[1], rank, *recipe[3:3 + rank]]
    out += [source(s) for s in recipe[3 + rank:fields]]
    guarded = len(recipe) == fields or recipe[fields] != 0
    return out + [1] if guarded else out


# The arg_params field of element k of a tuple argument: index | (kTupleField + k) << 16
# (read by the launcher, python/src/Launcher.cpp).
TUPLE_FIELD = 0x20
MAX_TUPLE_ELEMENTS = 0x7F - TUPLE_FIELD


def _tuple_specs(spec):
    """The element specs of a tuple argument's spec "(spec,(spec,spec),...)": strings, and
    lists for the tuples nested in it."""
    def parse(i):
        out, start = [], i
        while spec[i] != ")":
            if spec[i] == "(":
                sub, i = parse(i + 1)
                out.append(sub)
                start = i
            elif spec[i] == ",":
                if i > start:
                    out.append(spec[start:i])
                i += 1
                start = i
            else:
                i += 1
        if i > start:
            out.append(spec[start:i])
        return out, i + 1
    return parse(1)[0]


class _Elements:
    """A tuple argument's elements while the kernel's parameters are made: parameter numbers,
    constexprs and nested _Elements; `kind` the NamedTuple type to rebuild, or None."""

    def __init__(self, items, kind):
        self.items, self.kind = items, kind


def _is_namedtuple(v):
    return isinstance(v, tuple) and hasattr(type(v), "_fields")


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
    itemsize = max(1, str_to_ty(dt).primitive_bitwidth // 8)  # (bool: a byte an element)
    # (no tensor map recipe names these: their words are not the launch's arguments)
    arg_specs.append(_C.ArgSpec(f"{name}.map", "tensormap", 0, False))
    arg_specs.append(_C.ArgSpec(f"{name}.base", "*" + dt, 16, False))
    for d in range(rank):
        arg_specs.append(_C.ArgSpec(f"{name}.shape{d}", "i32", 16 if flags[d] == "D" else 0,
                                    False))
    for d in range(rank - 1):  # strides are multiples of 16 bytes (checked at launch)
        arg_specs.append(_C.ArgSpec(f"{name}.stride{d}", "i64", max(1, 16 // itemsize),
                                    False))
    arg_params += [index | f << 16 for f in range(1, 3 + 2 * rank - 1)]
    return str_to_ty(dt), block


class CodeGenerator(ExitsMixin, StatementsMixin, ExpressionsMixin, CallsMixin):
    """Builds one kernel variant. `info` is the kernel's FunctionInfo (kiln.runtime.jit)."""

    def __init__(self, info, debug=False):
        self.info = info
        self.debug = debug  # tl.device_assert acts only in debug mode (as in Triton)
        self.session = _C.Session()
        self.frames = []
        self.node = None
        self.globals_used = {}
        self.allow_globals = os.environ.get("KILN_ALLOW_NON_CONSTEXPR_GLOBALS") == "1"
        # While tl.map_elementwise builds its function: the shape of the mapped tiles (a
        # scalar there stands for a tile of this shape; kiln.language.elementwise).
        self.elementwise_shape = None
        # Handles of pointers to constant data: tl.const parameters and the pointers
        # arithmetic computes from them (stores through them are errors).
        self.const_pointers = set()

    @property
    def frame(self):
        return self.frames[-1]

    # -----------------------------------------------------------------------------------
    # Tensor maps the launcher encodes for descriptors made in the kernel
    # -----------------------------------------------------------------------------------

    def derived_tensor_map(self, base, shape, strides, block):
        """A tensor map parameter for `tl.make_tensor_descriptor(base, shape, strides + [1],
        block)` when the launcher can encode it from the launch's arguments, so that the TMA
        can copy its blocks as for a host TensorDescriptor (Builder::derivedTensorMap decides,
        for both front ends): its handle (one per distinct descriptor), or None: then the
        descriptor's accesses are masked loads and stores. The launcher reads the map's recipe
        from arg_params (_generate turns the kernel's recipes into its terms)."""
        def handle(x):
            v = x.value if isinstance(x, constexpr) else x
            if isinstance(v, tensor):
                return v.handle
            if isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63:
                return self.session.int_const(v)
            return None

        handles = [handle(x) for x in (base, *shape, *strides)]
        if any(h is None for h in handles):
            return None
        made = self.session.derived_tensor_map(handles[0], handles[1:1 + len(shape)],
                                               handles[1 + len(shape):], list(block))
        if made is None:
            return None
        h, param = made
        while len(self._arg_params) <= param:
            self._arg_params.append(None)  # filled from the kernel's recipe in _generate
        return h

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
        runtime, descs, tuples = [], [], []
        from ..language import tensor_descriptor
        for i, (name, spec, value) in enumerate(zip(info.arg_names, specs, values)):
            if spec == "constexpr":
                scope[name] = value if isinstance(value, (dtype, tuple)) else constexpr(value)
            elif spec == "none":
                scope[name] = constexpr(None)
            elif spec.startswith("tensordesc:"):
                descs.append((name, len(arg_specs), _descriptor_params(name, spec, i, arg_specs,
                                                                       arg_params)))
            elif spec.startswith("("):
                # a tuple of arguments (Triton 3.3's tuple parameters, nested tuples too): each
                # element a parameter of its own (numbered depth first), the name bound to the
                # tuple of their values (a NamedTuple's type kept)
                leaves = [0]

                def elements(specs, where, value):
                    out = []
                    for k, es in enumerate(specs):
                        sub = value[k] if isinstance(value, tuple) and k < len(value) else None
                        if isinstance(es, list):
                            out.append(elements(es, f"{where}[{k}]", sub))
                        elif es == "none":
                            out.append(constexpr(None))
                        elif es.endswith(":1"):
                            out.append(constexpr(1))
                        else:
                            ty, _, div = es.partition(":")
                            out.append(len(arg_specs))
                            arg_specs.append(_C.ArgSpec(f"{where}[{k}]", ty,
                                                        int(div) if div else 0))
                            arg_params.append(i | (TUPLE_FIELD + leaves[0]) << 16)
                        if not isinstance(es, list):  # (the launcher reads every leaf)
                            leaves[0] += 1
                    return _Elements(out, type(value) if _is_namedtuple(value) else None)
                tuples.append((name, elements(_tuple_specs(spec), name, value)))
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
        for name, j in runtime:  # fp8 types Kiln has no format for (kiln.language.core)
            ty = specs[info.arg_names.index(name)].partition(":")[0].lstrip("*")
            if ty in dtype.NO_FORMAT:
                try:
                    lc.no_format(str_to_ty(ty), f"parameter '{name}'")
                except TypeError as e:
                    raise self.error(str(e)) from None
        try:
            self.session.begin_kernel(info.name, arg_specs)
            self._arg_params = arg_params
            self._param_of = {}  # handle of a runtime parameter -> (index, spec)
            for name, j in runtime:
                scope[name] = tensor(self.session.arg(j))
                self._param_of[scope[name].handle] = (info.arg_names.index(name),
                                                      specs[info.arg_names.index(name)])
                if name in info.const_params and \
                        specs[info.arg_names.index(name)].startswith("*"):
                    self.const_pointers.add(scope[name].handle)
            def materialize(elems):
                vals = tuple(materialize(e) if isinstance(e, _Elements) else
                             tensor(self.session.arg(e)) if isinstance(e, int) else e
                             for e in elems.items)
                return elems.kind(*vals) if elems.kind else vals
            for name, elems in tuples:
                scope[name] = materialize(elems)
            for name, j, (dt, block) in descs:
                rank = len(block)
                h = [self.session.arg(j + k) for k in range(2 + 2 * rank - 1)]
                scope[name] = tensor_descriptor(h[0], h[1], h[2:2 + rank], h[2 + rank:], dt,
                                                block)
            self.exec_block(tree.body)
            self._set_loc(tree, info)
            # sm_90a: the compiler may turn a loop's pointer tiles of dot operands into loads
            # of tensor maps it appends to the kernel (-kiln-pointer-tiles-to-descriptors),
            # each encoded at launch from the arguments its recipe names.
            source = self.session.finish_kernel(
                tma_pointer_tiles=getattr(self, "tma_pointer_tiles", False),
                attention_tiles=getattr(self, "tma_attention_tiles", False))
            for param, recipe in self.session.tensor_map_recipes():
                entry = _launcher_recipe(info.name, recipe, arg_params)
                if param < len(arg_params):
                    arg_params[param] = entry
                else:
                    arg_params.append(entry)
            if None in arg_params:
                raise RuntimeError(f"internal error: kernel '{info.name}': a tensor map "
                                   f"parameter without a recipe")
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
        from ..runtime.jit import JITFunction
        import types
        if isinstance(v, (constexpr, dtype)):
            self.globals_used[(id(g), name)] = (g, name, v)
            return v
        from ..language.values import ConstexprFunction
        if v is None or isinstance(v, (types.ModuleType, JITFunction, type, ConstexprFunction)) or \
                getattr(v, "__kiln_builtin__", False) or \
                getattr(v, "__module__", "") .startswith("kiln.language"):
            return v
        if (self.allow_globals and isinstance(v, lc.PLAIN_GLOBAL_TYPES)) or \
                lc.is_constexpr_annotated(g, name, v):
            self.globals_used[(id(g), name)] = (g, name, v)
            return constexpr(v)
        raise self.error(
            f"cannot access global variable '{name}' ({type(v).__name__}) from a @kiln.jit "
            f"function: kernels read only globals that are constexpr "
            f"(`{name} = tl.constexpr(...)` or `{name}: tl.constexpr = ...`), dtypes, modules "
            f"and @kiln.jit functions (KILN_ALLOW_NON_CONSTEXPR_GLOBALS=1 lifts this)")

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
            # A tensor's shape is a list (as in Triton); the kernel's [2] and (2,) are tuples
            # here: Triton's `x.shape == [2]` compares them as sequences.
            x, y = (tuple(v) if isinstance(v, list) else v for v in (x, y))
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
            from ..language import dot
            return dot(a, b)
        for x in (a, b):
            if isinstance(x, tuple):
                raise TypeError(f"expected a tensor or a number for "
                                f"'{_BINOP_TEXT.get(op, op)}', found a tuple")
        ta, tb = self.to_tensor(a), self.to_tensor(b)
        r = tensor(self.session.binary(op, ta.handle, tb.handle))
        if ta.handle in self.const_pointers or tb.handle in self.const_pointers:
            self.const_pointers.add(r.handle)  # a pointer to constant data stays one
        return r

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
