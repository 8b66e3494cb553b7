"""Early exits for the code generator (kiln.compiler.code_generator): `return` under a run-time
condition, `break` and `continue` in run-time and static loops, and the blocks, ifs and loops
that carry them.

MLIR's structured control flow (scf.if, scf.for, scf.while) has no early exit, so an exit is
data: hidden names in the frame's scope say whether the path being built has returned ($ret),
left its innermost loop ($brk) or skipped the rest of its iteration ($cnt), and what it
returned ($val). A flag is absent (not exited), constexpr True (exited, known at compile time:
what follows is dead and is not built) or an i1 tensor (known at run time). Flags and $val
flow out of a run-time if as results, like variables; the statements after one that leaves a
run-time flag run under `if not flag` (a guard); a loop whose body may break or return is an
scf.while carrying a `done` flag. Where one branch of an if always exits, the statements after
the if join the other branch instead (the early-exit pattern needs no flag then).

A value that exists only on paths that have exited (what a branch returned, a name the other
branch assigns) leaves an scf.if as a zero of its type on those paths, never read. scf.if
builds its then branch first, so a branch that needs such a zero is built second (the branches
are swapped under the negated condition where that helps) and, where neither order works, the
if is split into `if c: A` and `if not c: B` on the same condition.
"""

import ast
import contextlib

from ..language.core import constexpr, tensor
from .common import _Unavailable, _describe, _unwrap

RET, BRK, CNT, VAL = "$ret", "$brk", "$cnt", "$val"
FLAGS = (RET, BRK, CNT)
_SHOWN = {RET: "the returned flag", BRK: "the break flag", CNT: "the continue flag",
          VAL: "the returned value"}


# ---------------------------------------------------------------------------------------
# What the AST says
# ---------------------------------------------------------------------------------------

def _returns_value(node):
    v = node.value
    return v is not None and not (isinstance(v, ast.Constant) and v.value is None)


def exit_kinds(stmts):
    """The exits `stmts` may take: 'return', 'value' (a return with a value), and 'break' /
    'continue' of the loop around `stmts` (not of loops inside them)."""
    out = set()

    def walk(node, nested):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        if isinstance(node, ast.Return):
            out.add("return")
            if _returns_value(node):
                out.add("value")
        elif isinstance(node, (ast.Break, ast.Continue)) and not nested:
            out.add("break" if isinstance(node, ast.Break) else "continue")
        inner = nested or isinstance(node, (ast.For, ast.While, ast.AsyncFor))
        for child in ast.iter_child_nodes(node):
            walk(child, inner)

    for s in _prune(stmts):
        walk(s, False)
    return out


def _prune(stmts):
    """`stmts` without the dead code after an exit (in nested blocks too): what may run."""
    out = []
    for s in stmts:
        if isinstance(s, ast.If):
            s = ast.If(test=s.test, body=_prune(s.body), orelse=_prune(s.orelse))
        elif isinstance(s, ast.For):
            s = ast.For(target=s.target, iter=s.iter, body=_prune(s.body), orelse=[])
        elif isinstance(s, ast.While):
            s = ast.While(test=s.test, body=_prune(s.body), orelse=[])
        out.append(s)
        if ends_in_exit([s]):
            break
    return out


def _loop_targets(stmts):
    """Names that `stmts` bind only as for-loop variables."""
    targets, other = set(), set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.For):
                targets |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
            elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    other |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
    return targets - other


def ends_in_exit(stmts):
    """True when `stmts` always leave through return, break or continue."""
    for s in stmts:
        if isinstance(s, (ast.Return, ast.Break, ast.Continue)):
            return True
        if isinstance(s, ast.If) and s.orelse and ends_in_exit(s.body) and \
                ends_in_exit(s.orelse):
            return True
    return False


def _fold_rest(node, rest):
    """`if c: A` followed by `rest`: where one branch always exits, `rest` joins the other
    (dead when both exit). Returns (the if to build, what still follows it)."""
    tb, eb = ends_in_exit(node.body), ends_in_exit(node.orelse)
    if tb and eb:
        return node, []
    if not tb and not eb:
        return node, rest
    body, orelse = (node.body, node.orelse + rest) if tb else (node.body + rest, node.orelse)
    joined = ast.copy_location(ast.If(test=node.test, body=body, orelse=orelse), node)
    joined.kiln_joined = True
    return joined, []


