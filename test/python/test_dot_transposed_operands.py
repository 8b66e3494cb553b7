"""tl.dot(a, b.T) with B stored N x K (the layout of nn.Linear weights and of tutorial 09),
loaded [BLOCK_N, BLOCK_K] by pointers or tensor descriptors: the transpose folds into the
operand rings on sm_90a (a K-major B ring filled by the TMA or by cp.async, read by wgmma
without its transpose flag) instead of leaving the loads unpipelined in registers. CPU
backend semantics, the PTX for sm_90a, and (marker `gpu`) results against torch, one tile per
program and persistent (flattened or not)."""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl

CPU = dict(device="cpu")


@kiln.jit
def ptr_nt_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + (rn % N)[:, None] * stride_bn + rk[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        acc = tl.dot(a, b.T, acc)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@kiln.jit
def desc_nt_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    om = tl.program_id(0) * BM
    on = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([om, k * BK])
        b = b_desc.load([on, k * BK])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([om, on], acc.to(c_desc.dtype))


@kiln.jit
def desc_nt_persistent(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr, NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr):
    start = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_n
    for tile in tl.range(start, num_tiles, NUM_SMS, flatten=FLATTEN):
        om = (tile // num_n) * BM
        on = (tile % num_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(tl.cdiv(K, BK)):
            a = a_desc.load([om, k * BK])
            b = b_desc.load([on, k * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([om, on], acc.to(c_desc.dtype))


DESC_SIG = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[128, 64]>",
            "c_desc": "tensordesc<fp16[128, 128]>", "K": "i32"}


def f16_ref(a, b):
    return (a.astype(np.float32) @ b.astype(np.float32).T).astype(np.float16)


# ---------------------------------------------------------------- CPU backend

@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (50, 70, 90)])
def test_pointer_b_transposed_cpu(M, N, K):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    grid = (kiln.cdiv(M, 32), kiln.cdiv(N, 32))
    ptr_nt_kernel[grid](a, b, c, M, N, K, K, K, N, BM=32, BN=32, BK=16, **CPU)
    np.testing.assert_allclose(c.astype(np.float32), f16_ref(a, b).astype(np.float32),
                               rtol=2e-2, atol=2e-2)


def test_descriptor_b_transposed_cpu():
    rng = np.random.default_rng(1)
    M, N, K = 48, 40, 72
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    TD = kiln.TensorDescriptor
    descs = [TD.from_tensor(a, [32, 16]), TD.from_tensor(b, [16, 16]), TD.from_tensor(c, [32, 16])]
    desc_nt_kernel[(kiln.cdiv(M, 32), kiln.cdiv(N, 16))](*descs, K, BM=32, BN=16, BK=16, **CPU)
    np.testing.assert_allclose(c.astype(np.float32), f16_ref(a, b).astype(np.float32),
                               rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- PTX for sm_90a

def test_descriptor_b_transposed_takes_tma_rings_on_sm90a():
    k = kiln.compile(desc_nt_kernel, signature=DESC_SIG,
                     constexprs={"BM": 128, "BN": 128, "BK": 64}, target="sm_90a", num_warps=8,
                     num_stages=3)
    ptx = k.asm["ptx"]
    # Both blocks 128 rows x one 128-byte strip: one box each per group, no loads into
    # registers, and wgmma reads B K-major (its last immediate, the B transpose flag, is 0).
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster", ptx)
    assert len(loads) == 2 * 3  # A and B, 2 groups before the loop and 1 in it
    assert "ld.global" not in ptx
    flags = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 .*, "
                       r"(\d), (\d);", ptx)
    assert flags and all(f == ("0", "0") for f in flags), flags[:2]
    assert k.metadata.dynamic_shared == 3 * (128 * 64 + 128 * 64) * 2


def test_pointer_b_transposed_takes_cp_async_rings_on_sm90a():
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32",
           "N": "i32", "K": "i32:16", "stride_am": "i32:16", "stride_bn": "i32:16",
           "stride_cm": "i32:16"}
    k = kiln.compile(ptr_nt_kernel, signature=sig, constexprs={"BM": 128, "BN": 128, "BK": 64},
                     target="sm_90a", num_warps=8, num_stages=3)
    ptx = k.asm["ptx"]
    # 16-byte copies of both operands straight into shared memory; nothing through registers.
    assert "cp.async.cg.shared.global" in ptx and "ld.global" not in ptx
    flags = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 .*, "
                       r"(\d), (\d);", ptx)
    assert flags and all(f == ("0", "0") for f in flags), flags[:2]
    assert "wgmma.wait_group.sync.aligned 1" in ptx  # the dot stays in flight


