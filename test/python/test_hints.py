"""tl.multiple_of / tl.max_contiguous / tl.max_constancy: facts the axis analysis takes over
what it derives (Triton's semantics), so that Triton's persistent matmul — which clamps its
indices with `tl.where(offs < M, offs, 0)` and restores contiguity with hints — keeps 16-byte
copies; and errors for hints that cannot apply."""
import numpy as np
import pytest

import kiln
import kiln.language as tl


@kiln.jit
def clamped_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, HINTS: tl.constexpr):
    """One tile per program of Triton's persistent matmul (tutorial 09): clamped indices."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_am = tl.where(offs_am < M, offs_am, 0)
    offs_bn = tl.where(offs_bn < N, offs_bn, 0)
    if HINTS:
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        offs_k = ki * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=offs_k[None, :] < K, other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                    mask=offs_k[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
             acc.to(tl.float16), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


SIG = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
           K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
CONSTS = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)


@pytest.mark.parametrize("hints", [False, True])
def test_hints_restore_vector_copies(hints):
    ptx = kiln.compile(clamped_matmul, signature=SIG, constexprs=dict(CONSTS, HINTS=hints),
                       target="sm_90a", num_warps=8, num_stages=4).asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx
    # Without the hints the clamped column indices are not known to be contiguous: B's copies
    # go one element at a time.
    assert ("ld.global.b16" in ptx) != hints


def test_hinted_kernel_is_correct_cpu():
    M, N, K = 100, 72, 80
    rng = np.random.default_rng(0)
    a = rng.random((M, K)).astype(np.float16)
    b = rng.random((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    clamped_matmul[(kiln.cdiv(M, 32), kiln.cdiv(N, 32))](
        a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, HINTS=True,
        device="cpu")
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-3, atol=2e-2)


@kiln.jit
def float_hint(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    x = tl.multiple_of(x, 16)


@kiln.jit
def rank_hint(x_ptr):
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    offs = tl.max_contiguous(offs, [16, 16, 16])


def test_hint_errors():
    with pytest.raises(kiln.CompilationError,
                       match=r"expected an integer or pointer tile or scalar for multiple_of, found"):
        kiln.compile(float_hint, signature={"x_ptr": "*fp32"}, target="sm_90a")
    with pytest.raises(kiln.CompilationError,
                       match=r"expected 2 values for max_contiguous of .*, found 3"):
        kiln.compile(rank_hint, signature={"x_ptr": "*fp32"}, target="sm_90a")


@kiln.jit
def pointer_hint_kernel(x_ptr, y_ptr, n, stride):
    rows = tl.arange(0, 64)[:, None] * stride + tl.arange(0, 64)[None, :]
    ptrs = tl.multiple_of(x_ptr + rows, [16, 16])
    ptrs = tl.max_contiguous(ptrs, [1, 16])
    tl.store(y_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :], tl.load(ptrs))


@kiln.jit
def pointer_nohint_kernel(x_ptr, y_ptr, n, stride):
    rows = tl.arange(0, 64)[:, None] * stride + tl.arange(0, 64)[None, :]
    tl.store(y_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :],
             tl.load(x_ptr + rows))


def test_hints_on_pointer_tiles():
    """Triton's grouped GEMM hints its pointer tiles (tl.multiple_of(a_ptrs, [16, 16])): with the
    hint the rows load 16 bytes at a time although the stride is not known to be aligned."""
    sig = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32", "stride": "i32"}
    ptx = kiln.compile(pointer_hint_kernel, signature=sig, target="sm_90a").asm["ptx"]
    assert "ld.global.v4" in ptx
    # Without the hints the stride's alignment is unknown: one element per load.
    ptx = kiln.compile(pointer_nohint_kernel, signature=sig, target="sm_90a").asm["ptx"]
    assert "ld.global.v" not in ptx


@kiln.jit
def loop_carried_hint_kernel(a_table, b_ptr, c_ptr, K, lda, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr, HINT: tl.constexpr):
    """Tutorial 08's K loop: A's address comes from a table (its alignment unknown), and the
    loop-carried pointer tile is hinted in the loop with the result unused."""
    a_ptr = tl.load(a_table).to(tl.pointer_type(tl.float16))
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * lda + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * BN + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        if HINT:
            tl.multiple_of(a_ptrs, [16, 16])
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BK
        b_ptrs += BK * BN
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float16))


LOOP_SIG = {"a_table": "*i64:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "K": "i32",
            "lda": "i32"}


@pytest.mark.parametrize("hint", [False, True])
def test_hint_on_a_loop_carried_pointer_tile(hint):
    # Triton records a hint on a loop's block argument on the loop, whether or not the
    # result is used; Kiln records it on the value the loop starts from (it holds at every
    # iteration, the first included) and the steps keep it: A streams through 16-byte
    # cp.async copies like B (12 a thread: 2 per ring slot each). Without the hint, A's
    # alignment is unknown (2-byte copies cp.async cannot make): its loads stay 2-byte loads
    # into registers and only B is copied.
    k = kiln.compile(loop_carried_hint_kernel, signature=LOOP_SIG,
                     constexprs=dict(BM=64, BN=64, BK=32, HINT=hint), target="sm_90a",
                     num_warps=4, num_stages=3)
    assert ("kiln.multiple_of = array<i64: 16, 16>" in k.asm["kiln"]) == hint
    ptx = k.asm["ptx"]
    copies = ptx.count("cp.async.cg.shared.global")
    assert copies == (12 if hint else 6)
    assert ("ld.global.b16" in ptx) == (not hint)


def test_loop_carried_hint_keeps_the_results_cpu():
    rng = np.random.default_rng(4)
    K, lda = 96, 104
    a = rng.standard_normal((64, lda)).astype(np.float16)
    b = rng.standard_normal((K, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float16)
    table = np.array([a.ctypes.data], np.int64)
    loop_carried_hint_kernel[(1,)](table, b, c, K, lda, BM=64, BN=64, BK=32, HINT=True,
                                   device="cpu")
    want = a[:, :K].astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-2, atol=5e-2)


@kiln.jit
def while_loop_kernel(a_ptr, a_table, c_ptr, n, lda, FROM_TABLE: tl.constexpr,
                      HINT: tl.constexpr):
    """A pointer tile carried by a `while` loop, from a kernel argument or from an address
    table (its alignment unknown, tl.multiple_of in the body as tutorial 08 writes it)."""
    if FROM_TABLE:
        a_ptr = tl.load(a_table).to(tl.pointer_type(tl.float16))
    ptrs = a_ptr + tl.arange(0, 16)[:, None] * lda + tl.arange(0, 64)[None, :]
    acc = tl.zeros((16, 64), dtype=tl.float32)
    i = 0
    while i < n:
        if HINT:
            tl.multiple_of(ptrs, [16, 16])
        acc += tl.load(ptrs).to(tl.float32)
        ptrs += 64
        i += 1
    tl.store(c_ptr + tl.arange(0, 16)[:, None] * 64 + tl.arange(0, 64)[None, :], acc)


WHILE_SIG = {"a_ptr": "*fp16:16", "a_table": "*i64:16", "c_ptr": "*fp32:16", "n": "i32",
             "lda": "i32:16"}


@pytest.mark.parametrize("from_table,hint,vector", [(False, False, True), (True, False, False),
                                                    (True, True, True)])
def test_while_loops_carry_alignment(from_table, hint, vector):
    # A value a while loop carries is an induction as a for loop's (its start and its steps
    # both 16-byte aligned here), and a hint on it in the body holds from its start: the rows
    # load 16 bytes at a time. From an address table without a hint: one element at a time.
    ptx = kiln.compile(while_loop_kernel, signature=WHILE_SIG,
                       constexprs=dict(FROM_TABLE=from_table, HINT=hint), target="sm_90a",
                       num_warps=4).asm["ptx"]
    assert ("ld.global.v4" in ptx) == vector
    assert ("ld.global.b16" in ptx) == (not vector)


@pytest.mark.parametrize("from_table", [False, True])
def test_while_loop_results_cpu(from_table):
    rng = np.random.default_rng(6)
    n, lda = 3, 256
    a = rng.standard_normal((16, lda)).astype(np.float16)
    c = np.zeros((16, 64), np.float32)
    table = np.array([a.ctypes.data], np.int64)
    while_loop_kernel[(1,)](a, table, c, n, lda, FROM_TABLE=from_table, HINT=from_table,
                            device="cpu")
    want = sum(a[:, 64 * j:64 * j + 64].astype(np.float32) for j in range(n))
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


@kiln.jit
def wrap_copy(X, Y, N, BN: tl.constexpr, HINT: tl.constexpr):
    """kernl's linear layer and Triton's old matmul: rows past the end wrap back into the
    matrix (`% N`) instead of being masked, and the hints claim a contiguous run anyway."""
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    if HINT:
        n = tl.max_contiguous(tl.multiple_of(rn % N, BN), BN)
    else:
        n = rn % N
    x = tl.load(X + n)
    tl.store(Y + n, x + 1000.0, mask=n < N)


@pytest.mark.parametrize("hint", [False, True])
@pytest.mark.parametrize("N", [48, 40, 33])
def test_hints_that_do_not_hold_stay_exact_cpu(hint, N):
    """On the CPU backend a hint is not a fact: the wrapped lanes read and write their own
    elements. Trusting the hint there made one 32-element access from the first lane's
    address, writing 16 elements past the end of y (a corrupted heap in kernl's kernel)."""
    xbuf = np.arange(N + 64, dtype=np.float32)
    ybuf = np.full(N + 64, -1.0, np.float32)
    x, y = xbuf[:N], ybuf[:N]
    wrap_copy[(2,)](x, y, N, BN=32, HINT=hint, device="cpu")
    np.testing.assert_array_equal(y, x + 1000.0)
    assert (ybuf[N:] == -1).all()
