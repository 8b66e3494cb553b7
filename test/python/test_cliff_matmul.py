"""bench/cliff_sources.py (issue #23's matmul formulations, run by bench/bench_cliffs.py
under Kiln and Triton) on Kiln's CPU backend against numpy: the benchmark's sources compute
what they claim, in CI, without a GPU. The speed side is bench/bench_cliffs.py's."""
import os
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
import cliff_sources as cs  # noqa: E402

CPU = dict(device="cpu")


def ref_nt(a, b):
    return a.astype(np.float64) @ b.astype(np.float64).T


def close(got, want):
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (40, 72, 96)])
def test_pointer_matmul_b_stored_n_by_k(M, N, K):
    rng = np.random.default_rng(M + N)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    BM, BN = 32, 32
    tiles = kiln.cdiv(M, BM) * kiln.cdiv(N, BN)
    cs.mm_ptr_nt[(tiles,)](a, b, c, M, N, K, K, 1, K, 1, N, 1, BLOCK_SIZE_M=BM,
                           BLOCK_SIZE_N=BN, BLOCK_SIZE_K=16, GROUP_SIZE_M=2, **CPU)
    close(c, ref_nt(a, b))


@pytest.mark.parametrize("act", ["", "leaky_relu"])
def test_pointer_matmul_b_stored_k_by_n(act):
    rng = np.random.default_rng(5)
    M, N, K = 40, 72, 96
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    BM, BN = 32, 32
    tiles = kiln.cdiv(M, BM) * kiln.cdiv(N, BN)
    cs.mm_ptr[(tiles,)](a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                        BLOCK_SIZE_K=16, GROUP_SIZE_M=2, ACTIVATION=act, **CPU)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if act:
        want = np.where(want >= 0, want, 0.01 * want)
    close(c, want)


@pytest.mark.parametrize("kernel", ["mm_desc_nt", "mm_desc_persistent",
                                    "mm_desc_persistent_flat"])
