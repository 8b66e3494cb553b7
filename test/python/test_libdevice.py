"""kiln.language.extra.cuda.libdevice (also extra.libdevice) and extra.cuda's globaltimer, smid,
num_threads, num_warps, gdc_wait and gdc_launch_dependents (semantics from Triton 3.6's
documentation and CUDA's math API): every function on the CPU backend against references
from Python's math module, numpy and exact rational arithmetic (fp32 and fp64, fp16 through
the fp32 promotion, special values nan, inf and -0.0), the PTX for sm_90 (libdevice linked and
inlined: no call left), the errors, and GPU-marked twins of the numerics."""
import math
import re
import struct
from fractions import Fraction

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line
from kiln import _C
from kiln.language.extra import libdevice
from kiln.language.extra.cuda import libdevice as cuda_libdevice

CPU = dict(device="cpu")
N = 64
NP = {"f": np.float32, "d": np.float64, "i": np.int32, "u": np.uint32, "l": np.int64,
      "L": np.uint64}
TABLE = {name: (ovs, promotes) for name, ovs, promotes in _C.libdevice_functions()}


@kiln.jit
def k1(a, o, NAME: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o + i, getattr(libdevice, NAME)(tl.load(a + i)))


@kiln.jit
def k2(a, b, o, NAME: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o + i, getattr(libdevice, NAME)(tl.load(a + i), tl.load(b + i)))


@kiln.jit
def k3(a, b, c, o, NAME: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o + i, getattr(libdevice, NAME)(tl.load(a + i), tl.load(b + i), tl.load(c + i)))


@kiln.jit
def k4(a, b, c, d, o, NAME: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o + i, getattr(libdevice, NAME)(tl.load(a + i), tl.load(b + i), tl.load(c + i),
                                            tl.load(d + i)))


KERNELS = {1: k1, 2: k2, 3: k3, 4: k4}


def run(name, *args, out_dtype=None, device="cpu"):
    """libdevice.<name> applied to the numpy arrays `args` by a kernel."""
    args = [np.ascontiguousarray(a) for a in args]
    n = len(args[0])
    if out_dtype is None:
        codes = "".join(next(k for k, v in NP.items() if v == a.dtype.type) for a in args)
        ov = next(o for o in TABLE[name][0] if o.split(":")[1] == codes)
        out_dtype = NP[ov.split(":")[2]]
    out = np.zeros(n, out_dtype)
    kernel = KERNELS[len(args)]
    if device == "cpu":
        kernel[(1,)](*args, out, name, BLOCK=n, **CPU)
        return out
    dev = [kiln.from_numpy(a) for a in args + [out]]
    kernel[(1,)](*dev, name, BLOCK=n)
    kiln.synchronize()
    return dev[-1].numpy()


# --- the module -----------------------------------------------------------------------------

def test_every_triton_name_is_here_and_reachable_three_ways():
    import kiln.language.extra.libdevice as by_path
    assert libdevice is cuda_libdevice is by_path is tl.extra.cuda.libdevice
    assert tl.extra.libdevice is libdevice
    assert len(libdevice.__all__) == 197
    for name in ("asin", "tanh", "erf", "pow", "rsqrt", "isnan", "log1p", "exp2", "fast_expf",
                 "clz", "popc", "ffs", "brev", "byte_perm", "mulhi", "mul24", "sad", "add_rn",
                 "mul_rz", "div_rd", "float2int_rn", "ull2double_ru", "j0", "y1", "lgamma",
                 "tgamma", "erfinv", "nextafter", "signbit", "isfinited", "finitef", "erfcx"):
        assert callable(getattr(libdevice, name)), name
    assert "__nv_powif" in libdevice.pow.__doc__


# --- unary float functions against references --------------------------------------------

def _grid(lo, hi, dt):
    return np.linspace(lo, hi, N).astype(dt)


def _vec(f):
    return lambda x: np.array([f(float(v)) for v in x])


def _round_half_away(x):
    return np.where(np.abs(x - np.trunc(x)) >= 0.5, np.trunc(x) + np.sign(x), np.trunc(x))


def _bessel_j(n):
    # J_n(x) = (1/pi) integral_0^pi cos(n t - x sin t) dt: a periodic integrand, so the
    # trapezoid rule converges geometrically (exact to rounding with 400 points here).
    t = np.linspace(0.0, np.pi, 401)
    w = np.full(t.size, 1.0)
    w[0] = w[-1] = 0.5
    return lambda x: np.array([np.sum(w * np.cos(n * t - v * np.sin(t))) / 400 for v in x])


