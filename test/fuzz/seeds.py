"""Seed kernels of the front-end fuzzer (fuzz_kernels.py).

Each seed is a small Triton-style kernel with the host code that runs it: numpy inputs, a
launch on the CPU backend and an ahead-of-time `kiln.compile` of the same kernel to PTX for
sm_90. The fuzzer assembles a complete script from these parts and mutates its text; the
unmutated script also checks the kernel's results against numpy (the `check` part).

Conventions the mutators rely on:
- `kernel` holds the @kiln.jit functions, the launched kernel last (helpers before it);
- `consts` are the constexpr values, assigned as host variables of the same names and passed
  to both the launch (`BLOCK=BLOCK`) and `kiln.compile` (`constexprs={"BLOCK": BLOCK}`);
- `setup` creates the numpy inputs (dtypes written `np.<dtype>`) and `grid`;
- `launch` and `compile` are single lines (an expression statement each);
- `arrays` names the host variables passed as arrays (the others are scalars).
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Seed:
    name: str
    kernel: str
    consts: dict
    setup: str
    launch: str
    compile: str
    check: str
    arrays: tuple = field(default=())


VEC_ADD = Seed(
    name="vec_add",
    kernel='''
@kiln.jit
def vec_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
''',
    consts={"BLOCK": 64},
    setup='''
n = 1000
x = rng.standard_normal(n).astype(np.float32)
y = rng.standard_normal(n).astype(np.float32)
out = np.zeros(n, dtype=np.float32)
grid = lambda meta: (kiln.cdiv(n, meta["BLOCK"]),)
''',
    launch='vec_add[grid](x, y, out, n, BLOCK=BLOCK, device="cpu", debug=DEBUG)',
    compile='kiln.compile(vec_add, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", '
            '"out_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": BLOCK}, target="sm_90")',
    check='''
assert np.array_equal(out, x + y)
''',
    arrays=("x", "y", "out"),
)

BIT_MIX = Seed(
    name="bit_mix",
    kernel='''
@kiln.jit
def bit_mix(x_ptr, out_ptr, n, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0)
    h = ((v << SHIFT) ^ (v >> 2)) & 0xFFFF
    h = h | (v % 7)
    r = tl.where(h != v, h // 3, h * 2)
    tl.store(out_ptr + offs, r.to(tl.int64), mask=mask)
''',
    consts={"SHIFT": 3, "BLOCK": 128},
    setup='''
n = 777
x = rng.integers(0, 1 << 20, n).astype(np.int32)
out = np.zeros(n, dtype=np.int64)
grid = (kiln.cdiv(n, BLOCK),)
''',
    launch='bit_mix[grid](x, out, n, SHIFT=SHIFT, BLOCK=BLOCK, device="cpu", debug=DEBUG)',
    compile='kiln.compile(bit_mix, signature={"x_ptr": "*i32", "out_ptr": "*i64", "n": "i32"}, '
            'constexprs={"SHIFT": SHIFT, "BLOCK": BLOCK}, target="sm_90")',
    check='''
v = x.astype(np.int64)
h = ((v << SHIFT) ^ (v >> 2)) & 0xFFFF
h = h | (v % 7)
assert np.array_equal(out, np.where(h != v, h // 3, h * 2))
''',
    arrays=("x", "out"),
)

ROW_SOFTMAX = Seed(
    name="row_softmax",
    kernel='''
@kiln.jit
def row_softmax(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, num / den, mask=mask)
''',
    consts={"BLOCK": 64},
    setup='''
x = rng.standard_normal((7, 50)).astype(np.float32)
out = np.zeros((7, 50), dtype=np.float32)
grid = (x.shape[0],)
''',
    launch='row_softmax[grid](out, x, x.strides[0] // x.itemsize, out.strides[0] // out.itemsize, '
           'x.shape[1], BLOCK=BLOCK, device="cpu", debug=DEBUG)',
    compile='kiln.compile(row_softmax, signature={"out_ptr": "*fp32", "in_ptr": "*fp32", '
            '"in_stride": "i32", "out_stride": "i32", "n_cols": "i32"}, '
            'constexprs={"BLOCK": BLOCK}, target="sm_90")',
    check='''
e = np.exp(x - x.max(axis=1, keepdims=True))
assert np.allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
''',
    arrays=("out", "x"),
)

COPY_2D = Seed(
    name="copy_2d",
    kernel='''
@kiln.jit
def copy_2d(dst_ptr, src_ptr, M, N, s_src_m, s_src_n, s_dst_m,
            BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    src = src_ptr + rm[:, None] * s_src_m + rn[None, :] * s_src_n
    tile = tl.load(src, mask=mask)
    tl.store(dst_ptr + rm[:, None] * s_dst_m + rn[None, :], tile, mask=mask)
''',
    consts={"BM": 16, "BN": 8},
    setup='''
base = rng.standard_normal((40, 70)).astype(np.float32)
src = base[:, ::2]
dst = np.zeros((40, 35), dtype=np.float32)
M, N = src.shape
grid = lambda meta: (kiln.cdiv(M, meta["BM"]), kiln.cdiv(N, meta["BN"]))
''',
    launch='copy_2d[grid](dst, src, M, N, src.strides[0] // 4, src.strides[1] // 4, '
           'dst.strides[0] // 4, BM=BM, BN=BN, device="cpu", debug=DEBUG)',
    compile='kiln.compile(copy_2d, signature={"dst_ptr": "*fp32", "src_ptr": "*fp32", '
            '"M": "i32", "N": "i32", "s_src_m": "i32", "s_src_n": "i32", "s_dst_m": "i32"}, '
            'constexprs={"BM": BM, "BN": BN}, target="sm_90")',
    check='''
assert np.array_equal(dst, src)
''',
    arrays=("dst", "src"),
)

MATMUL_DOT = Seed(
    name="matmul_dot",
    kernel='''
@kiln.jit
def matmul_dot(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        ka = k + rk
        a_mask = (rm[:, None] < M) & (ka[None, :] < K)
        b_mask = (ka[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * sam + ka[None, :] * sak, mask=a_mask, other=0.0)
        b = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=b_mask, other=0.0)
        acc = tl.dot(a, b, acc)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16), mask=c_mask)
''',
    consts={"BM": 16, "BN": 16, "BK": 16},
    setup='''
M, N, K = 40, 24, 48
a = rng.standard_normal((M, K)).astype(np.float16)
b = rng.standard_normal((K, N)).astype(np.float16)
c = np.zeros((M, N), dtype=np.float16)
grid = lambda meta: (kiln.cdiv(M, meta["BM"]), kiln.cdiv(N, meta["BN"]))
''',
    launch='matmul_dot[grid](a, b, c, M, N, K, K, 1, N, 1, N, 1, BM=BM, BN=BN, BK=BK, '
           'device="cpu", debug=DEBUG)',
    compile='kiln.compile(matmul_dot, signature={"a_ptr": "*fp16", "b_ptr": "*fp16", '
            '"c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32", "sam": "i32", "sak": "i32", '
            '"sbk": "i32", "sbn": "i32", "scm": "i32", "scn": "i32"}, '
            'constexprs={"BM": BM, "BN": BN, "BK": BK}, target="sm_90")',
    check='''
ref = a.astype(np.float32) @ b.astype(np.float32)
assert np.allclose(c.astype(np.float32), ref, rtol=1e-2, atol=1e-2)
''',
    arrays=("a", "b", "c"),
)

BLOCK_SUM = Seed(
    name="block_sum",
    kernel='''
@kiln.jit
def block_sum(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    s = tl.sum(x * x, axis=0)
    m = tl.max(tl.abs(x), axis=0)
    tl.store(part_ptr + 2 * pid, s)
    tl.store(part_ptr + 2 * pid + 1, m)
''',
    consts={"BLOCK": 256},
    setup='''
n = 1500
x = rng.standard_normal(n).astype(np.float32)
parts = np.zeros(2 * kiln.cdiv(n, 256), dtype=np.float32)
grid = (kiln.cdiv(n, 256),)
''',
    launch='block_sum[grid](x, parts, n, BLOCK=BLOCK, device="cpu", debug=DEBUG)',
    compile='kiln.compile(block_sum, signature={"x_ptr": "*fp32", "part_ptr": "*fp32", '
            '"n": "i32"}, constexprs={"BLOCK": BLOCK}, target="sm_90")',
    check='''
xp = np.zeros(len(parts) // 2 * 256, dtype=np.float32)
xp[:n] = x
xp = xp.reshape(-1, 256)
assert np.allclose(parts[0::2], (xp * xp).sum(axis=1), rtol=1e-5)
assert np.array_equal(parts[1::2], np.abs(xp).max(axis=1))
''',
    arrays=("x", "parts"),
)

CUMSUM_ROWS = Seed(
    name="cumsum_rows",
    kernel='''
@kiln.jit
def cumsum_rows(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0)
    y = tl.cumsum(x, axis=0, reverse=REVERSE)
    tl.store(out_ptr + row * stride + cols, y, mask=mask)
''',
    consts={"BLOCK": 32, "REVERSE": False},
    setup='''
x = rng.integers(-50, 50, (5, 30)).astype(np.int32)
out = np.zeros((5, 30), dtype=np.int32)
grid = (5,)
''',
    launch='cumsum_rows[grid](x, out, 30, 30, BLOCK=BLOCK, REVERSE=REVERSE, device="cpu", '
           'debug=DEBUG)',
    compile='kiln.compile(cumsum_rows, signature={"x_ptr": "*i32", "out_ptr": "*i32", '
            '"n_cols": "i32", "stride": "i32"}, constexprs={"BLOCK": BLOCK, "REVERSE": REVERSE}, '
            'target="sm_90")',
    check='''
assert np.array_equal(out, np.cumsum(x, axis=1))
''',
    arrays=("x", "out"),
)

HISTOGRAM = Seed(
    name="histogram",
    kernel='''
@kiln.jit
def histogram(x_ptr, hist_ptr, n, NBINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0)
    bins = v % NBINS
    tl.atomic_add(hist_ptr + bins, 1, mask=mask)
''',
    consts={"NBINS": 10, "BLOCK": 64},
    setup='''
n = 3000
x = rng.integers(0, 1000, n).astype(np.int32)
hist = np.zeros(10, dtype=np.int32)
grid = lambda meta: (kiln.cdiv(n, meta["BLOCK"]),)
''',
    launch='histogram[grid](x, hist, n, NBINS=NBINS, BLOCK=BLOCK, device="cpu", debug=DEBUG)',
    compile='kiln.compile(histogram, signature={"x_ptr": "*i32", "hist_ptr": "*i32", "n": "i32"}, '
            'constexprs={"NBINS": NBINS, "BLOCK": BLOCK}, target="sm_90")',
    check='''
assert np.array_equal(hist, np.bincount(x % 10, minlength=10))
''',
    arrays=("x", "hist"),
)

ACT_BRANCH = Seed(
    name="act_branch",
    kernel='''
@kiln.jit
def _leaky(x, alpha):
    return tl.where(x > 0, x, x * alpha)


@kiln.jit
def act_branch(x_ptr, out_ptr, n, alpha, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if ACT == "leaky":
        y = _leaky(x, alpha)
    elif ACT == "sigmoid":
        y = tl.sigmoid(x)
    else:
        y = x
    tl.store(out_ptr + offs, y.to(tl.float16), mask=mask)
''',
    consts={"ACT": "leaky", "BLOCK": 128},
    setup='''
n = 300
x = rng.standard_normal(n).astype(np.float16)
out = np.zeros(n, dtype=np.float16)
grid = (kiln.cdiv(n, 128),)
''',
    launch='act_branch[grid](x, out, n, 0.1, ACT=ACT, BLOCK=BLOCK, device="cpu", debug=DEBUG)',
    compile='kiln.compile(act_branch, signature={"x_ptr": "*fp16", "out_ptr": "*fp16", '
            '"n": "i32", "alpha": "fp32"}, constexprs={"ACT": ACT, "BLOCK": BLOCK}, '
            'target="sm_90")',
    check='''
xf = x.astype(np.float32)
ref = np.where(xf > 0, xf, xf * np.float32(0.1)).astype(np.float16)
assert np.allclose(out.astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-3)
''',
    arrays=("x", "out"),
)

LOOP_NORM = Seed(
    name="loop_norm",
    kernel='''
@kiln.jit
def loop_norm(x_ptr, out_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(base + cols, mask=cols < n_cols, other=0.0)
        acc += v * v
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(base + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * stride + cols, v * rstd, mask=cols < n_cols)
''',
    consts={"BLOCK": 32},
    setup='''
x = rng.standard_normal((6, 100)).astype(np.float32)
out = np.zeros((6, 100), dtype=np.float32)
grid = (6,)
''',
    launch='loop_norm[grid](x, out, 100, 100, 1e-5, BLOCK=BLOCK, device="cpu", debug=DEBUG)',
    compile='kiln.compile(loop_norm, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", '
            '"n_cols": "i32", "stride": "i32", "eps": "fp32"}, constexprs={"BLOCK": BLOCK}, '
            'target="sm_90")',
    check='''
ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-5)
assert np.allclose(out, ref, rtol=1e-5, atol=1e-6)
''',
    arrays=("x", "out"),
)

SEEDS = [VEC_ADD, BIT_MIX, ROW_SOFTMAX, COPY_2D, MATMUL_DOT, BLOCK_SUM, CUMSUM_ROWS, HISTOGRAM,
         ACT_BRANCH, LOOP_NORM]
SEEDS_BY_NAME = {s.name: s for s in SEEDS}
