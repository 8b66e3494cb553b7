"""tl.map_elementwise (Triton 3.6): a scalar @kiln.jit function applied to the elements of
tensors, branching on element values.

- functions with if/elif/else, early returns, values assigned in branches, conditional
  expressions, a fixed-trip loop, several results, scalar and broadcast arguments, pack=2
  and pack=4, on the CPU backend against numpy, and marked `gpu`;
- what a mapped function may not do, as errors at its line: memory accesses, loops whose
  trip count or exit depends on element values; a bad pack or a non-@jit function at the
  call.
"""
import numpy as np
import pytest

import kiln
import kiln.language as tl
from test_dot_scan import _gpu_arrays, expect_error

CPU = dict(device="cpu")


@kiln.jit
def compare(x, y):
    if x < y:
        return -1
    elif x == y:
        return 0
    else:
        return 1


@kiln.jit
def selu(x, alpha):
    if x > 0:
        return x
    else:
        return alpha * (tl.exp(x) - 1)


@kiln.jit
def piecewise(x):
    # an early return, then assignments in branches and a conditional expression
    if x < -2.0:
        return -1.0
    y = x * 2.0
    if x > 1.0:
        y = y + 10.0
        if x > 3.0:
            y = -y
    else:
        y = y - 0.5
    return y if x != 0.0 else 100.0


@kiln.jit
def collatz_steps(n):
    # a loop with a fixed trip count, branching inside
    steps = 0
    for i in range(8):
        if n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
    return steps


@kiln.jit
def sum_diff(a, b):
    return a + b, a - b


@kiln.jit
def divmod_pack2(a0, a1, b0, b1):
    return a0 // b0, a1 // b1, a0 % b0, a1 % b1


@kiln.jit
def clamp_pack4(x0, x1, x2, x3, lo0, lo1, lo2, lo3):
    # pack=4: four elements of each argument, in order; one result, four values
    return (x0 if x0 > lo0 else lo0, x1 if x1 > lo1 else lo1, x2 if x2 > lo2 else lo2,
            x3 if x3 > lo3 else lo3)


