"""tl.dot on 3-D tiles (a batched dot, Triton 3.6): [B, M, K] x [B, K, N] -> [B, M, N].

- every dtype pair of tl.dot (fp16 -> fp32 and fp16, bf16, fp32 ieee and tf32, int8 -> int32,
  fp8e4nv) with and without a 3-D accumulator, B of 1, 2 and 4, on the CPU backend against
  numpy products of the same rounded inputs (int8 exact), and marked `gpu` on the device;
- compiled for sm_80 and sm_90a without a GPU: each batch element is a 2-D dot on the tensor
  cores (mma.sync, wgmma);
- errors at the call: ranks, batch sizes, K, dimensions below 16, the accumulator's shape.
"""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from test_dot_scan import _gpu_arrays, expect_error, f64, relerr

CPU = dict(device="cpu")


@kiln.jit
def batched_dot_kernel(a_ptr, b_ptr, acc_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr,
                       N: tl.constexpr, K: tl.constexpr, MODE: tl.constexpr,
                       OUT: tl.constexpr, PRECISION: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rk_col = tl.arange(0, K)[None, None, :]
    rk_row = tl.arange(0, K)[None, :, None]
    a = tl.load(a_ptr + rb * M * K + rm * K + rk_col)
    b = tl.load(b_ptr + rb * K * N + rk_row * N + rn)
    if MODE == "acc":
        acc = tl.load(acc_ptr + rb * M * N + rm * N + rn).to(OUT)
        c = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=OUT)
    elif MODE == "matmul":
        c = a @ b
    else:
        c = tl.dot(a, b, input_precision=PRECISION, out_dtype=OUT)
    tl.store(c_ptr + rb * M * N + rm * N + rn, c)


def bf16():
    return pytest.importorskip("ml_dtypes").bfloat16


def fp8():
    return pytest.importorskip("ml_dtypes").float8_e4m3fn


# case: (input numpy dtype, OUT, PRECISION, relative tolerance; 0 = exact)
CASES = {
    "fp16": (np.float16, tl.float32, None, 1e-6),
    "fp16-out-fp16": (np.float16, tl.float16, None, 4e-3),
    "bf16": ("bf16", tl.float32, None, 1e-6),
    "fp32-ieee": (np.float32, tl.float32, "ieee", 1e-6),
    "fp32-tf32": (np.float32, tl.float32, "tf32", 5e-3),
    "int8": (np.int8, tl.int32, None, 0),
    "fp8e4nv": ("fp8", tl.float32, None, 1e-6),
}
SHAPES = [(2, 16, 32, 16), (4, 32, 16, 64), (1, 16, 16, 32)]


def make(case, Bt, M, N, K, seed=0):
    dt = CASES[case][0]
    rng = np.random.default_rng(seed)
    if dt == np.int8:
        a = rng.integers(-128, 128, (Bt, M, K)).astype(np.int8)
        b = rng.integers(-128, 128, (Bt, K, N)).astype(np.int8)
        acc = rng.integers(-1000, 1000, (Bt, M, N)).astype(np.int32)
        return a, b, acc
    dt = bf16() if dt == "bf16" else fp8() if dt == "fp8" else dt
    a = (rng.standard_normal((Bt, M, K), dtype=np.float32) * 0.5).astype(dt)
    b = (rng.standard_normal((Bt, K, N), dtype=np.float32) * 0.5).astype(dt)
    acc = rng.standard_normal((Bt, M, N), dtype=np.float32)
    return a, b, acc


def reference(case, a, b, acc, mode):
    out = CASES[case][1]
    if out == tl.int32:
        ref = a.astype(np.int64) @ b.astype(np.int64)
        return ref + acc if mode == "acc" else ref
    ref = f64(a) @ f64(b)
    if mode == "acc":
        ref = ref + f64(acc.astype(np.float16) if out == tl.float16 else acc)
    return ref


def out_array(case, shape):
    out = CASES[case][1]
    dt = np.int32 if out == tl.int32 else np.float16 if out == tl.float16 else np.float32
    return np.full(shape, -7, dt)


