"""kiln.language.core.map_elementwise: Triton 3.6's map of a scalar @jit function over the
elements of tensors.

Kiln applies the function to whole tiles at once (every value in it is a tile of the
arguments' broadcast shape) and turns its control flow on element values into selections:
both sides of an ``if`` (or of ``a if c else b``) are computed and merged with ``where`` under
the condition, and a ``return`` inside one sets the returned value of those elements only.
That is the function's result element by element for code without side effects, which is
what a mapped function is: memory accesses, atomics, prints and asserts inside it, and loops
whose trip count or exit depends on element values, are CompilationErrors naming the
construct. (Triton runs the function per element, so only one side of a branch costs time;
here both do.)

``pack=p`` hands the function p elements of each argument at once (consecutive elements
along the last dimension: arguments in order, each with its p elements), and it returns p
values of each result in the same order, as in Triton.
"""

from .core import (_const_int, _describe, _gen, _t, _unwrap, broadcast, broadcast_to, builtin,
                   expand_dims, reshape, tensor)

__all__ = ["map_elementwise"]

_CONTEXT = "inside a function mapped by tl.map_elementwise"


class _MappedSession:
    """The front-end session while a mapped function is built: forwards every call to the
    real session, except that run-time ifs become selections (both branches built in line)
    and that memory accesses, side effects and element-dependent loops are refused."""

    _REFUSED = {"load": "memory accesses (tl.load)", "store": "memory accesses (tl.store)",
                "atomic_rmw": "atomics", "atomic_cas": "atomics",
                "descriptor_load": "memory accesses (tensor descriptors)",
                "descriptor_store": "memory accesses (tensor descriptors)",
                "device_print": "tl.device_print", "device_assert": "tl.device_assert",
                "inline_asm_elementwise": "tl.inline_asm_elementwise"}

    def __init__(self, session, shape):
        self._session = session
        self._shape = list(shape)

    def __getattr__(self, name):
        if name in self._REFUSED:
            raise NotImplementedError(f"{self._REFUSED[name]} {_CONTEXT} are not supported: the "
                                      f"function is applied to whole tiles, both sides of its "
                                      f"branches evaluated")
        return getattr(self._session, name)

    def if_then_else(self, cond, then_fn, else_fn, names):
        # if c: A else: B  ->  A and B in line, each result where(c, a, b).
        a = list(then_fn())
        if else_fn is None:
            if a:
                raise RuntimeError("internal: an if without else yields values")
            return []
        b = list(else_fn())
        s = self._session
        return [s.where(cond, x, y) for x, y in zip(a, b)]

    def _uniform(self, handle, what):
        if list(self._session.shape(handle)):
            raise NotImplementedError(f"{what} {_CONTEXT} must not depend on the mapped "
                                      f"elements (found a tile of shape "
                                      f"{list(self._session.shape(handle))}); compute it "
                                      f"with tl.where or a fixed trip count instead")
        return handle

    def _tile(self, handle):
        """A loop-carried scalar as a tile of the mapped shape (it may become one in the
        body, where every value stands for the elements)."""
        if self._shape and not list(self._session.shape(handle)):
            return self._session.broadcast_to(handle, self._shape)
        return handle

    def for_loop(self, lb, ub, step, inits, body, names, flatten=False, warp_specialize=False):
        for h in (lb, ub, step):
            self._uniform(h, "the bounds of a run-time for loop")
        return self._session.for_loop(lb, ub, step, [self._tile(h) for h in inits], body,
                                      names, flatten, warp_specialize)

    def while_loop(self, inits, cond_fn, body_fn, names):
        # Names in <...> are the code generator's own (exit flags, a loop's index): they stay
        # scalars, and a loop whose exit depends on the elements cannot be built.
        inits = [h if n.startswith("<") else self._tile(h) for h, n in zip(inits, names)]

        def cond(args):
            return self._uniform(cond_fn(args), "the condition of a loop")

        def body(args):
            out = body_fn(args)
            for h, n in zip(out, names):
                if n.startswith("<"):
                    self._uniform(h, "whether a loop exits early (break, return)")
            return out
        return self._session.while_loop(inits, cond, body, names)


