"""The calls of a kernel for the code generator (kiln.compiler.code_generator): builtins of
kiln.language, @kiln.jit functions (inlined), methods of compile-time values, and the Python
builtins kernels may use."""

import ast
import builtins
import numbers

from ..errors import CompilationError
from ..language.core import constexpr, dtype, tensor
from ..language.values import ConstexprFunction, call_at_compile_time, check_store_pointer
from .common import _Frame, _describe, _unwrap


class CallsMixin:
    """CodeGenerator's call visitor and the inlining of @kiln.jit functions."""

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
        from ..runtime.jit import JITFunction
        from .. import language as tl
        fn = self.visit(node.func)
        if isinstance(fn, constexpr) and callable(fn.value):
            # a @kiln.jit function passed as a constexpr argument (`ACTIVATION: tl.constexpr`
            # called as ACTIVATION(acc)), keyed by its source as any constexpr function; or a
            # function decorated @tl.constexpr (FlagGems' sort helpers)
            fn = fn.value
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
        if isinstance(fn, ConstexprFunction):
            args, kwargs = self._call_args(node)
            return fn.call_in_kernel(args, kwargs)
        if getattr(fn, "__kiln_builtin__", False):
            args, kwargs = self._call_args(node)
            if self.const_pointers and fn in _stores():
                check_store_pointer(self, fn, args, kwargs)
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
        if callable(fn) and not isinstance(fn, (type, constexpr)):
            # Any other Python function runs at compile time on compile-time arguments, its
            # result a constexpr, as in Triton (`tl.arange(0, triton.next_power_of_2(n + 1))`
            # in FlagGems' diff, math.* of constexprs)
            args, kwargs = self._call_args(node)
            runtime = [a for a in list(args) + list(kwargs.values()) if isinstance(a, tensor)]
            if runtime:
                raise self.error(f"'{name}' is a Python function: kernels call it at compile "
                                 f"time, on compile-time values, not on the run-time "
                                 f"{_describe(runtime[0])}")
            return call_at_compile_time(fn, args, kwargs)
        raise self.error(f"unsupported call to '{name}': kernels call kiln.language functions, "
                         f"@kiln.jit functions, and Python functions (min, max, len, ...) on "
                         f"compile-time values")

    def _static_assert(self, node):
        # static_assert(cond, msg=""), as Triton's.
        args = list(node.args) + [k.value for k in node.keywords if k.arg == "msg"]
        if (not 1 <= len(args) <= 2
                or any(k.arg not in ("msg", "cond") for k in node.keywords)):
            raise self.error("tl.static_assert takes a condition and an optional message")
        if any(k.arg == "cond" for k in node.keywords):
            args = [k.value for k in node.keywords if k.arg == "cond"] + args
        if len(args) > 2:
            raise self.error("tl.static_assert takes a condition and an optional message")
        cond = self.visit(args[0])
        if isinstance(cond, tensor):
            raise self.error("tl.static_assert needs a compile-time condition, found a "
                             "run-time tensor")
        if not _unwrap(cond):
            msg = _unwrap(self.visit(args[1])) if len(args) == 2 else ""
            raise self.error(f"static assertion failed{': ' + str(msg) if msg else ''}")
        return constexpr(None)

    def call_function(self, fn, args, kwargs=None):
        """Calls the @kiln.jit function `fn` (inlined) from a builtin, at the current node."""
        from ..runtime.jit import JITFunction
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
            # A tl.constexpr annotation on a helper's parameter does not make a tensor
            # argument a constant: as in Triton, the argument's own kind decides (the
            # attention tutorial's inner loop passes tile offsets to such parameters).
            scope[p.name] = v
        caller = self.frame
        line = caller.info.begin_line + node.lineno - 1
        frame = _Frame(info, scope, call_site=(caller.info.file, line))
        self.frames.append(frame)
        try:
            self.exec_block(info.tree.body)
            result = self._frame_result(frame)
        except CompilationError as e:
            e.add_note_line(f"in '{info.name}', called from {caller.info.file}:{line}")
            raise
        finally:
            self.frames.pop()
            self.node = node
            self._set_loc(node)
        return result


def _stores():
    """The builtins that write through a pointer (refused on tl.const pointers)."""
    from .. import language as tl
    return (tl.store, tl.atomic_add, tl.atomic_max, tl.atomic_min, tl.atomic_and, tl.atomic_or,
            tl.atomic_xor, tl.atomic_xchg, tl.atomic_cas)


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


def _isinstance(gen, args, kwargs):
    """isinstance(x, cls) at compile time, as Triton's: a run-time value is a tl.tensor (or a
    tl.tensor_descriptor), never one of its Python values; a constexpr is a tl.constexpr and
    an instance of its value's type."""
    if kwargs or len(args) != 2:
        raise TypeError("isinstance() takes two arguments")
    obj, cls = args
    cls = _unwrap(cls)
    if isinstance(obj, tensor) or not isinstance(obj, constexpr):
        return constexpr(isinstance(obj, cls))
    return constexpr(isinstance(obj, cls) or isinstance(_unwrap(obj), cls))


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
    from .. import language as tl
    return tl.device_print(*args, **kwargs)


_SPECIAL_BUILTINS = {
    builtins.min: _minmax("min"), builtins.max: _minmax("max"), builtins.len: _len,
    builtins.int: _static(int), builtins.float: _static(float), builtins.bool: _static(bool),
    builtins.isinstance: _isinstance, builtins.getattr: _getattr,
    builtins.abs: _abs, builtins.print: _print,
}
_BUILTINS = {f.__name__: f for f in (builtins.range, builtins.min, builtins.max, builtins.len,
                                     builtins.int, builtins.float, builtins.bool,
                                     builtins.isinstance, builtins.getattr, builtins.abs,
                                     builtins.print)}