def test_descriptor_matmuls(kernel):
    rng = np.random.default_rng(3)
    M, N, K, BM, BN, BK = 96, 64, 48, 32, 32, 16
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    TD = kiln.TensorDescriptor
    descs = [TD.from_tensor(a, [BM, BK]), TD.from_tensor(b, [BN, BK]),
             TD.from_tensor(c, [BM, BN])]
    meta = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=2, **CPU)
    tiles = (M // BM) * (N // BN)
    if kernel == "mm_desc_nt":
        cs.mm_desc_nt[(tiles,)](*descs, M, N, K, **meta)
    else:  # 4 programs walking 6 tiles
        cs.mm_desc_persistent[(4,)](*descs, M, N, K, NUM_SMS=4,
                                    FLATTEN=kernel.endswith("flat"), **meta)
    close(c, ref_nt(a, b))


def test_grouped_gemm_with_pointer_tables():
    # Three problems of different sizes; A, B, C reached through int64 address tables, as
    # tutorial 08's grouped GEMM does (B stored K x N); 5 programs walk all their tiles.
    rng = np.random.default_rng(5)
    problems = [(64, 32, 48), (32, 96, 32), (96, 64, 16)]
    A = [rng.standard_normal((m, k)).astype(np.float16) for m, n, k in problems]
    B = [rng.standard_normal((k, n)).astype(np.float16) for m, n, k in problems]
    C = [np.full((m, n), np.nan, np.float16) for m, n, k in problems]
    table = [np.array([x.ctypes.data for x in xs], np.int64) for xs in (A, B, C)]
    sizes = np.array([x for p in problems for x in p], np.int32)
    lds = np.array([x for a, b in zip(A, B) for x in (a.shape[1], b.shape[1], b.shape[1])],
                   np.int32)
    cs.mm_grouped[(5,)](*table, sizes, lds, len(problems), NUM_SM=5, BLOCK_SIZE_M=32,
                        BLOCK_SIZE_N=32, BLOCK_SIZE_K=16, **CPU)
    for a, b, c in zip(A, B, C):
        close(c, a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("w_desc", [False, True])
def test_moe_expert_gemms(w_desc):
    # 3 experts with 5, 0 and 19 tokens (an empty one and a partial last tile); 4 programs
    # walk all tiles; W used transposed, by pointers or through a 3-D descriptor.
    rng = np.random.default_rng(7)
    E, N, K = 3, 32, 48
    m_sizes = np.array([5, 0, 19], np.int32)
    x = rng.standard_normal((int(m_sizes.sum()), K)).astype(np.float16)
    w = rng.standard_normal((E, N, K)).astype(np.float16)
    y = np.full((x.shape[0], N), np.nan, np.float16)
    cs.mm_moe[(4,)](x, w, y, m_sizes, E, N=N, K=K, NUM_SMS=4, BLOCK_SIZE_M=16,
                    BLOCK_SIZE_N=16, BLOCK_SIZE_K=16, W_DESC=w_desc, **CPU)
    start = 0
    for e, m in enumerate(m_sizes):
        close(y[start:start + m], ref_nt(x[start:start + m], w[e]))
        start += m


def test_moe_all_operands_by_descriptors():
    # mm_moe_desc_all: X over NUM_TOKENS * TOPK rows, W's 3-D blocks, Y clipped at each
    # expert's last row (an expert's last X tile reads the next one's rows, never stored).
    rng = np.random.default_rng(11)
    E, N, K, TOPK = 3, 32, 48, 2
    m_sizes = np.array([5, 0, 19], np.int32)
    x = rng.standard_normal((int(m_sizes.sum()), K)).astype(np.float16)
    w = rng.standard_normal((E, N, K)).astype(np.float16)
    y = np.full((x.shape[0], N), np.nan, np.float16)
    cs.mm_moe_desc_all[(4,)](x, w, y, m_sizes, E, x.shape[0] // TOPK, TOPK=TOPK, N=N, K=K,
                             NUM_SMS=4, BLOCK_SIZE_M=16, BLOCK_SIZE_N=16, BLOCK_SIZE_K=16,
                             **CPU)
    start = 0
    for e, m in enumerate(m_sizes):
        close(y[start:start + m], ref_nt(x[start:start + m], w[e]))
        start += m
    # sm_90a: all three through the TMA (X's extent an int32 argument times a constant).
    sig = {"x_ptr": "*fp16:16", "w_ptr": "*fp16:16", "y_ptr": "*fp16:16",
           "m_sizes_ptr": "*i32:16", "E": "i32", "NUM_TOKENS": "i32:16"}
    ptx = kiln.compile(cs.mm_moe_desc_all, signature=sig,
                       constexprs={"TOPK": 2, "N": 2048, "K": 4096, "NUM_SMS": 132,
                                   "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256,
                                   "BLOCK_SIZE_K": 64},
                       target="sm_90a", num_warps=8, num_stages=3).asm["ptx"]
    assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.bulk.tensor.3d" in ptx
    assert "cp.async.cg" not in ptx


def test_moe_weights_by_the_tma_tokens_by_pointers():
    # sm_90a: with W through its 3-D descriptor one loop mixes the engines: W's blocks by the
    # TMA (3-D boxes), the gathered tokens by cp.async, both arriving on the slot's barrier
    # (thread 0 expecting the TMA's bytes without an arrival of its own).
    sig = {"x_ptr": "*fp16:16", "w_ptr": "*fp16:16", "y_ptr": "*fp16:16",
           "m_sizes_ptr": "*i32:16", "E": "i32"}
    ptx = kiln.compile(cs.mm_moe, signature=sig,
                       constexprs={"N": 2048, "K": 4096, "NUM_SMS": 132, "BLOCK_SIZE_M": 128,
                                   "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "W_DESC": True},
                       target="sm_90a", num_warps=8, num_stages=3).asm["ptx"]
    assert "cp.async.bulk.tensor.3d" in ptx and "cp.async.cg" in ptx
    assert "mbarrier.expect_tx.relaxed" in ptx and "cp.async.mbarrier.arrive.noinc" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("w_desc", [False, True])
@pytest.mark.parametrize("cfg", [(128, 128, 64, 4, 3), (128, 256, 64, 8, 3),
                                 (128, 128, 64, 8, 4)], ids=lambda c: "x".join(map(str, c)))
def test_moe_expert_gemms_gpu(w_desc, cfg):
    torch = pytest.importorskip("torch")
    bm, bn, bk, warps, stages = cfg
    E, N, K = 6, 512, 384
    m_sizes = torch.tensor([300, 0, 129, 1, 64, 250], dtype=torch.int32, device="cuda")
    x = torch.randn(int(m_sizes.sum()), K, device="cuda", dtype=torch.float16)
    w = torch.randn(E, N, K, device="cuda", dtype=torch.float16) * 0.1
    y = torch.full((x.shape[0], N), float("nan"), device="cuda", dtype=torch.float16)
    cs.mm_moe[(7,)](x, w, y, m_sizes, E, N=N, K=K, NUM_SMS=7, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn,
                    BLOCK_SIZE_K=bk, W_DESC=w_desc, num_warps=warps, num_stages=stages)
    start = 0
    for e, m in enumerate(m_sizes.tolist()):
        ref = x[start:start + m].double() @ w[e].double().T
        got = y[start:start + m].double()
        assert not got.isnan().any()
        if m:
            assert ((got - ref).norm() / ref.norm()).item() < 2e-3, (e, m)
        start += m