# name: (lo, hi, reference in float64, relative tolerance for fp32, for fp64)
UNARY = {
    "sin": (-10, 10, np.sin, 2e-6, 1e-14), "cos": (-10, 10, np.cos, 2e-6, 1e-14),
    "tan": (-1.5, 1.5, np.tan, 4e-6, 1e-14),
    "sinpi": (-3, 3, lambda x: np.sin(np.pi * x), 2e-6, 1e-14),
    "cospi": (-3, 3, lambda x: np.cos(np.pi * x), 2e-6, 1e-14),
    "asin": (-0.99, 0.99, np.arcsin, 2e-6, 1e-14), "acos": (-0.99, 0.99, np.arccos, 2e-6, 1e-14),
    "atan": (-20, 20, np.arctan, 2e-6, 1e-14), "sinh": (-10, 10, np.sinh, 2e-6, 1e-14),
    "cosh": (-10, 10, np.cosh, 2e-6, 1e-14), "tanh": (-5, 5, np.tanh, 2e-6, 1e-14),
    "asinh": (-50, 50, np.arcsinh, 2e-6, 1e-14), "acosh": (1, 50, np.arccosh, 2e-6, 1e-14),
    "atanh": (-0.99, 0.99, np.arctanh, 2e-6, 1e-14),
    "exp": (-20, 20, np.exp, 2e-6, 1e-14), "exp2": (-20, 20, np.exp2, 2e-6, 1e-14),
    "exp10": (-8, 8, lambda x: 10.0 ** x, 2e-6, 1e-14), "expm1": (-3, 3, np.expm1, 2e-6, 1e-14),
    "log": (0.01, 100, np.log, 2e-6, 1e-14), "log2": (0.01, 100, np.log2, 2e-6, 1e-14),
    "log10": (0.01, 100, np.log10, 2e-6, 1e-14), "log1p": (-0.9, 5, np.log1p, 2e-6, 1e-14),
    "erf": (-3, 3, _vec(math.erf), 2e-6, 1e-14), "erfc": (-3, 3, _vec(math.erfc), 4e-6, 1e-14),
    "lgamma": (0.1, 20, _vec(math.lgamma), 4e-6, 1e-13),
    "tgamma": (0.1, 10, _vec(math.gamma), 4e-6, 1e-13),
    "cbrt": (-100, 100, np.cbrt, 2e-6, 1e-14), "rcbrt": (0.5, 100, lambda x: 1 / np.cbrt(x),
                                                         2e-6, 1e-14),
    "sqrt": (0, 100, np.sqrt, 2e-7, 1e-15), "rsqrt": (0.01, 100, lambda x: 1 / np.sqrt(x),
                                                      2e-6, 1e-15),
    "normcdf": (-5, 5, lambda x: 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in x]),
                4e-6, 1e-14),
    "j0": (-20, 20, _bessel_j(0), 1e-5, 1e-10), "j1": (-20, 20, _bessel_j(1), 1e-5, 1e-10),
    "trunc": (-5, 5, np.trunc, 0, 0), "floor": (-5, 5, np.floor, 0, 0),
    "ceil": (-5, 5, np.ceil, 0, 0), "rint": (-5, 5, np.rint, 0, 0),
    "nearbyint": (-5, 5, np.rint, 0, 0), "round": (-5, 5, _round_half_away, 0, 0),
    "abs": (-5, 5, np.abs, 0, 0), "logb": (0.001, 1e6, lambda x: np.floor(np.log2(x)), 0, 0),
    "saturatef": (-2, 2, lambda x: np.clip(x, 0, 1), 0, None),
    "fast_sinf": (-3, 3, np.sin, 1e-5, None), "fast_cosf": (-3, 3, np.cos, 1e-5, None),
    "fast_tanf": (-1, 1, np.tan, 1e-5, None), "fast_expf": (-10, 10, np.exp, 1e-5, None),
    "fast_logf": (0.01, 100, np.log, 1e-5, None), "fast_log2f": (0.01, 100, np.log2, 1e-5, None),
    "fast_log10f": (0.01, 100, np.log10, 1e-5, None),
    "fast_exp10f": (-5, 5, lambda x: 10.0 ** x, 1e-5, None),
}


def check_close(got, want, rtol, atol=0.0, what=""):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    ok = (np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True) |
          ((got == want) & np.isinf(want)))
    assert ok.all(), (what, got[~ok][:4], want[~ok][:4])


