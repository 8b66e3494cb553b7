"""The statements of a kernel for the code generator (kiln.compiler.code_generator):
assignments, assert, and run-time control flow (if, for, while) with the variables they
carry. Blocks, return, break and continue, and the exits they take through ifs and loops, are
kiln.compiler.exits'."""

import ast
import builtins
import inspect
import numbers
import operator

from ..language.core import constexpr, dtype, tensor
from .common import _BINOPS, _CMPOPS, _Unavailable, _describe, _unwrap
from .exits import RET, exit_kinds

def assigned_names(stmts, truth=None):
    """Names a list of statements assigns (not looking into nested scopes). `truth(test)`,
    when given, says whether an `if` test is known true or false at compile time (None: not
    known); only the branch such an if takes counts, as only that one is compiled."""
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

        def visit_If(self, n):
            known = truth(n.test) if truth else None
            for s in (n.body + n.orelse if known is None else n.body if known else n.orelse):
                self.visit(s)

        def visit_FunctionDef(self, n):
            pass

        visit_Lambda = visit_ClassDef = visit_AsyncFunctionDef = visit_FunctionDef

    v = V()
    for s in stmts:
        v.visit(s)
    return out


_UNKNOWN = object()


def static_truth(test, value_of):
    """Whether the `if` test `test` is true or false from compile-time values alone, without
    compiling it (None when that is not known): constants and names of constexprs, `x is
    None` / `x is not None` of any name, and not, and, or and comparisons of those.
    value_of(name) is the value a name holds, or _UNKNOWN."""
    def value(n):
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            v = _unwrap(value_of(n.id))
            return v if v is None or type(v) in (bool, int, float, str) else _UNKNOWN
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            t = truth(n.operand)
            return _UNKNOWN if t is None else not t
        if isinstance(n, ast.BoolOp):
            parts = [truth(v) for v in n.values]
            stop = isinstance(n.op, ast.Or)  # or: any true decides; and: any false
            if stop in parts:
                return stop
            return _UNKNOWN if None in parts else not stop
        if isinstance(n, ast.Compare) and len(n.ops) == 1:
            op, right = n.ops[0], n.comparators[0]
            if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(n.left, ast.Name) and \
                    isinstance(right, ast.Constant) and right.value is None:
                v = value_of(n.left.id)
                if v is _UNKNOWN:
                    return _UNKNOWN
                return (_unwrap(v) is None) == isinstance(op, ast.Is)
            if type(op) in _CMPOPS:
                a, b = value(n.left), value(right)
                if a is _UNKNOWN or b is _UNKNOWN:
                    return _UNKNOWN
                try:
                    return bool(getattr(operator, _CMPOPS[type(op)])(a, b))
                except TypeError:
                    return _UNKNOWN
        return _UNKNOWN

    def truth(n):
        v = value(n)
        return None if v is _UNKNOWN else bool(v)

    return truth(test)


