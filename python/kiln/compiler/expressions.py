"""The expressions of a kernel for the code generator (kiln.compiler.code_generator):
constants and names, tuples, f-strings, attributes, subscripts and slices, operators,
comparisons and boolean operators."""

import ast
import numbers

from ..language.core import constexpr, dtype, tensor
from ..language.values import slice as tl_slice
from .common import _BINOPS, _CMPOPS, _describe, _unwrap


def _py_slices(index):
    """An index with tl.slice objects (built by name in kernels) as Python slices."""
    if isinstance(index, tuple):
        return tuple(_py_slices(i) for i in index)
    v = _unwrap(index)
    return constexpr(v.to_py()) if isinstance(v, tl_slice) and not isinstance(v, slice) else index


class ExpressionsMixin:
    """CodeGenerator's expression visitors."""

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

    def visit_ListComp(self, node):
        """`[f(v) for v in t]` over a tuple `t` (Triton 3.6's tuple comprehensions: one `for`,
        unrolled at compile time), a tuple; `if` clauses must be compile-time values. The
        loop's names are the comprehension's own, as in Python."""
        if len(node.generators) != 1:
            raise self.unsupported("comprehensions with more than one 'for'", node)
        comp = node.generators[0]
        if comp.is_async:
            raise self.unsupported("async comprehensions", node)
        it = comp.iter
        if isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute)) and \
                (it.func.id if isinstance(it.func, ast.Name) else it.func.attr) in \
                ("range", "static_range"):
            raise self.error("expected a tuple to iterate over in a comprehension, found a "
                             "range (Triton's comprehensions iterate over tuples; use a "
                             "for loop)", it)
        items = self.visit(it)
        seq = _unwrap(items)
        if not isinstance(seq, (tuple, list)):
            raise self.error(f"expected a tuple to iterate over in a comprehension, found "
                             f"{_describe(items)} (Triton's comprehensions iterate over tuples)",
                             comp.iter)
        scope = self.frame.scope
        names = {n.id for n in ast.walk(comp.target) if isinstance(n, ast.Name)}
        saved = {n: scope[n] for n in names if n in scope}
        out = []

        def bind(target, value):  # as Triton binds them: constexprs stay constexprs
            if isinstance(target, ast.Name):
                scope[target.id] = value
                return
            v = _unwrap(value)
            if not isinstance(target, (ast.Tuple, ast.List)) or \
                    not isinstance(v, (tuple, list)) or len(v) != len(target.elts):
                raise self.error(f"cannot unpack {_describe(value)} into the comprehension's "
                                 f"names", target)
            for t, e in zip(target.elts, v):
                bind(t, e if isinstance(value, tuple) else constexpr(e))
        try:
            for item in seq:
                bind(comp.target, item if isinstance(items, tuple) else constexpr(item))
                keep = True
                for test in comp.ifs:
                    cond = self.visit(test)
                    if isinstance(cond, tensor):
                        raise self.error("expected a compile-time condition in a "
                                         "comprehension's 'if', found a run-time value", test)
                    keep = keep and bool(_unwrap(cond))
                if keep:
                    out.append(self.visit(node.elt))
        finally:
            for n in names:
                scope.pop(n, None)
            scope.update(saved)
        return tuple(out)

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
                from .. import language as tl
                return tl.trans(obj)
            if not hasattr(tensor, node.attr):
                raise self.error(f"a tensor has no attribute '{node.attr}'")
            return getattr(obj, node.attr)
        target = _unwrap(obj)
        if isinstance(obj, constexpr) and node.attr == "type" and not hasattr(target, "type"):
            return obj.type  # Triton's constexpr_type of the value
        if node.attr == "value" and not hasattr(target, "value"):
            # Triton hands a helper its compile-time arguments as tl.constexpr objects, whose
            # .value is the value (FlagGems' get_dtype_min: `dtype_ = dtype.value`).
            return obj
        try:
            v = getattr(target, node.attr)
        except AttributeError:
            raise self.error(f"{_describe(obj)} has no attribute '{node.attr}'") from None
        if isinstance(v, (bool, numbers.Real, str, tuple)) and not isinstance(v, dtype):
            return constexpr(v)
        return v

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        index = _py_slices(self.visit(node.slice))
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
                # (':' on a scalar is skipped, as Triton's list insert does: s[:, None] and
                # s[None, :] are both shape [1])
                axis += 1 if x.shape else 0
                kept += 1
            else:
                raise self.error(f"unsupported tensor index {_describe(it)}: kiln tensors take "
                                 f"None and ':' (x[:, None], x[None, :])")
        # (A scalar takes any ':' as Triton does, which skips them: test_reduce's
        # Z[None, None, :] on a scalar pointer.)
        if kept > rank and rank > 0:
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