def check(case, c, ref):
    tol = CASES[case][3]
    if tol == 0:
        np.testing.assert_array_equal(c.astype(np.int64), ref)
    else:
        assert relerr(c, ref) < tol, relerr(c, ref)


def launch(case, mode, a, b, acc, c, shape, **launch_options):
    Bt, M, N, K = shape
    _, out, precision, _ = CASES[case]
    batched_dot_kernel[(1,)](a, b, acc, c, Bt, M, N, K, MODE=mode, OUT=out,
                             PRECISION=precision or "tf32", **launch_options)


@pytest.mark.parametrize("mode", ["acc", "zero"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", list(CASES))
def test_batched_dot_cpu(case, shape, mode):
    a, b, acc = make(case, *shape)
    c = out_array(case, shape[:3])
    launch(case, mode, a, b, acc, c, shape, **CPU)
    ref = reference(case, a, b, acc, mode)
    check(case, c, ref)
    if case == "fp32-tf32":
        assert relerr(c, ref) > 1e-5  # the default precision is tf32, as for 2-D dots


def test_batched_matmul_operator_cpu():
    shape = (2, 16, 16, 16)
    a, b, acc = make("fp16", *shape, seed=1)
    c = out_array("fp16", shape[:3])
    launch("fp16", "matmul", a, b, acc, c, shape, **CPU)
    check("fp16", c, f64(a) @ f64(b))


def test_batch_elements_do_not_mix():
    """Each output batch element is its own product: an identity in element 0 and zeros in
    element 1 give a[0] and acc[1] exactly (no sum over the batch, -0.0 kept)."""
    Bt, M, N, K = 2, 16, 16, 16
    a = np.random.default_rng(5).standard_normal((Bt, M, K)).astype(np.float32)
    b = np.zeros((Bt, K, N), np.float32)
    b[0] = np.eye(K)
    acc = np.zeros((Bt, M, N), np.float32)
    acc[1] = -0.0
    acc[1, 3, 4] = 2.5
    c = out_array("fp32-ieee", (Bt, M, N))
    launch("fp32-ieee", "acc", a, b, acc, c, (Bt, M, N, K), **CPU)
    np.testing.assert_array_equal(c[0], a[0])
    np.testing.assert_array_equal(c[1], acc[1])


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["acc", "zero"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("num_warps", [4, 8])
def test_batched_dot_gpu(case, shape, mode, num_warps):
    to_dev, to_np = _gpu_arrays()
    a, b, acc = make(case, *shape)
    if case == "fp8e4nv":
        torch = pytest.importorskip("torch")

        def to_dev_fp8(x, plain=to_dev):
            if x.dtype == fp8():
                return torch.from_numpy(x.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
            return plain(x)
        to_dev = to_dev_fp8
    c = to_dev(out_array(case, shape[:3]))
    launch(case, mode, to_dev(a), to_dev(b), to_dev(acc), c, shape, num_warps=num_warps)
    check(case, to_np(c), reference(case, a, b, acc, mode))


SIG = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", acc_ptr="*fp32:16", c_ptr="*fp32:16")


@pytest.mark.parametrize("arch,instruction", [
    ("sm_80", r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32"),
    ("sm_90a", r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.f16\.f16")])
def test_batched_dot_runs_on_tensor_cores(arch, instruction):
    """No GPU needed: each batch element of an fp16 batched dot is a 2-D dot, on mma.sync
    (sm_80) or wgmma (sm_90a, 64 rows for 4 warps)."""
    consts = dict(B=2, M=64, N=64, K=32, MODE="acc", OUT=tl.float32, PRECISION="tf32")
    ptx = kiln.compile(batched_dot_kernel, signature=SIG, constexprs=consts, target=arch,
                       num_warps=4).asm["ptx"]
    assert re.search(instruction, ptx)


@kiln.jit
def batched_loop_kernel(A, Bp, C, K, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                        BK: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rk_col = tl.arange(0, BK)[None, None, :]
    rk_row = tl.arange(0, BK)[None, :, None]
    acc = tl.zeros((B, M, N), tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rb * M * K + rm * K + k0 + rk_col)
        b = tl.load(Bp + rb * K * N + (k0 + rk_row) * N + rn)
        acc += tl.dot(a, b)
    tl.store(C + rb * M * N + rm * N + rn, acc)


def loop_case():
    B, M, N, K = 2, 64, 32, 128
    rng = np.random.default_rng(7)
    a = rng.standard_normal((B, M, K)).astype(np.float16)
    b = rng.standard_normal((B, K, N)).astype(np.float16)
    return a, b, (B, M, N, K), f64(a) @ f64(b)


def test_batched_dot_in_a_k_loop_cpu():
    a, b, (B, M, N, K), ref = loop_case()
    c = np.full((B, M, N), np.nan, np.float32)
    batched_loop_kernel[(1,)](a, b, c, K, B=B, M=M, N=N, BK=32, **CPU)
    assert relerr(c, ref) < 1e-6


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_batched_dot_in_a_k_loop_compiles(arch, num_warps):
    """No GPU needed: a loop-carried 3-D accumulator (each element's slice converted to the
    dot's layout and back) compiles with the operand pipelining on."""
    sig = dict(A="*fp16:16", Bp="*fp16:16", C="*fp32:16", K="i32:16")
    ptx = kiln.compile(batched_loop_kernel, signature=sig, target=arch, num_warps=num_warps,
                       num_stages=3, constexprs=dict(B=2, M=64, N=32, BK=32)).asm["ptx"]
    assert "mma" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("num_warps", [4, 8])
def test_batched_dot_in_a_k_loop_gpu(num_warps):
    to_dev, to_np = _gpu_arrays()
    a, b, (B, M, N, K), ref = loop_case()
    c = to_dev(np.full((B, M, N), np.nan, np.float32))
    batched_loop_kernel[(1,)](to_dev(a), to_dev(b), c, K, B=B, M=M, N=N, BK=32,
                              num_warps=num_warps)
    assert relerr(to_np(c), ref) < 1e-5


# ---------------------------------------------------------------- errors

@kiln.jit
def batched_err_kernel(a_ptr, b_ptr, c_ptr, WHAT: tl.constexpr):
    r16 = tl.arange(0, 16)
    a = tl.load(a_ptr + r16[None, :, None] * 16 + r16[None, None, :] + tl.zeros((2, 1, 1),
                                                                              tl.int32))
    b2 = tl.load(b_ptr + r16[:, None] * 16 + r16[None, :])
    if WHAT == "rank":
        c = tl.dot(a, b2)  # ERR<rank>
    elif WHAT == "batch":
        b4 = tl.load(b_ptr + r16[None, :, None] * 16 + r16[None, None, :]
                     + tl.zeros((4, 1, 1), tl.int32))
        c = tl.dot(a, b4)  # ERR<batch>
    else:
        c = tl.dot(a, a, acc=tl.zeros((16, 16), tl.float32))  # ERR<acc>
    tl.store(c_ptr + r16[:, None] * 16 + r16[None, :], tl.sum(c, 0))


ERR_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}


@pytest.mark.parametrize("what,message", [
    ("rank", r"expected two 2-D tiles, or two 3-D tiles \(a batched dot\), for dot, found "
             r"fp16\[2, 16, 16\] and fp16\[16, 16\]"),
    ("batch", r"expected the batch dimensions of dot to match \(a is B x M x K, b is B x K x "
              r"N\), found a fp16\[2, 16, 16\] \(B = 2\) and b fp16\[4, 16, 16\] \(B = 4\)"),
    ("acc", r"expected the dot accumulator to be fp32\[2, 16, 16\], found fp32\[16, 16\]")])
def test_batched_dot_errors(what, message):
    expect_error(batched_err_kernel, message, ERR_SIG, {"WHAT": what})