@pytest.mark.parametrize("dt", ["f", "d"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_cpu(name, dt):
    lo, hi, ref, rtol32, rtol64 = UNARY[name]
    rtol = rtol32 if dt == "f" else rtol64
    if rtol is None:
        pytest.skip(f"{name} has no fp64 overload")
    x = _grid(lo, hi, NP[dt])
    if name in ("j0", "j1", "normcdf", "cospi", "sinpi", "sin", "cos", "tan", "lgamma"):
        atol = 1e-6 if dt == "f" else 1e-13
    else:
        atol = 0.0
    check_close(run(name, x), ref(x.astype(np.float64)), rtol, atol, name)


def test_bessel_y_and_jn_yn_cpu():
    # Values of Y0, Y1 at 1 and 2 (Abramowitz & Stegun, table 9.1), and jn/yn for n = 0, 1
    # agreeing with j0/j1/y0/y1.
    x = np.array([1.0, 2.0] * 32)
    for dt, tol in ((np.float32, 1e-6), (np.float64, 1e-14)):
        xs = x.astype(dt)
        check_close(run("y0", xs), [0.08825696421567696, 0.5103756726497451] * 32, tol)
        check_close(run("y1", xs), [-0.7812128213002887, -0.1070324315409375] * 32, tol)
        for n, f in ((0, "j0"), (1, "j1")):
            ns = np.full(N, n, np.int32)
            assert np.array_equal(run("jn", ns, xs), run(f, xs))
            assert np.array_equal(run("yn", ns, xs), run("y" + f[1], xs))


def _erfcx(x):
    # exp(x^2) erfc(x): directly where that is accurate, else the continued fraction
    # 1 / (sqrt(pi) (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))).
    if x < 5:
        return math.exp(x * x) * math.erfc(x)
    k = x
    for n in range(200, 0, -1):
        k = x + (n / 2) / k
    return 1 / (math.sqrt(math.pi) * k)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_inverse_error_functions_cpu(dt):
    tol = 2e-6 if dt == np.float32 else 1e-13
    y = np.linspace(-0.999, 0.999, N).astype(dt)
    x = run("erfinv", y)
    check_close([math.erf(v) for v in x.astype(float)], y, tol, 1e-7 if dt == np.float32
                else 1e-15, "erfinv")
    q = np.concatenate([np.geomspace(1e-30 if dt == np.float64 else 1e-20, 1, N // 2),
                        np.linspace(1, 1.999, N // 2)]).astype(dt)
    x = run("erfcinv", q)
    check_close([math.erfc(v) for v in x.astype(float)], q, 8 * tol, 0, "erfcinv")
    p = np.geomspace(1e-12, 0.999, N).astype(dt)
    x = run("normcdfinv", p)
    check_close([0.5 * math.erfc(-v / math.sqrt(2)) for v in x.astype(float)], p, 8 * tol, 0,
                "normcdfinv")
    edge = np.array([1.0, -1.0, 0.0, 2.0, np.nan, -0.0, 0.5, -0.5] * 8, dt)
    got = run("erfinv", edge)
    assert list(got[:5].astype(float)[:3]) == [np.inf, -np.inf, 0.0] and np.isnan(got[3:5]).all()
    got = run("erfcinv", np.array([0.0, 2.0, 1.0, -1.0] * 16, dt))
    assert list(got[:3]) == [np.inf, -np.inf, 0.0] and np.isnan(got[3])
    xs = np.concatenate([np.linspace(-3, 24, N - 4), [25.5, 30.0, 100.0, 1e4]]).astype(dt)
    check_close(run("erfcx", xs), [_erfcx(float(v)) for v in xs], 4e-6 if dt == np.float32
                else 1e-11, 0, "erfcx")


def _bessel_i(n):
    # I_n(x) = (1/pi) integral_0^pi exp(x cos t) cos(n t) dt (periodic: the trapezoid rule
    # converges geometrically).
    t = np.linspace(0.0, np.pi, 801)
    w = np.full(t.size, 1.0)
    w[0] = w[-1] = 0.5
    return lambda x: np.array([np.sum(w * np.exp(v * np.cos(t)) * np.cos(n * t)) / 800
                               for v in x])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_bessel_i_cpu(dt):
    x = np.concatenate([np.linspace(-30, 30, N - 4), [19.9, 20.1, 50.0, -60.0]]).astype(dt)
    tol = 2e-6 if dt == np.float32 else 1e-13
    for n in (0, 1):
        check_close(run(f"cyl_bessel_i{n}", x), _bessel_i(n)(x.astype(float)), tol, 0,
                    f"cyl_bessel_i{n}")
    edge = np.array([np.nan, np.inf, -np.inf, 0.0] * 16, dt)
    got0, got1 = run("cyl_bessel_i0", edge), run("cyl_bessel_i1", edge)
    assert np.isnan(got0[0]) and list(got0[1:4]) == [np.inf, np.inf, 1.0]
    assert np.isnan(got1[0]) and list(got1[1:4]) == [np.inf, -np.inf, 0.0]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_special_values_cpu(dt):
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 2.0] * 8, dt)
    with np.errstate(all="ignore"):
        for name, ref in (("sqrt", np.sqrt), ("exp", np.exp), ("log", np.log), ("tanh", np.tanh),
                          ("atan", np.arctan), ("floor", np.floor), ("cbrt", np.cbrt),
                          ("expm1", np.expm1), ("log1p", np.log1p), ("asinh", np.arcsinh)):
            got, want = run(name, x), ref(x)
            assert np.array_equal(np.signbit(got[:2]), np.signbit(want[:2])), name
            check_close(got, want, 1e-6, 0, name)
    assert list(run("isnan", x)[:8]) == [0, 0, 0, 0, 1, 0, 0, 0]
    assert list(run("isinf", x)[:8]) == [0, 0, 1, 1, 0, 0, 0, 0]
    assert list(run("signbit", x)[:8]) == [0, 1, 0, 1, 0, 0, 1, 0]
    fin = "finitef" if dt == np.float32 else "isfinited"
    assert list(run(fin, x)[:8]) == [1, 1, 0, 0, 0, 1, 1, 1]
    assert run("isnan", x).dtype == np.int32


def test_fp16_computes_in_fp32_and_rounds_back_cpu():
    x = np.linspace(-0.9, 0.9, N).astype(np.float16)
    got = run("asin", x, out_dtype=np.float16)
    check_close(got, np.arcsin(x.astype(np.float64)).astype(np.float16), 1e-3, 1e-3)
    assert list(run("isnan", np.array([np.nan, 1] * 32, np.float16), out_dtype=np.int32)[:2]) \
        == [1, 0]


# --- binary and ternary float functions -----------------------------------------------------

def _pairs(dt):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(N) * 10).astype(dt)
    b = (rng.standard_normal(N) * 3).astype(dt)
    return a, b


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_binary_cpu(dt):
    a, b = _pairs(dt)
    wide = (a.astype(np.float64), b.astype(np.float64))
    tol = 4e-6 if dt == np.float32 else 1e-14
    pa = np.abs(a) + np.float64(0.5).astype(dt)
    check_close(run("pow", pa, b), np.power(pa.astype(np.float64), wide[1]), tol)
    n = np.arange(-8, 8).repeat(4).astype(np.int32)
    check_close(run("pow", a, n), np.power(wide[0], n.astype(np.float64)), tol)
    check_close(run("atan2", a, b), np.arctan2(*wide), tol)
    check_close(run("fmod", a, b), np.fmod(*wide), 0)
    check_close(run("remainder", a, b), [math.remainder(x, y) for x, y in zip(*wide)], 0)
    check_close(run("hypot", a, b), np.hypot(*wide), tol)
    check_close(run("rhypot", a, b), 1 / np.hypot(*wide), tol)
    check_close(run("copysign", a, b), np.copysign(*wide), 0)
    check_close(run("nextafter", a, b), np.nextafter(a, b), 0)
    check_close(run("fdim", a, b), np.maximum(a - b, dt(0)), 0)
    e = np.arange(-8, 8).repeat(4).astype(np.int32)
    check_close(run("ldexp", a, e), np.ldexp(a, e), 0)
    check_close(run("scalbn", a, e), np.ldexp(a, e), 0)
    c = (a * 0.5).astype(dt)
    check_close(run("fma", a, b, c), wide[0] * wide[1] + c, tol)
    d = (b * 0.25).astype(dt)
    check_close(run("norm3d", a, b, c), np.sqrt(wide[0] ** 2 + wide[1] ** 2 + c.astype(float) ** 2),
                tol)
    check_close(run("rnorm3d", a, b, c),
                1 / np.sqrt(wide[0] ** 2 + wide[1] ** 2 + c.astype(float) ** 2), tol)
    if dt == np.float32:
        check_close(run("fast_dividef", a, b), wide[0] / wide[1], 1e-6)
        check_close(run("fast_powf", pa, b), np.power(pa.astype(np.float64), wide[1]), 1e-5)
    check_close(run("rnorm4d", a, b, c, d),
                1 / np.sqrt(wide[0] ** 2 + wide[1] ** 2 + c.astype(float) ** 2 +
                            d.astype(float) ** 2), tol)
    check_close(run("ilogb", np.abs(a) + 1), np.floor(np.log2(np.abs(wide[0]) + 1)), 0)


def test_literal_arguments_and_broadcast_cpu():
    @kiln.jit
    def lit(a, o, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        x = tl.load(a + i)
        # a float literal takes fp64 beside an fp64 tile, an int literal picks powi; a scalar
        # broadcasts against the tile.
        r = libdevice.pow(x, 2.0) + libdevice.pow(x, 3) + libdevice.copysign(1.0, tl.load(a))
        tl.store(o + i, r)

    x = np.linspace(-2, 2, N)
    out = np.zeros(N)
    lit[(1,)](x, out, BLOCK=N, **CPU)
    check_close(out, x ** 2 + x ** 3 + np.copysign(1.0, x[0]), 1e-14)


# --- rounding modes, exactly ----------------------------------------------------------------

def _round_exact(q, dt, mode):
    """The exact rational q rounded to dt (np.float32/float64) in mode rn/rz/rd/ru."""
    near = dt(float(q)) if dt == np.float64 else np.float32(float(q))
    if dt == np.float32 and Fraction(float(near)) != q:
        # float(q) rounded once to f64; fix up a possible double rounding to nearest.
        lo = near if Fraction(float(near)) < q else np.nextafter(near, dt(-np.inf))
        hi = np.nextafter(lo, dt(np.inf))
        dl, dh = q - Fraction(float(lo)), Fraction(float(hi)) - q
        near = lo if dl < dh or (dl == dh and int(lo.view(np.int32)) % 2 == 0) else hi
    if mode == "rn" or not np.isfinite(near) or Fraction(float(near)) == q:
        if np.isinf(near) and mode != "rn":
            big = np.finfo(dt).max
            if mode == "rz" or (mode == "rd" and near > 0) or (mode == "ru" and near < 0):
                return dt(np.copysign(big, near))
        return near
    up = Fraction(float(near)) < q
    if mode == "rz":
        mode = "rd" if q > 0 else "ru"
    if mode == "rd":
        return np.nextafter(near, dt(-np.inf)) if not up else near
    return np.nextafter(near, dt(np.inf)) if up else near


def _operands(dt, rng):
    a = (rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N)).astype(dt)
    b = (rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N)).astype(dt)
    b[:4] = [dt(1e-30), -a[1] * dt(1e-9), dt(3.0), a[3]]  # far below, tiny, inexact, equal
    return a, b


@pytest.mark.parametrize("mode", ["rn", "rz", "rd", "ru"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_rounding_mode_arithmetic_exact_cpu(dt, mode):
    rng = np.random.default_rng(7)
    a, b = _operands(dt, rng)
    F = Fraction
    cases = {
        "add": (lambda x, y: F(float(x)) + F(float(y)), (a, b)),
        "sub": (lambda x, y: F(float(x)) - F(float(y)), (a, b)),
        "mul": (lambda x, y: F(float(x)) * F(float(y)), (a, b)),
        "div": (lambda x, y: F(float(x)) / F(float(y)), (a, b)),
    }
    for op, (exact, args) in cases.items():
        got = run(f"{op}_{mode}", *args)
        want = [_round_exact(exact(x, y), dt, mode) for x, y in zip(*args)]
        assert np.array_equal(got, np.array(want, dt)), (op, mode, got[:4], want[:4])
    pa = np.abs(a)
    got = run(f"rcp_{mode}", pa)
    assert np.array_equal(got, np.array([_round_exact(1 / F(float(x)), dt, mode) for x in pa],
                                        dt)), ("rcp", mode)
    got = run(f"sqrt_{mode}", pa)
    for x, g in zip(pa, got):  # the exact root lies between g and its neighbour
        gq, xq = F(float(g)), F(float(x))
        lo = {"rn": None, "rz": gq, "rd": gq, "ru": None}[mode]
        if mode in ("rz", "rd"):
            assert lo * lo <= xq < F(float(np.nextafter(g, dt(np.inf)))) ** 2
        elif mode == "ru":
            assert F(float(np.nextafter(g, dt(-np.inf)))) ** 2 < xq <= gq * gq
        else:
            assert g == np.sqrt(x)
    for c in ((b * dt(0.37)).astype(dt), -(a * b).astype(dt)):  # the second cancels
        got = run(f"fma_{mode}", a, b, c)
        want = [_round_exact(F(float(x)) * F(float(y)) + F(float(z)), dt, mode)
                for x, y, z in zip(a, b, c)]
        assert np.array_equal(got, np.array(want, dt)), ("fma", mode)


@pytest.mark.parametrize("mode", ["rn", "rz", "rd", "ru"])
def test_conversions_exact_cpu(mode):
    rng = np.random.default_rng(3)
    F = Fraction
    d = (rng.standard_normal(N) * 1e6).astype(np.float64)
    got = run(f"double2float_{mode}", d)
    assert np.array_equal(got, np.array([_round_exact(F(float(v)), np.float32, mode)
                                         for v in d], np.float32))
    i = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    got = run(f"int2float_{mode}", i)
    assert np.array_equal(got, np.array([_round_exact(F(int(v)), np.float32, mode) for v in i],
                                        np.float32))
    ll = rng.integers(-2 ** 63, 2 ** 63 - 1, N, dtype=np.int64)
    ll[0] = 2 ** 63 - 1
    for name, dt in (("ll2float", np.float32), ("ll2double", np.float64)):
        got = run(f"{name}_{mode}", ll)
        assert np.array_equal(got, np.array([_round_exact(F(int(v)), dt, mode) for v in ll], dt))
    ull = rng.integers(0, 2 ** 64 - 1, N, dtype=np.uint64)
    ull[0] = 2 ** 64 - 1
    got = run(f"ull2double_{mode}", ull)
    assert np.array_equal(got, np.array([_round_exact(F(int(v)), np.float64, mode)
                                         for v in ull], np.float64))
    # float -> integer: rounded by the mode, saturating, NaN to 0.
    rounder = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode]
    x = np.array([2.5, -2.5, 3.7, -3.7, 1e10, -1e10, np.nan, 0.5] * 8, np.float32)
    want = np.clip(np.nan_to_num(rounder(x.astype(np.float64)), nan=0.0), -2 ** 31, 2 ** 31 - 1)
    assert np.array_equal(run(f"float2int_{mode}", x), want.astype(np.int32))
    assert np.array_equal(run(f"double2ll_{mode}", x.astype(np.float64)),
                          np.clip(np.nan_to_num(rounder(x.astype(np.float64)), nan=0.0),
                                  -2.0 ** 63, 2.0 ** 63 - 1024).astype(np.int64))
    u = np.clip(np.nan_to_num(rounder(x.astype(np.float64)), nan=0.0), 0, 2 ** 32 - 1)
    assert np.array_equal(run(f"float2uint_{mode}", x).view(np.uint32), u.astype(np.uint32))
    # The other float -> integer widths, saturating at their bounds (Triton's dtypes: int32
    # and int64 for the unsigned ones too, read back as unsigned here).
    xd = x.astype(np.float64)
    r = np.nan_to_num(rounder(xd), nan=0.0)
    big = np.array([3e9, -3e9, 2.0 ** 70, -2.0 ** 70] * 16)
    rb = rounder(big)
    for name, src, lo, hi, width in (
            ("double2int", xd, -2 ** 31, 2 ** 31 - 1, 32), ("double2uint", xd, 0, 2 ** 32 - 1, 32),
            ("float2ll", x, -2 ** 63, 2 ** 63 - 1, 64), ("float2ull", x, 0, 2 ** 64 - 1, 64),
            ("double2ull", xd, 0, 2 ** 64 - 1, 64), ("double2int", big, -2 ** 31, 2 ** 31 - 1, 32),
            ("double2ull", big, 0, 2 ** 64 - 1, 64)):
        ref = r if src is not big else rb
        want = [min(max(int(v), lo), hi) for v in ref]
        got = run(f"{name}_{mode}", src)
        got = [int(v) & (2 ** width - 1) if lo == 0 else int(v) for v in got]
        assert got == want, (name, mode, got[:8], want[:8])
    ui = rng.integers(0, 2 ** 32, N, dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(run(f"uint2float_{mode}", ui),
                          np.array([_round_exact(F(int(v)), np.float32, mode) for v in ui],
                                   np.float32))
    assert np.array_equal(run(f"ull2float_{mode}", ull),
                          np.array([_round_exact(F(int(v)), np.float32, mode) for v in ull],
                                   np.float32))
    if mode == "rn":
        assert np.array_equal(run("uint2double_rn", ui), ui.astype(np.float64))


def test_conversions_and_bit_casts_cpu():
    f = np.array([1.5, -0.0, np.inf, 3.25] * 16, np.float32)
    assert np.array_equal(run("float_as_int", f), f.view(np.int32))
    assert np.array_equal(run("int_as_float", f.view(np.int32)), f)
    assert np.array_equal(run("float_as_uint", f), f.view(np.int32))
    assert np.array_equal(run("uint_as_float", f.view(np.uint32)), f)
    d = f.astype(np.float64)
    assert np.array_equal(run("double_as_longlong", d), d.view(np.int64))
    assert np.array_equal(run("longlong_as_double", d.view(np.int64)), d)
    lo, hi = run("double2loint", d), run("double2hiint", d)
    assert np.array_equal(lo, d.view(np.int32)[0::2]) and np.array_equal(hi, d.view(np.int32)[1::2])
    assert np.array_equal(run("hiloint2double", hi, lo), d)
    assert np.array_equal(run("int2double_rn", np.arange(N, dtype=np.int32) - 7),
                          np.arange(N) - 7.0)
    assert np.array_equal(run("llrint", np.array([2.5, 3.5, -2.5, 1e30] * 16)),
                          np.array([2, 4, -2, 2 ** 63 - 1] * 16, np.int64))
    assert np.array_equal(run("llround", np.array([2.5, 3.5, -2.5, 0.4] * 16, np.float32)),
                          np.array([3, 4, -3, 0] * 16, np.int64))
    assert np.array_equal(run("rsqrt_rn", np.array([4.0, 2.0] * 32, np.float32)),
                          np.array([0.5, 1 / np.sqrt(2.0)] * 32, np.float32))


# --- integers ----------------------------------------------------------------------------------

def test_integer_functions_cpu():
    rng = np.random.default_rng(5)
    a = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    b = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    a[:3] = [0, 1, -1]
    u32 = lambda v: int(v) & 0xFFFFFFFF  # noqa: E731
    assert list(run("clz", a)) == [32 - u32(v).bit_length() for v in a]
    assert list(run("popc", a)) == [bin(u32(v)).count("1") for v in a]
    assert list(run("ffs", a)) == [(u32(v) & -u32(v)).bit_length() for v in a]
    assert [u32(v) for v in run("brev", a)] == [int(f"{u32(v):032b}"[::-1], 2) for v in a]
    l64 = a.astype(np.int64) * 3 + (1 << 40)
    assert list(run("clz", l64)) == [64 - (int(v) & (2 ** 64 - 1)).bit_length() for v in l64]
    assert list(run("popc", l64)) == [bin(int(v) & (2 ** 64 - 1)).count("1") for v in l64]
    assert list(run("mulhi", a, b)) == [(int(x) * int(y)) >> 32 for x, y in zip(a, b)]
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    assert list(run("mulhi", ua, ub)) == [(int(x) * int(y)) >> 32 for x, y in zip(ua, ub)]
    la, lb = a.astype(np.int64) << 20, b.astype(np.int64) << 25
    assert list(run("mulhi", la, lb)) == [(int(x) * int(y)) >> 64 for x, y in zip(la, lb)]
    s24 = lambda v: ((int(v) & 0xFFFFFF) ^ 0x800000) - 0x800000  # noqa: E731
    want = [np.int32(np.int64((s24(x) * s24(y)) & 0xFFFFFFFF).astype(np.uint32).view(np.int32))
            for x, y in zip(a, b)]
    assert list(run("mul24", a, b)) == want
    assert list(run("mul24", ua, ub)) == [((int(x) & 0xFFFFFF) * (int(y) & 0xFFFFFF))
                                          & 0xFFFFFFFF for x, y in zip(ua, ub)]
    c = rng.integers(0, 1000, N).astype(np.uint32)
    assert [u32(v) for v in run("sad", a, b, c)] == \
        [(abs(int(x) - int(y)) + int(z)) & 0xFFFFFFFF for x, y, z in zip(a, b, c)]
    assert list(run("sad", ua, ub, c)) == \
        [(abs(int(x) - int(y)) + int(z)) & 0xFFFFFFFF for x, y, z in zip(ua, ub, c)]
    assert list(run("hadd", a, b)) == [(int(x) + int(y)) >> 1 for x, y in zip(a, b)]
    assert list(run("rhadd", a, b)) == [(int(x) + int(y) + 1) >> 1 for x, y in zip(a, b)]
    assert list(run("hadd", ua, ub)) == [(int(x) + int(y)) >> 1 for x, y in zip(ua, ub)]
    sel = rng.integers(0, 2 ** 16, N).astype(np.int32)

    def perm(x, y, s):
        both = (u32(y) << 32) | u32(x)
        r = 0
        for i in range(4):
            r |= ((both >> (8 * ((int(s) >> (4 * i)) & 7))) & 0xFF) << (8 * i)
        return r
    assert [u32(v) for v in run("byte_perm", a, b, sel)] == \
        [perm(x, y, s) for x, y, s in zip(a, b, sel)]
    a[0] = -2 ** 31
    assert list(run("abs", a)) == [abs(int(v)) if v != -2 ** 31 else v for v in a]
    assert list(run("abs", la)) == [abs(int(v)) for v in la]


# --- extra.cuda ---------------------------------------------------------------------------------

@kiln.jit
def cuda_extra_kernel(t_ptr, s_ptr, n_ptr):
    tl.extra.cuda.gdc_wait()
    t0 = tl.extra.cuda.globaltimer()
    tl.store(s_ptr, tl.extra.cuda.smid())
    tl.store(n_ptr, tl.extra.cuda.num_threads() + tl.extra.cuda.num_warps() * 1000)
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(t_ptr, tl.extra.cuda.globaltimer() - t0)
    tl.store(t_ptr + 1, t0)


def test_cuda_extras_cpu():
    import time
    t, s, n = np.zeros(2, np.int64), np.full(1, -7, np.int32), np.zeros(1, np.int32)
    before = time.time_ns()
    cuda_extra_kernel[(1,)](t, s, n, num_warps=8, **CPU)
    assert t[0] >= 0 and abs(int(t[1]) - before) < 60 * 10 ** 9
    assert s[0] >= -1 and s[0] != -7
    assert n[0] == 256 + 8000


# --- PTX: libdevice linked and inlined ----------------------------------------------------------

def ptx_of(fn, signature, constexprs, target="sm_90"):
    return kiln.compile(fn, signature=signature, constexprs=constexprs, target=target).asm["ptx"]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_ptx_has_libdevice_inlined(name):
    # Every overload of every function: the declaration Kiln emits links against libdevice's
    # definition (same types) and nothing is left to resolve.
    ptr = {"f": "*fp32", "d": "*fp64", "i": "*i32", "u": "*u32", "l": "*i64", "L": "*u64"}
    for ov in TABLE[name][0]:
        _, args, res = ov.split(":")
        sig = {n: ptr[c] for n, c in zip(["a", "b", "c", "d"], args)}
        sig["o"] = ptr[res]
        ptx = ptx_of(KERNELS[len(args)], sig, {"NAME": name, "BLOCK": 128})
        assert "__nv_" not in ptx, f"{ov}: a libdevice call was left in the PTX"
        assert not re.search(r"\.extern\s+\.func", ptx), ov
        assert ".entry" in ptx


def _ptxas():
    import os
    import shutil
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return shutil.which("ptxas") or (os.path.join(home, "bin", "ptxas")
                                     if os.path.exists(os.path.join(home, "bin", "ptxas"))
                                     else None)


def assemble(ptx, arch, tmp_path):
    """ptxas accepts the PTX (skipped where ptxas is not installed)."""
    import subprocess
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("ptxas not installed")
    f = tmp_path / f"k_{arch}.ptx"
    f.write_text(ptx)
    r = subprocess.run([ptxas, "-arch", arch, str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@kiln.jit
def two_timer_reads_kernel(t_ptr):
    t0 = tl.extra.cuda.globaltimer()
    t1 = tl.extra.cuda.globaltimer()
    tl.store(t_ptr, t1 - t0)


def test_ptx_of_cuda_extras(tmp_path):
    # Two reads of the timer stay two (not combined into one).
    two = ptx_of(two_timer_reads_kernel, {"t_ptr": "*i64"}, {})
    assert len(re.findall(r"%globaltimer", two)) == 2, two
    sig = {"t_ptr": "*i64", "s_ptr": "*i32", "n_ptr": "*i32"}
    ptx = ptx_of(cuda_extra_kernel, sig, {})
    assert "%globaltimer" in ptx and "%smid" in ptx
    assert "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx
    old = ptx_of(cuda_extra_kernel, sig, {}, target="sm_80")
    assert "griddepcontrol" not in old and "%globaltimer" in old
    assemble(ptx, "sm_90", tmp_path)
    assemble(old, "sm_80", tmp_path)


@pytest.mark.parametrize("name", ["asin", "lgamma", "pow", "erfinv", "byte_perm", "div_rd",
                                  "ull2float_rz", "cyl_bessel_i1", "fast_expf"])
def test_ptx_assembles(name, tmp_path):
    ptr = {"f": "*fp32", "d": "*fp64", "i": "*i32", "u": "*u32", "l": "*i64", "L": "*u64"}
    for ov in TABLE[name][0]:
        _, args, res = ov.split(":")
        sig = {n: ptr[c] for n, c in zip(["a", "b", "c", "d"], args)}
        sig["o"] = ptr[res]
        for arch in ("sm_80", "sm_90"):
            assemble(ptx_of(KERNELS[len(args)], sig, {"NAME": name, "BLOCK": 128}, arch), arch,
                     tmp_path)


# --- errors -------------------------------------------------------------------------------------

@kiln.jit
def bad_dtype_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, libdevice.asin(x))  # ERR


@kiln.jit
def bad_arity_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, libdevice.pow(x))  # ERR


@kiln.jit
def bad_rounding_dtype_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, libdevice.add_rz(x, x))  # ERR


@kiln.jit
def gpu_only_kernel(x_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i)
    tl.store(x_ptr + i, libdevice.rcp64h(x))  # ERR


def test_errors():
    for fn, sig, message in (
            (bad_dtype_kernel, {"x_ptr": "*i32"},
             r"expected arguments of dtypes \(fp32\) or \(fp64\) for libdevice.asin, found int32"),
            (bad_arity_kernel, {"x_ptr": "*fp32"}, r"libdevice.pow takes 2 arguments, found 1"),
            (bad_rounding_dtype_kernel, {"x_ptr": "*fp16"},
             r"expected arguments of dtypes \(fp32, fp32\) or \(fp64, fp64\) for "
             r"libdevice.add_rz, found fp16, fp16")):
        with pytest.raises(kiln.CompilationError) as info:
            kiln.compile(fn, signature=sig)
        assert info.value.kernel == fn.__name__
        assert info.value.line == marker_line(fn), str(info.value)
        assert re.search(message, info.value.message), info.value.message
    x = np.zeros(16, np.float64)
    with pytest.raises(kiln.CompilationError) as info:
        gpu_only_kernel[(1,)](x, BLOCK=16, **CPU)
    err = str(info.value)
    assert "libdevice.rcp64h (@__nv_rcp64h) has no CPU backend version" in err
    assert "gpu_only_kernel" in err and f":{marker_line(gpu_only_kernel)}:" in err


# --- the same on the GPU --------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f", "d"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gpu(name, dt):
    lo, hi, ref, rtol32, rtol64 = UNARY[name]
    rtol = rtol32 if dt == "f" else rtol64
    if rtol is None:
        pytest.skip(f"{name} has no fp64 overload")
    x = _grid(lo, hi, NP[dt])
    atol = (1e-6 if dt == "f" else 1e-13) if name in ("j0", "j1", "normcdf", "cospi", "sinpi",
                                                       "sin", "cos", "tan") else 0.0
    if name.startswith("fast_"):
        rtol, atol = 1e-4, 1e-5
    check_close(run(name, x, device="gpu"), ref(x.astype(np.float64)), max(rtol, 4e-7), atol,
                name)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_cpu_and_gpu_agree_gpu(dt):
    # Every function both backends have, on the same inputs: equal within a few ulp (libm and
    # libdevice differ in their last bits), exactly for the exact ones.
    x = np.linspace(0.1, 0.9, N).astype(dt)
    code = "f" if dt == np.float32 else "d"
    for name, (ovs, _) in TABLE.items():
        ov = next((o for o in ovs if set(o.split(":")[1]) == {code}), None)
        if ov is None or name.startswith("fast_") or name in libdevice.CPU_UNSUPPORTED:
            continue
        args = [x] * len(ov.split(":")[1])
        cpu, gpu = run(name, *args), run(name, *args, device="gpu")
        exact = (name[-3:] in ("_rn", "_rz", "_rd", "_ru") or "_as_" in name or
                 name in ("isnan", "isinf", "finitef", "isfinited", "signbit", "floor", "ceil",
                          "trunc", "round", "rint", "nearbyint", "abs", "copysign", "fmod",
                          "fdim", "nextafter", "saturatef", "fma", "remainder"))
        if exact:
            assert np.array_equal(cpu, gpu), name
        else:
            check_close(gpu, cpu, 1e-5 if dt == np.float32 else 1e-13, 0, name)


@pytest.mark.gpu
def test_rounding_modes_and_integers_gpu():
    rng = np.random.default_rng(7)
    for dt in (np.float32, np.float64):
        a, b = _operands(dt, rng)
        for op in ("add", "sub", "mul", "div"):
            for mode in ("rn", "rz", "rd", "ru"):
                want = [_round_exact({"add": Fraction(float(x)) + Fraction(float(y)),
                                      "sub": Fraction(float(x)) - Fraction(float(y)),
                                      "mul": Fraction(float(x)) * Fraction(float(y)),
                                      "div": Fraction(float(x)) / Fraction(float(y))}[op],
                                     dt, mode) for x, y in zip(a, b)]
                assert np.array_equal(run(f"{op}_{mode}", a, b, device="gpu"),
                                      np.array(want, dt)), (op, mode)
    i = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    for name in ("clz", "popc", "ffs", "brev"):
        assert np.array_equal(run(name, i, device="gpu"), run(name, i)), name
    assert np.array_equal(run("byte_perm", i, i[::-1].copy(), i, device="gpu"),
                          run("byte_perm", i, i[::-1].copy(), i))


@pytest.mark.gpu
def test_cuda_extras_gpu():
    dev = [kiln.from_numpy(a) for a in (np.zeros(2, np.int64), np.full(1, -7, np.int32),
                                        np.zeros(1, np.int32))]
    cuda_extra_kernel[(1,)](*dev, num_warps=8)
    kiln.synchronize()
    t, s, n = (d.numpy() for d in dev)
    assert t[0] >= 0 and t[1] > 0 and s[0] >= 0 and n[0] == 256 + 8000


# --- kiln.language.math ----------------------------------------------------------------------

@kiln.jit
def math_kernel(a, o, NAME: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o + i, getattr(tl.math, NAME)(tl.load(a + i)))


MATH = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
        "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos,
        "erf": lambda x: np.array([math.erf(v) for v in x]), "floor": np.floor,
        "ceil": np.ceil, "abs": np.abs}


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_math_module_every_dtype_cpu(dt):
    # Every unary function of tl.math (Triton 3.6's names) on fp16, fp32 and fp64.
    x = np.linspace(0.1, 2.5, N).astype(dt)
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-14}[dt]
    for name, ref in MATH.items():
        out = np.zeros_like(x)
        math_kernel[(1,)](x, out, name, BLOCK=N, **CPU)
        check_close(out, ref(x.astype(np.float64)), tol, 0, name)


# --- core.extern_elementwise --------------------------------------------------------------------

@tl.core.extern
def my_atan2(x, y, _semantic=None):
    # A wrapper as Triton's libdevice module writes them (the dict is built in Python).
    return tl.core.extern_elementwise(
        "", "", [x, y], {
            (tl.core.dtype("fp32"), tl.core.dtype("fp32")): ("__nv_atan2f", tl.core.dtype("fp32")),
            (tl.core.dtype("fp64"), tl.core.dtype("fp64")): ("__nv_atan2", tl.core.dtype("fp64")),
        }, is_pure=True, _semantic=_semantic)


@tl.core.extern
def my_cos(x, _semantic=None):
    return tl.core.extern_elementwise("m", "", [x], {(tl.float32,): ("cosf", tl.float32)}, True)


@kiln.jit
def extern_kernel(a, b, o, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o + i, my_atan2(tl.load(a + i), tl.load(b + i)))


@kiln.jit
def extern_foreign_kernel(a):
    tl.store(a, my_cos(tl.load(a)))  # ERR


def test_core_extern_elementwise_cpu():
    for dt in (np.float32, np.float64):
        x, y = _pairs(dt)
        out = np.zeros(N, dt)
        extern_kernel[(1,)](x, y, out, BLOCK=N, **CPU)
        check_close(out, np.arctan2(x.astype(float), y.astype(float)),
                    2e-6 if dt == np.float32 else 1e-14)
    ptx = ptx_of(extern_kernel, {"a": "*fp32", "b": "*fp32", "o": "*fp32"}, {"BLOCK": 128})
    assert "__nv_" not in ptx
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(extern_foreign_kernel, signature={"a": "*fp32"})
    assert "only libdevice symbols (__nv_*) are supported by Kiln, found 'cosf'" in str(info.value)
    assert info.value.line == marker_line(extern_foreign_kernel)