# ---------------------------------------------------------------- GPU

def torch_or_skip():
    return pytest.importorskip("torch")


def check(torch, c, a, b, dtype):
    ref = a.float() @ b.float().T
    err = ((c.float() - ref).norm() / ref.norm()).item()
    assert err < (5e-4 if dtype == "float16" else 3e-3), err


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (1000, 1000, 1000), (200, 136, 4104)])
@pytest.mark.parametrize("stages", [3, 4])
def test_gpu_pointer_b_transposed(dtype, M, N, K, stages):
    torch = torch_or_skip()
    dt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(N, K, device="cuda", dtype=dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    BM, BN, BK = 128, 128, 64
    ptr_nt_kernel[(kiln.cdiv(M, BM), kiln.cdiv(N, BN))](
        a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BM=BM, BN=BN, BK=BK,
        num_warps=8, num_stages=stages)
    check(torch, c, a, b, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (1000, 1000, 1000), (200, 136, 4104)])
@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("persistent", ["no", "flatten", "nested"])
def test_gpu_descriptor_b_transposed(dtype, M, N, K, stages, persistent):
    torch = torch_or_skip()
    dt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(N, K, device="cuda", dtype=dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    BM, BN, BK = 128, 128, 64
    TD = kiln.TensorDescriptor
    descs = [TD.from_tensor(a, [BM, BK]), TD.from_tensor(b, [BN, BK]),
             TD.from_tensor(c, [BM, BN])]
    meta = dict(BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=stages)
    if persistent == "no":
        desc_nt_kernel[(kiln.cdiv(M, BM), kiln.cdiv(N, BN))](*descs, K, **meta)
    else:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        tiles = kiln.cdiv(M, BM) * kiln.cdiv(N, BN)
        desc_nt_persistent[(min(sms, tiles),)](*descs, M, N, K, NUM_SMS=sms,
                                               FLATTEN=persistent == "flatten", **meta)
    check(torch, c, a, b, dtype)


@kiln.jit
def device_desc_nt_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                              BK: tl.constexpr, NUM_SMS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    num_n = tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * num_n, NUM_SMS, flatten=True):
        om = (tile // num_n) * BM
        on = (tile % num_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(tl.cdiv(K, BK)):
            acc = tl.dot(a_desc.load([om, k * BK]), b_desc.load([on, k * BK]).T, acc)
        c_desc.store([om, on], acc.to(tl.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(1024, 768, 512), (1000, 1024, 512), (200, 136, 72)])
def test_gpu_device_descriptor_b_transposed_persistent(M, N, K):
    """Descriptors made in the kernel: with 16-byte aligned rows (the first two) the launcher
    encodes their tensor maps and the TMA copies (rows past M clipped by the TMA); without
    (the last) they are masked loads."""
    torch = torch_or_skip()
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = kiln.cdiv(M, 128) * kiln.cdiv(N, 128)
    device_desc_nt_persistent[(min(sms, tiles),)](a, b, c, M, N, K, BM=128, BN=128, BK=64,
                                                   NUM_SMS=sms, num_warps=8, num_stages=3)
    check(torch, c, a, b, "float16")