def _pow2(n):
    return n > 0 and n & (n - 1) == 0


def _split_slots(x, pack):
    """The `pack` tiles [..., m] of x [..., m, pack]: slot k holds x[..., k]."""
    shape = [s.value for s in x.shape]
    if pack == 1:
        return [reshape(x, shape[:-1])]
    from .shapes import split
    even, odd = split(reshape(x, shape[:-1] + [pack // 2, 2]))
    out = [None] * pack
    out[0::2] = _split_slots(even, pack // 2)
    out[1::2] = _split_slots(odd, pack // 2)
    return out


def _join_slots(parts, pack):
    """The inverse of _split_slots: `pack` tiles [..., m] -> [..., m, pack]."""
    if pack == 1:
        return expand_dims(parts[0], len(parts[0].shape))
    from .shapes import join
    even, odd = _join_slots(parts[0::2], pack // 2), _join_slots(parts[1::2], pack // 2)
    shape = [s.value for s in even.shape]
    return reshape(join(even, odd), shape[:-1] + [pack])


@builtin
def map_elementwise(scalar_fn, *args, pack=1):
    """Applies the @kiln.jit function `scalar_fn` to the elements of `args` (broadcast to one
    shape): result[i] = scalar_fn(args[0][i], args[1][i], ...). It may branch on element
    values (if/elif/else, conditional expressions, early returns); it returns one value or a
    tuple, giving one tensor or a tuple of tensors. With `pack` = p the function takes p
    consecutive elements of each argument (a0..ap-1, b0..bp-1, ...) and returns p values of
    each result."""
    from ..runtime.jit import JITFunction
    if not isinstance(scalar_fn, JITFunction):
        raise TypeError(f"expected a @kiln.jit function as tl.map_elementwise's scalar_fn, "
                        f"found {_describe(scalar_fn)}")
    p = _const_int(pack, "tl.map_elementwise's pack")
    if not args:
        raise TypeError("tl.map_elementwise needs at least one tensor argument")
    g = _gen()
    xs = [_t(a) for a in args]
    for i in range(1, len(xs)):  # broadcast all to one shape
        xs[0], xs[i] = broadcast(xs[0], xs[i])
    for i in range(1, len(xs)):
        xs[i] = broadcast(xs[0], xs[i])[1]
    shape = [s.value for s in xs[0].shape]
    if p != 1 and not (_pow2(p) and shape and shape[-1] % p == 0):
        raise ValueError(f"expected tl.map_elementwise's pack to be 1, or a power of two "
                         f"dividing the last dimension of the arguments' shape {shape}, "
                         f"found {p}")
    if p == 1:
        slot_shape, slots = shape, [[x] for x in xs]
    else:
        slot_shape = shape[:-1] + [shape[-1] // p]
        slots = [_split_slots(reshape(x, slot_shape + [p]), p) for x in xs]
    call_args = [s for per_arg in slots for s in per_arg]

    saved_session, saved_shape = g.session, g.elementwise_shape
    g.session = _MappedSession(saved_session, slot_shape)
    g.elementwise_shape = tuple(slot_shape)
    try:
        r = g.call_function(scalar_fn, call_args)
    finally:
        g.session, g.elementwise_shape = saved_session, saved_shape
    several = isinstance(r, tuple)
    values = list(r) if several else [r]
    if _unwrap(r) is None or any(_unwrap(v) is None for v in values) or len(values) % p:
        raise ValueError(f"expected the function mapped by tl.map_elementwise to return "
                         f"values, {p} (pack) per result, found "
                         f"{'nothing' if _unwrap(r) is None else f'{len(values)} values'}")
    results = []
    for j in range(len(values) // p):
        parts = [broadcast_to(_t(v), slot_shape) for v in values[j * p:(j + 1) * p]]
        if p == 1:
            results.append(parts[0])
        else:
            results.append(reshape(_join_slots(parts, p), shape))
    assert all(isinstance(t, tensor) for t in results)
    return tuple(results) if several else results[0]