def _returns(kinds, ends):
    """Whether a branch of these exit kinds that `ends` in an exit has returned on every
    path (no break or continue, whose paths go on in the loop)."""
    return bool(ends) and bool(kinds) and set(kinds) <= {"return", "value"}


def _what(node):
    """The region an if's branches are, for messages."""
    if getattr(node, "kiln_joined", False):
        return "an if on a run-time value or the code after its exit"
    return "an if on a run-time value"


# ---------------------------------------------------------------------------------------
# Flags in a scope
# ---------------------------------------------------------------------------------------

def _is_true(v):
    return isinstance(v, constexpr) and v.value is True


def static_exit(scope):
    """True when the path being built has certainly exited."""
    return any(_is_true(scope.get(f)) for f in FLAGS)


def _live_flags(scope):
    return [f for f in FLAGS if isinstance(scope.get(f), tensor)]


def _flowable(v):
    return isinstance(v, tensor) or hasattr(v, "__kiln_flatten__") or \
        (isinstance(v, tuple) and all(_flowable(e) for e in v))


def _show_types(types):
    """A returned value's types for messages: fp32, int32[128], (fp32, fp32[4]), nothing."""
    if types is None:
        return "nothing"
    struct, flat = types
    names = iter(f"{d}{list(shape) if shape else ''}" for d, shape in flat)

    def show(st):
        if hasattr(st, "parts"):  # an aggregate (statements._Aggregate)
            return "block pointer" + show(st.parts)
        return next(names) if st == "t" else "(" + ", ".join(show(x) for x in st) + ")"
    return show(struct)


def _is_none(v):
    return isinstance(v, constexpr) and v.value is None


def _has_value(v):
    return v is not None and not _is_none(v) and not isinstance(v, _Unavailable)


_MISSING = object()