class StatementsMixin:
    """CodeGenerator's statement visitors."""

    def assigned_live(self, stmts):
        """The names `stmts` assign in the code that will be compiled: the branches of ifs on
        constexprs they do not take are left out (Triton compiles only the taken one, so a
        `Z += stride` under `if HAS_Z:` does not rebind a `Z=None` there). Tests read the
        names the statements do not assign, with their values now; a name assigned only in
        branches left out keeps its value (`if Z is not None: Z += stride`): the assigned
        names grow from none until they hold still."""
        scope, g = self.frame.scope, self.frame.info.globals

        def value_of(name):
            if name in rebound:
                return _UNKNOWN
            if name in scope:
                v = scope[name]
                return _UNKNOWN if isinstance(v, _Unavailable) else v
            v = g[name] if name in g else _UNKNOWN
            return v if isinstance(v, constexpr) else _UNKNOWN
        rebound, wider = None, set()
        while wider != rebound:
            rebound = wider
            wider = assigned_names(stmts, lambda test: static_truth(test, value_of))
        return rebound

    def visit_Expr(self, node):
        if isinstance(node.value, ast.IfExp):
            # `f(x) if c else g(x)` as a statement (its value unused; Triton's test_if: two
            # tl.store calls, which return None) is `if c: f(x) else: g(x)`, whose arms need
            # no common value.
            e = node.value
            stmt = ast.If(test=e.test, body=[ast.Expr(value=e.body)],
                          orelse=[ast.Expr(value=e.orelse)])
            for n in (stmt, *stmt.body, *stmt.orelse):
                ast.copy_location(n, e)
            return self.visit(stmt)
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assert(self, node):
        # Triton: `assert cond, msg` in a kernel is tl.device_assert(cond, msg).
        from .. import language as tl
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
            if name in self.frame.scope:
                raise self.error(f"'{name}' is already defined; a constexpr cannot be "
                                 f"reassigned")
            # A run-time value stays one, as in Triton, whose constexpr wrapper gives it back
            # at every use (FlagGems' sort: `CTA_TILE_N: tl.constexpr = TILE_N * tiles`).
            self.frame.scope[name] = value if isinstance(value, (dtype, tuple, tensor)) else \
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

    def _carried(self, names, liveins, what, stmts=None):
        """The names among `names` that flow through a run-time region: tensors (or
        tuples of tensors) defined before it. Constexprs may not be reassigned there (the
        error points at the assignment among `stmts` when given, else at the region)."""
        out = []
        for n in sorted(names):
            if n not in liveins or isinstance(liveins[n], _Unavailable):
                continue
            v = liveins[n]
            if isinstance(v, tensor) or hasattr(v, "__kiln_flatten__") or \
                    (isinstance(v, tuple) and _all_tensors(v)):
                out.append(n)
            elif not callable(v) or isinstance(v, constexpr):
                raise self.error(f"cannot reassign '{n}' ({_describe(v)}) inside {what}: "
                                 f"constexprs are fixed at compile time",
                                 _assignment(stmts, n) if stmts else None)
        return out

    def _flatten(self, value, name, out):
        if isinstance(value, _Unavailable):
            raise self.error(f"'{name}' flows through this run-time loop or if but cannot be "
                             f"read at the end of it: {value.reason}")
        if isinstance(value, tensor):
            out.append(value.handle)
            return "t"
        if isinstance(value, tuple):
            return tuple(self._flatten(v, name, out) for v in value)
        if hasattr(value, "__kiln_flatten__"):  # an aggregate (a block pointer): its run-time
            parts = value.__kiln_flatten__()    # parts flow, the rest is part of the structure
            return _Aggregate(value, tuple(self._flatten(v, name, out) for v in parts))
        if isinstance(value, constexpr) and isinstance(value.value, (bool, numbers.Real)):
            out.append(self.to_tensor(value.value, weak=False).handle)
            return "t"
        raise self.error(f"'{name}' holds {_describe(value)} here; only tensors (and tuples "
                         f"of tensors) can flow through run-time control flow")

    @staticmethod
    def _unflatten(struct, handles, pos=0):
        if struct == "t":
            return tensor(handles[pos]), pos + 1
        if isinstance(struct, _Aggregate):
            vals, pos = StatementsMixin._unflatten(struct.parts, handles, pos)
            return struct.value.__kiln_rebuild__(list(vals)), pos
        vals = []
        for s in struct:
            v, pos = StatementsMixin._unflatten(s, handles, pos)
            vals.append(v)
        return tuple(vals), pos

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
        from ..language import static_range, range as tl_range
        if fn is static_range:
            r = static_range(*args, **kwargs)
            self._static_loop(node, list(builtins.range(r.start.value, r.end.value,
                                                        r.step.value)))
            return
        if fn is builtins.range:
            if kwargs:
                raise self.error("range() takes no keyword arguments", it)
            if not 1 <= len(args) <= 3:
                raise self.error(f"range expected 1 to 3 arguments, got {len(args)}", it)
            flatten = warp_specialize = False
            lb, ub, step = (constexpr(0), args[0], constexpr(1)) if len(args) == 1 else \
                (args[0], args[1], args[2] if len(args) == 3 else constexpr(1))
        elif fn is tl_range:
            r = tl_range(*args, **self._range_kwargs(tl_range, kwargs, it))
            lb, ub, step = r.start, r.end, r.step
            flatten, warp_specialize = r.flatten, r.warp_specialize
        else:
            raise self.error(f"expected range(...), tl.range(...) or tl.static_range(...) as "
                             f"the loop iterator, found {_describe(fn)}", it)
        self._runtime_for(node, lb, ub, step, flatten, warp_specialize)

    def _range_kwargs(self, tl_range, kwargs, node):
        """tl.range's keywords; one Triton 3.6 does not have is an error naming those it has."""
        known = list(inspect.signature(tl_range.__init__).parameters)[1:]
        for k in kwargs:
            if k not in known:
                raise self.error(f"tl.range() got an unexpected keyword argument '{k}'; it "
                                 f"takes {', '.join(known)} (as Triton 3.6)", node)
        return kwargs

    def _run_loop_body(self, frame, body, names, structs):
        """Runs a run-time loop body one region deeper and returns its loop-carried values,
        flattened in the order of `names`; a value whose structure changed is an error."""
        with self._loop_body("runtime"):
            self.exec_block(body)
        self._end_of_body()
        out = []
        for i, n in enumerate(names):
            if self._flatten(frame.scope[n], n, out) != structs[i]:
                raise self.error(f"loop-carried '{n}' changes structure in the loop")
        return out

    def _runtime_for(self, node, lb, ub, step, flatten=False, warp_specialize=False):
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
        liveins = dict(frame.scope)
        assigned = self.assigned_live(node.body) - {target}
        names = self._carried(assigned, liveins, "a run-time loop")
        structs, inits = [], []
        for n in names:
            structs.append(self._flatten(liveins[n], n, inits))
        exits = exit_kinds(node.body)
        if exits & {"break", "return"}:
            results, ret = self._for_with_exits(
                node, lbt, ubt, stept, negative, start if negative else None,
                mag if negative else None, names, structs, inits, liveins, "return" in exits)
            self._after_loop(names, structs, results, assigned, liveins, node, ret)
            frame.scope[target] = _Unavailable(
                f"loop variable '{target}' is not available after its run-time loop (line "
                f"{frame.info.begin_line + node.lineno - 1})")
            return

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
                                            _flat_names(names, structs), flatten,
                                            warp_specialize)
        finally:
            frame.scope = liveins
            self.node = node
            self._set_loc(node)
        self._rebind(names, structs, results, assigned, liveins, node, "loop")
        frame.scope[target] = _Unavailable(
            f"loop variable '{target}' is not available after its run-time loop (line "
            f"{frame.info.begin_line + node.lineno - 1})")

    def _after_loop(self, names, structs, results, assigned, liveins, node, ret):
        """The scope after a loop that may break or return (`ret`: its returned flag)."""
        self._rebind(names, structs, results, assigned, liveins, node, "loop")
        if ret is not None:
            self.frame.scope[RET] = ret

    def _rebind(self, names, structs, results, assigned, liveins, node, what):
        """The scope after a run-time loop: its results; the names first assigned in it are
        unreadable."""
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

    def visit_loop_test(self, test):
        """A while loop's condition: tl.condition(c, disable_licm=...) gives c (Kiln keeps no
        loop attributes; the flag is checked when the condition is built)."""
        from ..language.values import condition
        c = self.visit(test)
        return c.condition if isinstance(c, condition) else c

    def visit_While(self, node):
        if node.orelse:
            raise self.unsupported("'else' clauses on loops")
        frame = self.frame
        liveins = dict(frame.scope)
        assigned = self.assigned_live(node.body)
        names = self._carried(assigned, liveins, "a run-time loop")
        structs, inits = [], []
        for n in names:
            structs.append(self._flatten(liveins[n], n, inits))
        exits = exit_kinds(node.body)
        if exits & {"break", "return"}:
            results, ret = self._while_with_exits(node, names, structs, inits, liveins,
                                                  "return" in exits)
            self._after_loop(names, structs, results, assigned, liveins, node, ret)
            return

        def bind(args):
            frame.scope = dict(liveins)
            pos = 0
            for i, n in enumerate(names):
                frame.scope[n], pos = self._unflatten(structs[i], args, pos)

        def cond_fn(args):
            bind(args)
            c = self.visit_loop_test(node.test)
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


def _assignment(stmts, name):
    """The first statement among `stmts` (nested ones included) that assigns `name`."""
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
                return n
    return None


def _all_tensors(t):
    return all(isinstance(e, tensor) or hasattr(e, "__kiln_flatten__") or
               (isinstance(e, tuple) and _all_tensors(e)) for e in t)


class _Aggregate:
    """The structure of an aggregate value (a block pointer) flowing through control flow: its
    fixed part (__kiln_static__: compared, so a loop may not swap in another aggregate) and
    the structure of its run-time parts; __kiln_rebuild__ makes it from new parts."""

    def __init__(self, value, parts):
        self.value, self.parts, self.key = value, parts, value.__kiln_static__()

    def __eq__(self, other):
        return isinstance(other, _Aggregate) and self.key == other.key and \
            self.parts == other.parts

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.key, self.parts))


def _flat_names(names, structs):
    out = []

    def walk(prefix, s):
        if s == "t":
            out.append(prefix)
        elif isinstance(s, _Aggregate):
            for i, x in enumerate(s.parts):
                walk(f"{prefix}.offsets[{i}]", x)
        else:
            for i, x in enumerate(s):
                walk(f"{prefix}[{i}]", x)
    for n, s in zip(names, structs):
        walk(n, s)
    return out