@kiln.jit
def map_kernel(x_ptr, y_ptr, o_ptr, p_ptr, alpha, WHAT: tl.constexpr, R: tl.constexpr,
               C: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if WHAT == "compare":
        tl.store(o_ptr + offs, tl.map_elementwise(compare, x, y))
    elif WHAT == "selu":
        tl.store(o_ptr + offs, tl.map_elementwise(selu, x, alpha))
    elif WHAT == "piecewise":
        tl.store(o_ptr + offs, tl.map_elementwise(piecewise, x))
    elif WHAT == "collatz":
        tl.store(o_ptr + offs, tl.map_elementwise(collatz_steps, x))
    elif WHAT == "two_results":
        s, d = tl.map_elementwise(sum_diff, x, y)
        tl.store(o_ptr + offs, s)
        tl.store(p_ptr + offs, d)
    elif WHAT == "broadcast":  # a row and a column: the results have the broadcast shape
        row = tl.load(x_ptr + tl.arange(0, C))[None, :]
        col = tl.load(y_ptr + tl.arange(0, R))[:, None]
        tl.store(o_ptr + offs, tl.map_elementwise(compare, row, col))
    elif WHAT == "pack2":
        q, r = tl.map_elementwise(divmod_pack2, x, y, pack=2)
        tl.store(o_ptr + offs, q)
        tl.store(p_ptr + offs, r)
    else:
        (m,) = tl.map_elementwise(clamp_pack4, x, y, pack=4)
        tl.store(o_ptr + offs, m)


def ints(seed, shape, lo, hi):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(np.int32)


def floats(seed, shape):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


def run(what, x, y, alpha=0.5, **options):
    o = np.zeros(x.shape, x.dtype if what not in ("compare", "broadcast", "collatz")
                 else np.int32)
    p = np.zeros_like(x)
    R, C = o.shape
    map_kernel[(1,)](x, y, o, p, alpha, WHAT=what, R=R, C=C, **options)
    return o, p


def piecewise_ref(x):
    y = np.where(x > 1.0, np.where(x > 3.0, -(x * 2 + 10), x * 2 + 10), x * 2 - 0.5)
    y = np.where(x != 0.0, y, 100.0)
    return np.where(x < -2.0, -1.0, y)


def collatz_ref(n):
    out = []
    for v in n.ravel():
        steps = 0
        for _ in range(8):
            if v != 1:
                v = v // 2 if v % 2 == 0 else 3 * v + 1
                steps += 1
        out.append(steps)
    return np.array(out).reshape(n.shape)


SHAPE = (8, 32)
CASES = {
    "compare": lambda: (ints(0, SHAPE, -4, 4), ints(1, SHAPE, -4, 4)),
    "selu": lambda: (floats(2, SHAPE), floats(3, SHAPE)),
    "piecewise": lambda: (np.concatenate([floats(4, (7, 32)), np.zeros((1, 32), np.float32)]),
                          floats(5, SHAPE)),
    "collatz": lambda: (ints(6, SHAPE, 1, 40), ints(7, SHAPE, 1, 2)),
    "two_results": lambda: (floats(8, SHAPE), floats(9, SHAPE)),
    "broadcast": lambda: (ints(10, SHAPE, -4, 4), ints(11, SHAPE, -4, 4)),
    "pack2": lambda: (ints(12, SHAPE, 0, 100), ints(13, SHAPE, 1, 9)),
    "pack4": lambda: (floats(14, SHAPE), floats(15, SHAPE)),
}


def check(what, x, y, o, p, alpha=0.5):
    if what == "compare":
        np.testing.assert_array_equal(o, np.sign(x.astype(np.int64) - y))
    elif what == "selu":
        ref = np.where(x > 0, x, alpha * (np.exp(x.astype(np.float64)) - 1))
        np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-6)
    elif what == "piecewise":
        np.testing.assert_array_equal(o, piecewise_ref(x).astype(np.float32))
    elif what == "collatz":
        np.testing.assert_array_equal(o, collatz_ref(x))
    elif what == "two_results":
        np.testing.assert_array_equal(o, x + y)
        np.testing.assert_array_equal(p, x - y)
    elif what == "broadcast":
        R, C = o.shape
        ref = np.sign(x.ravel()[:C][None, :].astype(np.int64) - y.ravel()[:R][:, None])
        np.testing.assert_array_equal(o, ref)
    elif what == "pack2":  # non-negative operands: // and % as in numpy
        np.testing.assert_array_equal(o, x // y)
        np.testing.assert_array_equal(p, x % y)
    else:
        np.testing.assert_array_equal(o, np.maximum(x, y))


@pytest.mark.parametrize("what", list(CASES))
def test_map_elementwise_cpu(what):
    x, y = CASES[what]()
    o, p = run(what, x, y, **CPU)
    check(what, x, y, o, p)


@pytest.mark.gpu
@pytest.mark.parametrize("what", list(CASES))
def test_map_elementwise_gpu(what):
    to_dev, to_np = _gpu_arrays()
    x, y = CASES[what]()
    o = np.zeros(x.shape, x.dtype if what not in ("compare", "broadcast", "collatz")
                 else np.int32)
    p = np.zeros_like(x)
    od, pd = to_dev(o), to_dev(p)
    map_kernel[(1,)](to_dev(x), to_dev(y), od, pd, 0.5, WHAT=what, R=SHAPE[0], C=SHAPE[1])
    check(what, x, y, to_np(od), to_np(pd))


@kiln.jit
def scalar_kernel(o_ptr, a, b):
    # scalar (0-d) arguments give a scalar result
    tl.store(o_ptr, tl.map_elementwise(compare, a, b))


def test_map_elementwise_scalars_cpu():
    o = np.zeros(1, np.int32)
    for a, b, want in [(1, 2, -1), (3, 3, 0), (5, -1, 1)]:
        scalar_kernel[(1,)](o, a, b, **CPU)
        assert o[0] == want


# ------------------------------------------------------------------------------ errors

@kiln.jit
def loads(p, x):
    return tl.load(p) + x  # ERR<load>


@kiln.jit
def element_while(x):
    n = 0
    while x > 1:  # ERR<while>
        x = x // 2
        n += 1
    return n


@kiln.jit
def element_break(x):
    n = 0
    for i in range(0, 10):  # ERR<break>
        if x < i:
            break
        n += 1
    return n


@kiln.jit
def element_range(x):
    n = 0
    for i in range(0, x):  # ERR<range>
        n += 1
    return n


@kiln.jit
def map_err_kernel(x_ptr, WHAT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if WHAT == "load":
        y = tl.map_elementwise(loads, x_ptr, x)
    elif WHAT == "while":
        y = tl.map_elementwise(element_while, x)
    elif WHAT == "break":
        y = tl.map_elementwise(element_break, x)
    elif WHAT == "range":
        y = tl.map_elementwise(element_range, x)
    elif WHAT == "pack":
        y = tl.map_elementwise(compare, x, x, pack=3)  # ERR<pack>
    else:
        y = tl.map_elementwise(tl.maximum, x, x)  # ERR<fn>
    tl.store(x_ptr + tl.arange(0, 16), y)


SIG = dict(x_ptr="*i32")


@pytest.mark.parametrize("what,where,message", [
    ("load", loads, r"memory accesses \(tl\.load\) inside a function mapped by "
                    r"tl\.map_elementwise are not supported"),
    ("while", element_while, r"the condition of a loop inside a function mapped by "
                             r"tl\.map_elementwise must not depend on the mapped elements"),
    ("break", element_break, r"whether a loop exits early \(break, return\) inside a function "
                             r"mapped by tl\.map_elementwise must not depend on the mapped "
                             r"elements"),
    ("range", element_range, r"the bounds of a run-time for loop inside a function mapped by "
                             r"tl\.map_elementwise must not depend on the mapped elements"),
    ("pack", None, r"expected tl\.map_elementwise's pack to be 1, or a power of two dividing "
                   r"the last dimension of the arguments' shape \[16\], found 3"),
    ("fn", None, r"expected a @kiln\.jit function as tl\.map_elementwise's scalar_fn"),
])
def test_map_elementwise_errors(what, where, message):
    err = None
    if where is None:
        err = expect_error(map_err_kernel, message, SIG, dict(WHAT=what))
        return
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(map_err_kernel, signature=SIG, constexprs=dict(WHAT=what))
    err = info.value
    import re
    assert re.search(message, err.message), err.message
    assert err.kernel == "map_err_kernel"
    assert f"# ERR<{what}>" in err.source_line, str(err)
    assert any("called from" in n for n in err.notes), str(err)


@pytest.mark.parametrize("what", ["piecewise", "pack4", "collatz"])
def test_map_elementwise_compiles_for_the_gpu(what):
    """No GPU needed: the selections and slot splits lower to PTX."""
    dt = "*fp32" if what != "collatz" else "*i32"
    sig = dict(x_ptr=dt, y_ptr=dt, o_ptr="*i32" if what == "collatz" else dt, p_ptr=dt,
               alpha="fp32")
    ptx = kiln.compile(map_kernel, signature=sig, constexprs=dict(WHAT=what, R=8, C=32),
                       target="sm_90", num_warps=4).asm["ptx"]
    assert ".entry map_kernel" in ptx
