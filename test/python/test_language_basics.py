"""Names of triton.language that no other test spelled out, each checked once on the CPU
backend against numpy (float64 where it rounds) and marked `gpu` on the device:

- math: ceil, floor, erf, fdiv and every function of tl.math (tl.math.exp, ...);
- shapes: broadcast, broadcast_to, permute, view, min, zeros_like, the max_constancy hint;
- types: dtype, block_type, pi32_t, void, uint16, uint64;
- and names whose other tests run on one backend only (test_misc_functions).
"""
import math

import numpy as np
import pytest

import kiln
import kiln.language as tl
from test_dot_scan import _gpu_arrays

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


def launch(kernel, arrays, device, **consts):
    """Runs kernel[(1,)] on copies of `arrays` (numpy) and returns them as numpy."""
    if device == "cpu":
        out = [a.copy() for a in arrays]
        kernel[(1,)](*out, device="cpu", **consts)
        return out
    to_dev, to_np = _gpu_arrays()
    dev = [to_dev(a) for a in arrays]
    kernel[(1,)](*dev, **consts)
    return [to_np(d) for d in dev]


@kiln.jit
def math_kernel(x_ptr, y_ptr, o_ptr, OP: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    if OP == "ceil":
        z = tl.ceil(x)
    elif OP == "floor":
        z = tl.floor(x)
    elif OP == "erf":
        z = tl.erf(x)
    elif OP == "fdiv":
        z = tl.fdiv(x, y)
    elif OP == "math.umulhi":
        z = tl.math.umulhi(x, y)
    elif OP == "math.exp":
        z = tl.math.exp(x)
    elif OP == "math.exp2":
        z = tl.math.exp2(x)
    elif OP == "math.log":
        z = tl.math.log(x)
    elif OP == "math.log2":
        z = tl.math.log2(x)
    elif OP == "math.cos":
        z = tl.math.cos(x)
    elif OP == "math.sin":
        z = tl.math.sin(x)
    elif OP == "math.rsqrt":
        z = tl.math.rsqrt(x)
    elif OP == "math.sqrt":
        z = tl.math.sqrt(x)
    elif OP == "math.sqrt_rn":
        z = tl.math.sqrt_rn(x)
    elif OP == "math.abs":
        z = tl.math.abs(x - 2.0)
    elif OP == "math.fdiv":
        z = tl.math.fdiv(x, y)
    elif OP == "math.div_rn":
        z = tl.math.div_rn(x, y)
    elif OP == "math.erf":
        z = tl.math.erf(x)
    elif OP == "math.floor":
        z = tl.math.floor(x)
    else:
        z = tl.math.ceil(x)
    tl.store(o_ptr + r, z)


def _umulhi(x, y):
    return ((x.astype(np.uint64) * y.astype(np.uint64)) >> np.uint64(32)).astype(np.uint32)


_erf = np.vectorize(math.erf)
# OP: (numpy reference of (x, y) in float64, relative tolerance; 0: exact)
MATH = {
    "ceil": (np.ceil, 0), "floor": (np.floor, 0), "erf": (_erf, 1e-6),
    "fdiv": (np.divide, 1e-6), "math.umulhi": (_umulhi, 0), "math.exp": (np.exp, 2e-6),
    "math.exp2": (np.exp2, 2e-6), "math.log": (np.log, 2e-6), "math.log2": (np.log2, 2e-6),
    "math.cos": (np.cos, 2e-6), "math.sin": (np.sin, 2e-6),
    "math.rsqrt": (lambda x: 1 / np.sqrt(x), 2e-6), "math.sqrt": (np.sqrt, 1e-6),
    "math.sqrt_rn": (np.sqrt, 0), "math.abs": (lambda x: np.abs(x - 2.0), 0),
    "math.fdiv": (np.divide, 1e-6), "math.div_rn": (np.divide, 0), "math.erf": (_erf, 1e-6),
    "math.floor": (np.floor, 0), "math.ceil": (np.ceil, 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(MATH))
def test_math_functions(op, device):
    rng = np.random.default_rng(0)
    N = 256
    if op == "math.umulhi":
        x = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
        y = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    else:
        x = rng.uniform(0.25, 4.0, N).astype(np.float32)
        y = rng.uniform(0.5, 3.0, N).astype(np.float32)
    (_, _, o) = launch(math_kernel, [x, y, np.zeros_like(x)], device, OP=op, N=N)
    fn, tol = MATH[op]
    two = op.endswith(("fdiv", "div_rn", "umulhi"))
    if op == "math.umulhi":
        np.testing.assert_array_equal(o, _umulhi(x, y))
        return
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    ref = fn(xd, yd) if two else fn(xd)
    if tol == 0:  # correctly rounded: the float32 rounding of the exact value
        np.testing.assert_array_equal(o, ref.astype(np.float32))
    else:
        np.testing.assert_allclose(o, ref, rtol=tol * (8 if device == "gpu" else 1),
                                   atol=1e-7)


@kiln.jit
def shape_kernel(x_ptr, o_ptr, OP: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    rr = tl.arange(0, R)
    rc = tl.arange(0, C)
    offs = rr[:, None] * C + rc[None, :]
    x = tl.load(x_ptr + offs)
    row = tl.load(x_ptr + rc)[None, :]  # x[0]
    col = tl.load(x_ptr + rr * C)[:, None]  # x[:, 0]
    if OP == "broadcast":
        a, b = tl.broadcast(row, col)
        tl.static_assert(a.shape == b.shape)
        tl.store(o_ptr + offs, a * 1000 + b)
    elif OP == "broadcast_to":
        tl.store(o_ptr + offs, tl.broadcast_to(row, R, C))
    elif OP == "permute":  # [R, C] -> [C, R], stored row-major
        tl.store(o_ptr + rc[:, None] * R + rr[None, :], tl.permute(x, (1, 0)))
    elif OP == "view":  # Triton's view may reorder: only the values are checked
        tl.store(o_ptr + tl.arange(0, R * C), tl.view(x, R * C))
    elif OP == "min":
        tl.store(o_ptr + rr, tl.min(x, axis=1))
    elif OP == "zeros_like":
        z = tl.zeros_like(x)
        tl.static_assert(z.dtype == x.dtype)
        tl.store(o_ptr + offs, z + 7)
    else:  # max_constancy: the index is constant in runs of 4 along the columns
        idx = rr[:, None] * C + (rc // 4 * 4)[None, :]
        idx = tl.max_constancy(idx, [1, 4])
        tl.store(o_ptr + offs, tl.load(x_ptr + idx))


def shape_reference(op, x):
    R, C = x.shape
    if op == "broadcast":
        return x[0][None, :] * 1000 + x[:, 0][:, None]
    if op == "broadcast_to":
        return np.broadcast_to(x[0], (R, C))
    if op == "permute":
        return x.T
    if op == "min":
        return x.min(axis=1)
    if op == "zeros_like":
        return np.full((R, C), 7, x.dtype)
    return x[:, (np.arange(C) // 4) * 4]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["broadcast", "broadcast_to", "permute", "view", "min",
                                "zeros_like", "max_constancy"])
def test_shape_functions(op, device):
    R, C = 8, 16
    x = np.random.default_rng(1).integers(-100, 100, (R, C)).astype(np.int32)
    (_, o) = launch(shape_kernel, [x, np.zeros(R * C, np.int32)], device, OP=op, R=R, C=C)
    if op == "view":
        np.testing.assert_array_equal(np.sort(o), np.sort(x.ravel()))
        return
    ref = shape_reference(op, x)
    np.testing.assert_array_equal(o[:ref.size].reshape(ref.shape), ref)


@kiln.jit
def types_kernel(p_ptr, o16_ptr, o64_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(p_ptr + r)
    tl.static_assert(p_ptr.dtype == tl.pi32_t)
    tl.static_assert(isinstance(x.dtype, tl.dtype) and x.dtype == tl.dtype("int32"))
    tl.static_assert(isinstance(x.type, tl.block_type))
    tl.static_assert(x.type == tl.block_type(tl.int32, [N]))
    tl.static_assert(tl.void.is_void() and tl.void.primitive_bitwidth == 0)
    tl.static_assert(tl.uint16.is_int_unsigned() and tl.uint64.int_bitwidth == 64)
    tl.store(o16_ptr + r, x.to(tl.uint16))
    tl.store(o64_ptr + r, x.to(tl.uint64) * 3)


@pytest.mark.parametrize("device", DEVICES)
def test_types(device):
    """dtype, block_type, pi32_t and void as compile-time values; uint16 and uint64 tiles
    (int32 -> uint16 wraps, int32 -> uint64 sign-extends, as Triton casts)."""
    N = 64
    x = np.random.default_rng(2).integers(-70000, 70000, N).astype(np.int32)
    (_, o16, o64) = launch(types_kernel, [x, np.zeros(N, np.uint16), np.zeros(N, np.uint64)],
                           device, N=N)
    np.testing.assert_array_equal(o16, x.astype(np.uint16))
    np.testing.assert_array_equal(o64, x.astype(np.int64).astype(np.uint64) * np.uint64(3))


@kiln.jit
def misc_kernel(x_ptr, i_ptr, o_ptr, r_ptr, OP: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    i = tl.load(i_ptr + r)
    tl.assume(N > 0)
    if OP == "unary":  # eight functions, one row each of o (8 x N)
        tl.store(o_ptr + r, tl.abs(x - 2.0))
        tl.store(o_ptr + N + r, tl.cos(x))
        tl.store(o_ptr + 2 * N + r, tl.sin(x))
        tl.store(o_ptr + 3 * N + r, tl.exp2(x))
        tl.store(o_ptr + 4 * N + r, tl.log2(x))
        tl.store(o_ptr + 5 * N + r, tl.rsqrt(x))
        tl.store(o_ptr + 6 * N + r, tl.sqrt(x))
        tl.store(o_ptr + 7 * N + r, tl.sigmoid(x))
    elif OP == "binary":
        tl.store(o_ptr + r, tl.minimum(x, 2.0))
        tl.store(o_ptr + N + r, tl.math.fma(x, x, 1.0))
        tl.store(o_ptr + 2 * N + r, tl.softmax(x))
        tl.store(o_ptr + 3 * N + r, x.to(tl.float64).to(tl.float32) * 0.5)
    elif OP == "reductions":  # int results: argmax, argmin, xor_sum, int8 and int16 sums
        tl.store(r_ptr, tl.argmax(x, 0))
        tl.store(r_ptr + 1, tl.argmin(x, 0))
        tl.store(r_ptr + 2, tl.xor_sum(i, 0))
        tl.store(r_ptr + 3, tl.sum(i.to(tl.int8).to(tl.int32), 0))
        tl.store(r_ptr + 4, tl.sum(i.to(tl.int16).to(tl.int32), 0))
    else:  # random: philox rounds and the Box-Muller pair
        a, b, c, d = tl.philox(7, r.to(tl.uint32), r.to(tl.uint32) * 0, r.to(tl.uint32) * 0,
                               r.to(tl.uint32) * 0)
        u1 = a.to(tl.float32) * 2.0 ** -32 + 1e-7
        u2 = b.to(tl.float32) * 2.0 ** -32
        n1, n2 = tl.pair_uniform_to_normal(u1, u2)
        tl.static_print("misc_kernel random", N)
        tl.device_assert(u1 > 0.0, "uniform in (0, 1)")
        tl.store(o_ptr + r, n1)
        tl.store(o_ptr + N + r, n2)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["unary", "binary", "reductions", "random"])
def test_misc_functions(op, device):
    """abs, cos, sin, exp2, log2, rsqrt, sqrt, sigmoid, minimum, math.fma, softmax, float64,
    argmax, argmin, xor_sum, int8, int16, assume, philox, pair_uniform_to_normal,
    static_print and device_assert."""
    N = 128
    rng = np.random.default_rng(3)
    x = rng.uniform(0.25, 4.0, N).astype(np.float32)
    i = rng.integers(-300, 300, N).astype(np.int32)
    o, res = np.zeros(8 * N, np.float32), np.zeros(5, np.int32)
    (_, _, o, res) = launch(misc_kernel, [x, i, o, res], device, OP=op, N=N)
    xd = x.astype(np.float64)
    tol = 2e-6 if device == "cpu" else 2e-5
    if op == "unary":
        refs = [np.abs(xd - 2), np.cos(xd), np.sin(xd), np.exp2(xd), np.log2(xd),
                1 / np.sqrt(xd), np.sqrt(xd), _sigmoid(xd)]
        np.testing.assert_allclose(o.reshape(8, N), np.stack(refs), rtol=tol, atol=1e-6)
    elif op == "binary":
        e = np.exp(xd - xd.max())
        refs = [np.minimum(xd, 2.0), xd * xd + 1, e / e.sum(), xd * 0.5]
        np.testing.assert_allclose(o[:4 * N].reshape(4, N), np.stack(refs), rtol=tol,
                                   atol=1e-7)
    elif op == "reductions":
        assert res[0] == np.argmax(x) and res[1] == np.argmin(x)
        assert res[2] == np.bitwise_xor.reduce(i)
        assert res[3] == i.astype(np.int8).astype(np.int64).sum()
        assert res[4] == i.astype(np.int16).astype(np.int64).sum()
    else:
        n1, n2 = o[:N], o[N:2 * N]
        assert np.isfinite(n1).all() and np.isfinite(n2).all()
        assert abs(n1.mean()) < 0.5 and 0.5 < n1.std() < 1.5