class ExitsMixin:
    """CodeGenerator's blocks, `return`/`break`/`continue`, and the ifs and loops that carry
    them."""

    # --- blocks --------------------------------------------------------------------------

    def _assigned(self, stmts):
        """The names `stmts` may assign: dead code after an exit and the branches of ifs on
        constexprs not taken left out (StatementsMixin.assigned_live)."""
        return self.assigned_live(_prune(stmts))

    def exec_block(self, stmts):
        frame = self.frame
        stmts = list(stmts)
        for i, s in enumerate(stmts):
            if frame.returned or static_exit(frame.scope):
                return
            rest = stmts[i + 1:]
            if rest and isinstance(s, ast.If):
                s, rest = _fold_rest(s, rest)
                if not rest:  # joined to the if (or dead)
                    self.visit(s)
                    return
            self.visit(s)
            if rest and _live_flags(frame.scope):
                line = frame.info.begin_line + s.lineno - 1
                self._guard(lambda: self.exec_block(rest), rest[0], self._assigned(rest),
                            f"the code after the run-time exit at line {line}", rest)
                return

    # --- return, break, continue ---------------------------------------------------------

    def visit_Return(self, node):
        frame = self.frame
        value = self.visit(node.value) if node.value is not None else None
        if _is_none(value):
            value = None
        if len(self.frames) == 1 and value is not None:
            raise self.error(f"a kernel cannot return a value, found {_describe(value)}")
        if frame.region_depth == 0:
            frame.returned = True
            frame.return_value = value
            return
        if value is not None and "runtime" in frame.loops:
            raise self.error("'return' with a value inside a run-time loop is not supported "
                             "(Triton allows no return in a loop): assign the value to a "
                             "variable defined before the loop, break, and return it after "
                             "the loop")
        value = self.sanitize(value) if value is not None else constexpr(None)
        if not _is_none(value) and not _flowable(value):
            raise self.error(f"a value returned under a run-time condition must be a tensor or "
                             f"a tuple of tensors, found {_describe(value)}")
        types = self._types(value)
        for site, t in frame.return_sites:
            if t != types:
                raise self.error(f"'{frame.info.name}' returns {_show_types(t)} at line "
                                 f"{self._line(site)} but {_show_types(types)} here: every "
                                 f"return of a function must give the same types and shapes")
        frame.return_sites.append((node, types))
        frame.scope[RET] = constexpr(True)
        frame.scope[VAL] = value

    def visit_Break(self, node):
        if not self.frame.loops:
            raise self.error("'break' outside a loop")
        self.frame.scope[BRK] = constexpr(True)

    def visit_Continue(self, node):
        if not self.frame.loops:
            raise self.error("'continue' outside a loop")
        self.frame.scope[CNT] = constexpr(True)

    def _frame_result(self, frame):
        """What the function of `frame` returns, once its body is built."""
        if frame.returned:
            return frame.return_value
        val = frame.scope.get(VAL)
        if val is None or _is_none(val):
            return None
        if not _is_true(frame.scope.get(RET)):
            node = next(n for n, t in frame.return_sites if t is not None)
            raise self.error(f"'{frame.info.name}' returns a value at line "
                             f"{self._line(node)} but can reach its end without returning "
                             f"one; return on every path (an else branch, or a return at the "
                             f"end)", node)
        return val

    # --- values for messages and for paths that exited -------------------------------------

    def _line(self, node):
        return self.frame.info.begin_line + node.lineno - 1

    def _types(self, value):
        """(dtype, shape) of each tensor of a returned value; None for a bare return."""
        if _is_none(value):
            return None
        handles = []
        struct = self._flatten(value, "the returned value", handles)
        return struct, self._handle_types(handles)

    def _handle_types(self, handles):
        s = self.session
        mapped = self.elementwise_shape

        def shape(h):
            # In a function mapped by tl.map_elementwise a scalar broadcasts to the tiles.
            sh = tuple(s.shape(h))
            return mapped if mapped is not None and sh == () else sh
        return tuple((s.dtype(h), shape(h)) for h in handles)

    def _dummy(self, handle, liveins):
        """A value of `handle`'s type for a path on which it is never read."""
        s = self.session
        dt, shape = s.dtype(handle), list(s.shape(handle))
        if not tensor(handle).dtype.is_ptr():
            return s.zeros(shape, dt)
        # A pointer of the same type in scope (a cast from 0 would do too, kiln.ptr_cast).
        for scope in [liveins] + [f.scope for f in reversed(self.frames[:-1])]:
            for v in scope.values():
                if isinstance(v, tensor) and s.dtype(v.handle) == dt:
                    vs = list(s.shape(v.handle))
                    if vs == shape:
                        return v.handle
                    if not vs:
                        return s.broadcast_to(v.handle, shape)
        return None

    def _flag(self, v):
        """A flag's value as an i1 tensor (absent: False)."""
        if isinstance(v, tensor):
            return v
        return self.to_tensor(_is_true(v), weak=False)

    def _any(self, flags):
        out = None
        for f in flags:
            t = self._flag(f)
            out = t if out is None else tensor(self.session.binary("logical_or", out.handle,
                                                                   t.handle))
        return out if out is not None else self._flag(None)

    def _not(self, t):
        return tensor(self.session.unary("not", t.handle))

    # --- run-time if -----------------------------------------------------------------------

    def _runtime_if(self, node, cond):
        frame = self.frame
        liveins = dict(frame.scope)
        kt, ke = exit_kinds(node.body), exit_kinds(node.orelse)
        xt, xe = ends_in_exit(node.body), ends_in_exit(node.orelse)
        at, ae = self._assigned(node.body), self._assigned(node.orelse)
        fresh = {n for n in at | ae if n not in liveins or isinstance(liveins[n], _Unavailable)}
        live = [a for a, x in ((at, xt), (ae, xe)) if not x]
        needed = set(frame.wanted) | (at & ae if len(live) == 2 else set())
        new = sorted(n for n in fresh & needed if live and all(n in a for a in live))
        carried, skip = self._region_carried(at | ae, liveins, _what(node),
                                             node.body + node.orelse)
        val_before = VAL in liveins and not _is_none(liveins[VAL])

        def can_first(a_val, a_assigned, a_exits, b_val, b_assigned):
            if b_val and not a_val and not val_before:
                return False
            return not (a_exits and set(new) & (b_assigned - a_assigned))

        branches = [(node.body, kt, at, xt), (node.orelse, ke, ae, xe)]
        (a, ka, aa, xa), (b, kb, ab, xb) = branches
        # A branch that returns (on every path) goes second when the other rebinds names it
        # carries: its values of them are never read, so they take the other's types
        # (`if pid * BLOCK >= n: return` then `X = X + offs`, a pointer becoming a block).
        if _returns(ka, xa) and not xb and (set(carried) & (ab - aa)) and \
                can_first("value" in kb, ab, xb, "value" in ka, aa):
            order = (self._not(cond), branches[1], branches[0])
        elif can_first("value" in ka, aa, xa, "value" in kb, ab):
            order = (cond, branches[0], branches[1])
        elif can_first("value" in kb, ab, xb, "value" in ka, aa):
            order = (self._not(cond), branches[1], branches[0])
        else:
            self._split_if(node, cond, branches, carried, new, liveins, skip)
            return
        c, (a, ka, aa, xa), (b, kb, ab, xb) = order
        # As before exits existed: no else region when nothing flows out of a plain if.
        need_else = bool(node.orelse) or bool(carried or new) or bool(kt or ke)
        self._merge(node, c, lambda: self.exec_block(a), liveins,
                    lambda: self.exec_block(b), liveins, carried + new, set(new), kb, xb,
                    need_else, b_returned=_returns(kb, xb))
        self._forget((fresh - set(new)) | skip, node, one_branch=True)

    def _split_if(self, node, cond, branches, carried, new, liveins, skip):
        """`if c: A else: B` as `if c: A` then `if not c: B`: each builds its one branch
        first, so values that exist on one side only get their zeros on the other."""
        frame = self.frame
        (a, ka, aa, xa), (b, kb, ab, xb) = branches
        first = [n for n in carried if n in aa] + [n for n in new if n in aa]
        a_end, _ = self._merge(node, cond, lambda: self.exec_block(a), liveins, None, liveins,
                               first, set(new), set(), True, need_else=True)
        mid = dict(frame.scope)
        second = self._carried(ab - (set(new) - aa) - skip, mid, _what(node), b)
        second += [n for n in new if n not in aa]
        self._merge(node, self._not(cond), lambda: self.exec_block(b), _without_flags(mid),
                    None, mid, second, set(new), set(), xa, need_else=True,
                    b_true={f for f in FLAGS if _is_true(a_end.get(f))})
        fresh = {n for n in aa | ab if n not in liveins or isinstance(liveins[n], _Unavailable)}
        self._forget((fresh - set(new)) | skip, node, one_branch=True)

    def _guard(self, run, node, assigned, what, stmts):
        """Runs `run` (what follows a run-time exit) under `if not <the live flags>`."""
        frame = self.frame
        liveins = dict(frame.scope)
        live = _live_flags(liveins)
        cond = self._not(self._any([liveins[f] for f in live]))
        fresh = {n for n in assigned if n not in liveins or isinstance(liveins[n], _Unavailable)}
        new = sorted(fresh & set(frame.wanted))
        carried, skip = self._region_carried(assigned, liveins, what, stmts)
        prev = self.node
        self.node = node
        self._set_loc(node)
        try:
            # The else path is taken when a live flag is set: with one live flag, it is set.
            self._merge(node, cond, run, _without_flags(liveins), None, liveins, carried + new,
                        set(new), set(), True, need_else=True,
                        b_true=set(live) if len(live) == 1 else set(), b_returned=live == [RET])
        finally:
            self.node = prev
        self._forget((fresh - set(new)) | skip, node)

    def _region_carried(self, assigned, liveins, what, stmts):
        """The names among `assigned` (by `stmts`) that a run-time if or guard carries, and
        those it cannot: a compile-time value rebound only as a loop variable (not readable
        after the if; any other reassigned constexpr is an error at its assignment). Not for
        loops: a later iteration would read the value from before the loop."""
        known = {n for n in assigned if n in liveins and not isinstance(liveins[n], _Unavailable)}
        skip = {n for n in known & _loop_targets(stmts) if not _flowable(liveins[n])}
        return self._carried(known - skip, liveins, what, stmts), skip

    def _forget(self, names, node, one_branch=False):
        """Names defined on some paths only may not be read after `node`."""
        frame = self.frame
        for n in names:
            frame.scope[n] = _Unavailable(
                f"'{n}' is defined in only one branch of the if at line {self._line(node)}; "
                f"define it before the if or in both branches" if one_branch else
                f"'{n}' is defined after a run-time exit (line {self._line(node)}) and is not "
                f"available past it; define it before")

    def _merge(self, node, cond, a_run, a_scope, b_run, b_scope, names, new, b_kinds, b_exits,
               need_else, b_true=frozenset(), b_returned=False):
        """Builds `if cond: a else: b` (a first) carrying `names`, the exit flags and the
        returned value. `new` names (not defined before) may be zeros on a path of `b` that
        exits (`b_exits`, or known exited when built). `b_true`: flags known set on the path of
        `b` (its scope has them as run-time values). `b_returned`: every path of `b` has
        returned, so its values of `names` are never read (they may take a's types). Returns
        the scopes at the ends of a and b."""
        frame = self.frame
        slots, structs, firsts, ends = [], [], {}, {}
        lazy = set()  # names with a value on some live paths only: unreadable after the if
        first_exited = set()  # names only the second branch defines, the first having exited
        saved_wanted = frame.wanted

        def run(body, scope):
            frame.scope = dict(scope)
            frame.region_depth += 1
            frame.wanted = frozenset(new)
            try:
                if body is not None:
                    body()
            finally:
                frame.region_depth -= 1
                frame.wanted = saved_wanted
            return frame.scope

        def a_fn():
            end = ends["a"] = run(a_run, a_scope)
            for n in names:
                v = end.get(n)
                if v is not None and not isinstance(v, _Unavailable):
                    slots.append(n)
                elif n in new and static_exit(end):
                    # This branch exits in a way only its build showed (a constexpr if, an
                    # unrolled loop): the other branch's value has no type here yet.
                    first_exited.add(n)
                else:
                    lazy.add(n)
            slots.extend(f for f in FLAGS if f in end or f in b_scope or
                         {RET: "return", BRK: "break", CNT: "continue"}[f] in b_kinds)
            if (_has_value(end.get(VAL)) and end.get(VAL) is not b_scope.get(VAL)) or \
                    "value" in b_kinds:
                slots.append(VAL)
            return self._slot_handles(end, slots, structs, firsts, None, a_scope, lazy)

        def b_fn():
            end = ends["b"] = run(b_run, b_scope)
            exited = b_exits or static_exit(end)
            return self._slot_handles(end, slots, structs, firsts, exited, b_scope, lazy,
                                      b_returned)

        try:
            results = self.session.if_then_else(cond.handle, a_fn,
                                                b_fn if need_else else None,
                                                [_SHOWN.get(n, n) for n in names])
        finally:
            frame.scope = dict(b_scope)
            self.node = node
            self._set_loc(node)
        pos = 0
        for i, n in enumerate(slots):
            frame.scope[n], pos = self._unflatten(structs[i], results, pos)
        self._forget(lazy, node, one_branch=True)
        for n in first_exited:
            frame.scope[n] = _Unavailable(
                f"'{n}' is assigned by the if at line {self._line(node)} only on the path that "
                f"does not exit, and Kiln could not carry it out of the if; define '{n}' before "
                f"the if")
        a_end, b_end = ends.get("a", {}), ends.get("b", {})
        for f in FLAGS:
            if _is_true(a_end.get(f)) and (_is_true(b_end.get(f)) or f in b_true):
                frame.scope[f] = constexpr(True)
            elif f not in a_end and f not in b_end:
                frame.scope.pop(f, None)
        if VAL not in slots and (_is_none(a_end.get(VAL)) or _is_none(b_end.get(VAL))):
            frame.scope[VAL] = constexpr(None)
        return a_end, b_end

    def _slot_handles(self, end, slots, structs, firsts, exited, liveins, lazy, returned=False):
        """The handles a branch yields for `slots`. `exited` is None for the branch built
        first (no zeros there: their types are not known yet). A name this branch leaves
        without a value gets a zero; unless the branch exited, it joins `lazy`. A branch that
        has `returned` yields, for a name whose value differs in type from the first branch's,
        a placeholder of the first's (never read)."""
        first = exited is None
        out = []
        for i, n in enumerate(slots):
            v = end.get(n, _MISSING)
            if isinstance(v, _Unavailable):
                v = _MISSING
            hs = []
            if n in FLAGS:
                hs.append(self._flag(None if v is _MISSING else v).handle)
                s = "t"
            elif n == VAL and _is_none(v):
                raise self.error("a path through this if returns nothing while another returns "
                                 "a value")
            elif v is _MISSING:
                if first:  # only the returned value: names without one are not slots
                    raise self.error("cannot merge the value returned inside this if with "
                                     "the path through its other branch; return a value "
                                     "from both branches")
                if n != VAL and not exited:
                    lazy.add(n)
                for h in firsts[n]:
                    d = self._dummy(h, liveins)
                    if d is None:
                        raise self.error(f"'{n}' holds a pointer that exists on only one path "
                                         f"of this if; define '{n}' before the if")
                    hs.append(d)
                s = structs[i]
            else:
                s = self._flatten(v, n, hs)
                if returned and n != VAL and (s != structs[i] or self._handle_types(hs) !=
                                              self._handle_types(firsts[n])):
                    dummies = [self._dummy(h, liveins) for h in firsts[n]]
                    if all(d is not None for d in dummies):
                        hs, s = dummies, structs[i]
                if n == VAL and not first and self._handle_types(firsts[n]) != \
                        self._handle_types(hs):
                    raise self.error("the values returned on the paths through this if differ "
                                     "in type or shape")
            if first:
                structs.append(s)
                firsts[n] = hs
            elif structs[i] != s:
                raise self.error(f"'{n}' changes structure between the branches of the if: "
                                 f"{structs[i]} vs {s}")
            out.extend(hs)
        return out

    # --- loops -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _loop_body(self, kind):
        """A loop body: the innermost loop for break and continue; a run-time one is a region
        one deeper, after which no name first assigned in it is visible (none is wanted)."""
        frame = self.frame
        saved = frame.wanted
        frame.loops.append(kind)
        if kind == "runtime":
            frame.wanted = frozenset()
            frame.region_depth += 1
        try:
            yield
        finally:
            if kind == "runtime":
                frame.region_depth -= 1
            frame.loops.pop()
            frame.wanted = saved

    def _static_loop(self, node, values):
        """tl.static_range, unrolled: a break or return under a run-time condition guards the
        iterations after it."""
        frame = self.frame
        with self._loop_body("static"):
            self._static_iters(node, values)
        frame.scope.pop(BRK, None)
        frame.scope.pop(CNT, None)

    def _static_iters(self, node, values):
        frame = self.frame
        target = node.target.id
        for k, v in enumerate(values):
            if frame.returned or static_exit(frame.scope):
                return
            frame.scope[target] = constexpr(v)
            self.exec_block(node.body)
            frame.scope.pop(CNT, None)
            if k + 1 < len(values) and _live_flags(frame.scope):
                later = values[k + 1:]
                self._guard(lambda: self._static_iters(node, later), node,
                            self._assigned(node.body) - {target},
                            f"the static_range loop at line {self._line(node)} (it may break "
                            f"or return at run time)", node.body)
                frame.scope[target] = _Unavailable(
                    f"'{target}' is not available after the static_range loop at line "
                    f"{self._line(node)}: it may break or return at run time")
                return

    def _end_of_body(self):
        """Pops the flags of a run-time loop body's end: (break flag, returned flag)."""
        scope = self.frame.scope
        scope.pop(CNT, None)
        return scope.pop(BRK, None), scope.pop(RET, None)

    def _exiting_loop(self, node, names, structs, inits, liveins, test, step_fn, ret):
        """A run-time loop whose body may break (or return, `ret`): an scf.while carrying
        [done, (returned,) *state, *names], where `state` is the loop's own (a for loop's
        index). `test(going, state)` is the i1 condition to run an iteration (`going`: not
        done); `step_fn` is (bind(state): binds the loop variable, next(state): the next
        state's handles, the initial state's handles, their names for messages)."""
        frame = self.frame
        bind_state, next_state, state_inits, state_names = step_fn
        k = 1 + bool(ret) + len(state_inits)
        false = self.to_tensor(False, weak=False).handle
        all_inits = [false] + ([false] if ret else []) + state_inits + inits

        def bind(args):
            frame.scope = dict(liveins)
            pos = 0
            for i, n in enumerate(names):
                frame.scope[n], pos = self._unflatten(structs[i], args[k:], pos)
            return args[1 + bool(ret):k]

        def cond_fn(args):
            state = bind(args)
            going = self._not(tensor(args[0]))
            return test(going, state).handle

        def body_fn(args):
            state = bind(args)
            bind_state(state)
            with self._loop_body("runtime"):
                self.exec_block(node.body)
            brk, r = self._end_of_body()
            out = []
            for i, n in enumerate(names):
                if self._flatten(frame.scope[n], n, out) != structs[i]:
                    raise self.error(f"loop-carried '{n}' changes structure in the loop")
            done = self._any([brk, r])
            head = [done.handle] + ([self._flag(r).handle] if ret else [])
            return head + next_state(state) + out

        from .statements import _flat_names
        try:
            results = self.session.while_loop(
                all_inits, cond_fn, body_fn,
                ["<loop exit flag>"] + (["<returned flag>"] if ret else []) + state_names +
                _flat_names(names, structs))
        finally:
            frame.scope = liveins
            self.node = node
            self._set_loc(node)
        return results[k:], (tensor(results[1]) if ret else None)

    def _for_with_exits(self, node, lbt, ubt, stept, negative, start, mag, names, structs,
                        inits, liveins, ret):
        """A run-time for loop that may break or return, as a while loop over its index."""
        frame = self.frame
        target = node.target.id
        dt = self.binary("add", self.binary("add", lbt, ubt), stept)
        if dt.shape or not dt.dtype.is_int():
            raise self.error(f"expected scalar integer loop bounds, found {lbt!r}, {ubt!r} and "
                             f"{stept!r}", node.iter)
        lb, ub, step = (tensor(self.session.cast(t.handle, dt.dtype.name)) for t in
                        (lbt, ubt, stept))

        def bind_state(state):
            iv = tensor(state[0])
            if negative:
                iv = self.binary("sub", start, self.binary("mul", iv, mag))
            frame.scope[target] = iv

        def next_state(state):
            return [self.binary("add", tensor(state[0]), step).handle]

        def test(going, state):
            return self.binary("logical_and", going,
                               self.binary("lt", tensor(state[0]), ub))

        results, r = self._exiting_loop(node, names, structs, inits, liveins, test,
                                        (bind_state, next_state, [lb.handle], ["<loop index>"]),
                                        ret)
        return results, r

    def _while_with_exits(self, node, names, structs, inits, liveins, ret):
        def test(going, state):
            def then():
                self.frame.region_depth += 1
                try:
                    c = self.visit_loop_test(node.test)
                finally:
                    self.frame.region_depth -= 1
                if not isinstance(c, tensor):
                    v = _unwrap(c)
                    if type(v) not in (bool, int):
                        raise self.error(f"expected a run-time scalar condition for while, "
                                         f"found {_describe(c)}", node.test)
                    c = self.to_tensor(bool(v), weak=False)
                if c.shape:
                    raise self.error(f"expected a scalar while condition, found {c!r}",
                                     node.test)
                return [self.session.cast(c.handle, "int1")]
            if isinstance(node.test, ast.Constant):
                return self.binary("logical_and", going, self.to_tensor(bool(node.test.value),
                                                                        weak=False))
            (h,) = self.session.if_then_else(going.handle, then,
                                             lambda: [self.to_tensor(False, weak=False).handle],
                                             ["<while condition>"])
            return tensor(h)

        return self._exiting_loop(node, names, structs, inits, liveins, test,
                                  (lambda s: None, lambda s: [], [], []), ret)


def _without_flags(scope):
    return {k: v for k, v in scope.items() if k not in FLAGS}
