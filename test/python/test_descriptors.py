"""Tensor descriptors (kiln.TensorDescriptor on the host, desc.load / desc.store in kernels,
as Triton's): blocks at any offset with zeros outside the tensor, the launch's checks, the
kernel parameters they become, and (marker `gpu`) TMA-fed matmuls against torch."""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from cuda_torch import torch_or_skip  # noqa: E402

CPU = dict(device="cpu")


@kiln.jit
def scale_kernel(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    i = tl.program_id(0) * BM
    j = tl.program_id(1) * BN
    x = in_desc.load([i, j])
    out_desc.store([i, j], x * 2)


@kiln.jit
def window_kernel(in_desc, out_ptr, oi, oj, BM: tl.constexpr, BN: tl.constexpr):
    x = in_desc.load([oi, oj])
    r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + r, x)


@kiln.jit
def matmul_desc_kernel(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def padded(rng, rows, cols, pad_to, dtype=np.float32):
    """A rows x cols view of a wider array (row stride rounded up to `pad_to` elements)."""
    width = -(-cols // pad_to) * pad_to
    return rng.standard_normal((rows, width)).astype(dtype)[:, :cols]


def window_ref(a, oi, oj, bm, bn):
    out = np.zeros((bm, bn), a.dtype)
    for r in range(bm):
        for c in range(bn):
            if 0 <= oi + r < a.shape[0] and 0 <= oj + c < a.shape[1]:
                out[r, c] = a[oi + r, oj + c]
    return out


# ---------------------------------------------------------------- CPU backend

def test_blocks_cover_a_ragged_tensor():
    rng = np.random.default_rng(0)
    a = padded(rng, 37, 100, 4)
    out = np.full((37, 104), 7.0, np.float32)[:, :100]
    ad = kiln.TensorDescriptor.from_tensor(a, [16, 32])
    od = kiln.TensorDescriptor.from_tensor(out, [16, 32])
    scale_kernel[(3, 4)](ad, od, BM=16, BN=32, **CPU)
    np.testing.assert_array_equal(out, 2 * a)
    assert (out.base[:, 100:] == 7.0).all()  # the padding beyond the extent is not written


def test_with_base_reads_its_own_tensor():
    # with_base: the descriptor's shape, strides and block over another tensor (here a 3-d
    # array seen as the same 2-d matrix), the original untouched
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((2, 32, 64)).astype(np.float32) for _ in range(2))
    out = np.zeros((64, 64), np.float32)
    template = kiln.TensorDescriptor(None, shape=[64, 64], strides=[64, 1],
                                     block_shape=[16, 32])
    od = template.with_base(out)
    for x in (a, b):
        d = template.with_base(x)
        assert (d.base is x and d.shape == [64, 64] and d.strides == [64, 1]
                and d.block_shape == [16, 32] and template.base is None)
        scale_kernel[(4, 2)](d, od, BM=16, BN=32, **CPU)
        np.testing.assert_array_equal(out, 2 * x.reshape(64, 64))


@pytest.mark.parametrize("oi,oj", [(0, 0), (-3, 5), (30, 90), (-20, -40), (40, 0)])
def test_outside_the_tensor_reads_zero(oi, oj):
    rng = np.random.default_rng(1)
    a = padded(rng, 37, 100, 4)
    out = np.empty((16, 32), np.float32)
    window_kernel[(1,)](kiln.TensorDescriptor.from_tensor(a, [16, 32]), out, oi, oj, BM=16,
                        BN=32, **CPU)
    np.testing.assert_array_equal(out, window_ref(a, oi, oj, 16, 32))


def test_matmul_through_descriptors_on_the_host():
    rng = np.random.default_rng(2)
    M, N, K = 50, 70, 90
    a, b = padded(rng, M, K, 4), padded(rng, K, N, 4)
    c = np.zeros((M, 72), np.float32)[:, :N]
    descs = [kiln.TensorDescriptor.from_tensor(a, [32, 16]),
             kiln.TensorDescriptor.from_tensor(b, [16, 32]),
             kiln.TensorDescriptor.from_tensor(c, [32, 32])]
    matmul_desc_kernel[(2, 3)](*descs, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, **CPU)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # fp32 dots take tf32 inputs by default (as Triton's), 10 mantissa bits
    assert np.abs(c - ref).max() / np.abs(ref).max() < 2e-3


def test_descriptor_checks():
    a = np.zeros((8, 24), np.float32)
    with pytest.raises(ValueError, match="contiguous last dimension"):
        kiln.TensorDescriptor(a, [24, 8], [1, 24], [8, 8])
    with pytest.raises(ValueError, match="powers of two"):
        kiln.TensorDescriptor.from_tensor(a, [8, 12])
    with pytest.raises(ValueError, match="padding 'zero'"):
        kiln.TensorDescriptor(a, [8, 24], [24, 1], [8, 8], padding="nan")
    # Integers only, as Triton (int() truncated 8.9 to 8 and parsed "16").
    for block in ([8.9, 8], ["8", 8], [True, 8]):
        with pytest.raises(TypeError, match="expected integers in block_shape"):
            kiln.TensorDescriptor(a, [8, 24], [24, 1], block)
    assert kiln.TensorDescriptor(a, [8, 24], [24, 1], [np.int64(8), 8]).block_shape == [8, 8]
    # A row stride of 6 floats (24 bytes) is not a multiple of 16 bytes, as TMA needs.
    b = np.zeros((8, 6), np.float32)
    out = np.empty((8, 8), np.float32)
    with pytest.raises(TypeError, match=r"'in_desc'.*strides of multiples of 16 bytes"):
        window_kernel[(1,)](kiln.TensorDescriptor.from_tensor(b, [8, 8]), out, 0, 0, BM=8, BN=8,
                            **CPU)


@kiln.jit
def wrong_offsets_kernel(in_desc, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    x = in_desc.load([0])
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], x)


def test_wrong_offsets_point_at_the_line():
    a = np.zeros((8, 8), np.float32)
    out = np.empty((8, 8), np.float32)
    with pytest.raises(kiln.CompilationError) as e:
        wrong_offsets_kernel[(1,)](kiln.TensorDescriptor.from_tensor(a, [8, 8]), out, BM=8, BN=8,
                                   **CPU)
    msg = str(e.value)
    assert "wrong_offsets_kernel" in msg and "x = in_desc.load([0])" in msg
    assert "expected 2 offsets for desc.load of a rank-2 tensor descriptor, found 1" in msg


@kiln.jit
def far_offset_kernel(in_desc, out_ptr, o, STORE: tl.constexpr, BM: tl.constexpr,
                      BN: tl.constexpr):
    r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    if STORE:
        in_desc.store([o, 0], tl.load(out_ptr + r))
    else:
        tl.store(out_ptr + r, in_desc.load([o, 0]))


@kiln.jit
def far_block_ptr_kernel(a_ptr, out_ptr, o, ADVANCE: tl.constexpr, BM: tl.constexpr):
    p = tl.make_block_ptr(a_ptr, (64, 16), (16, 1), (0 if ADVANCE else o, 0), (BM, 16), (1, 0))
    if ADVANCE:
        p = tl.advance(p, (o, 0))
    x = tl.load(p, boundary_check=(0, 1))
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * 16 + tl.arange(0, 16)[None, :], x)


def test_offsets_past_int32_are_errors():
    """As Triton: a descriptor's and a block pointer's offsets are int32; an int64 argument
    (2^32 + 3 here) was cut to its low 32 bits (row 3 read and written: a silent wrong
    answer), now an error at the access's line that says what to do."""
    a = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    out = np.zeros((16, 16), np.float32)
    desc = kiln.TensorDescriptor.from_tensor(a, [16, 16])
    for store, line in ((False, "tl.store(out_ptr + r, in_desc.load([o, 0]))"),
                        (True, "in_desc.store([o, 0], tl.load(out_ptr + r))")):
        with pytest.raises(kiln.CompilationError) as e:
            far_offset_kernel[(1,)](desc, out, 2**32 + 3, STORE=store, BM=16, BN=16, **CPU)
        msg = str(e.value)
        assert "far_offset_kernel" in msg and line in msg, msg
        assert "expected int32 offsets" in msg and ".to(tl.int32)" in msg, msg
    for advance in (False, True):
        with pytest.raises(kiln.CompilationError, match="expected int32 offsets"):
            far_block_ptr_kernel[(1,)](a, out, 2**32 + 3, ADVANCE=advance, BM=16, **CPU)
    far_block_ptr_kernel[(1,)](a, out, 3, ADVANCE=True, BM=16, **CPU)  # int32: as before
    np.testing.assert_array_equal(out, a[3:19])


def test_strides_past_2_to_40_bytes_are_errors():
    """A row stride of 2^62 elements wrapped the block's addresses around the base (every row
    read row 0); strides must stay under 2^40 bytes (the TMA's limit)."""
    a = np.zeros((16, 16), np.float32)
    out = np.empty((16, 16), np.float32)
    with pytest.raises(TypeError, match=r"'in_desc'.*expected strides under 2\^40 bytes"):
        window_kernel[(1,)](kiln.TensorDescriptor(a, [16, 16], [2**62, 1], [16, 16]), out, 0, 0,
                            BM=16, BN=16, **CPU)


def test_bool_descriptors():
    """A descriptor of bools (a byte an element) loads and stores (it raised
    ZeroDivisionError from the stride's divisibility, 16 // 0 bytes)."""
    a = np.random.default_rng(5).random((16, 32)) < 0.5
    out = np.zeros((16, 32), np.bool_)
    scale_kernel[(1, 1)](kiln.TensorDescriptor.from_tensor(a, [16, 32]),
                         kiln.TensorDescriptor.from_tensor(out, [16, 32]), BM=16, BN=32, **CPU)
    np.testing.assert_array_equal(out, a)
    kiln.compile(window_kernel, signature={"in_desc": "tensordesc<i1[16, 16]>",
                                           "out_ptr": "*i1", "oi": "i32", "oj": "i32"},
                 constexprs={"BM": 16, "BN": 16}, target="sm_90a")


@pytest.mark.parametrize("block", ["[1, 1, 1, 2, 64, 64]", "[ ]", "[16, 24]"])
def test_signature_blocks_are_checked(block):
    """kiln.compile's 'tensordesc<...>' spelling: a block of rank 1 to 5, powers of two (rank
    6 reached the IR verifier; an empty block failed in int(''))."""
    with pytest.raises(TypeError, match=r"parameter 'in_desc': expected a block of rank 1 to 5 "
                                        r"whose sizes are powers of two"):
        kiln.compile(window_kernel, signature={"in_desc": f"tensordesc<fp16{block}>",
                                               "out_ptr": "*fp16", "oi": "i32", "oj": "i32"},
                     constexprs={"BM": 16, "BN": 16}, target="sm_90a")


@kiln.jit
def scalar_shape_kernel(p, out, M):
    d = tl.make_tensor_descriptor(p, M, 1, 16)
    tl.store(out + tl.arange(0, 16), d.load([0]))


@kiln.jit
def odd_block_kernel(p, out, M):
    d = tl.make_tensor_descriptor(p, [M, 16], [16, 1], [12, 16])
    tl.store(out + tl.arange(0, 16)[None, :], d.load([0, 0]))


@pytest.mark.parametrize("kernel,line,expected", [
    (scalar_shape_kernel, "d = tl.make_tensor_descriptor(p, M, 1, 16)",
     "expected a list as the shape of tl.make_tensor_descriptor"),
    (odd_block_kernel, "d = tl.make_tensor_descriptor(p, [M, 16], [16, 1], [12, 16])",
     "expected a block_shape of powers of two for tl.make_tensor_descriptor, found [12, 16]")])
def test_make_tensor_descriptor_errors_at_its_line(kernel, line, expected):
    """A shape that is not a list said "'tensor' object is not iterable"; a block that is not
    powers of two was reported at the first load, not where the descriptor is made."""
    a = np.zeros(256, np.float32)
    with pytest.raises(kiln.CompilationError) as e:
        kernel[(1,)](a, np.zeros(256, np.float32), 16, **CPU)
    assert line in str(e.value) and expected in str(e.value), str(e.value)


# ---------------------------------------------------------------- compile only

def test_descriptor_parameters_in_ptx():
    k = kiln.compile(scale_kernel, signature={"in_desc": "tensordesc<fp16[64, 64]>",
                                              "out_desc": "tensordesc<fp16[64, 64]>"},
                     constexprs={"BM": 64, "BN": 64}, target="sm_90a")
    ptx = k.asm["ptx"]
    # Per descriptor: the tensor map by value (a grid constant), the base, 2 extents, 1 stride.
    assert len(re.findall(r"\.param \.align 64 \.b8 scale_kernel_param_\d+\[128\]", ptx)) == 2
    assert len(re.findall(r"\.param \.u64 \.ptr \.global \.align 16", ptx)) == 2
    with pytest.raises(TypeError, match="tensordesc<fp16\\[64, 64\\]>"):
        kiln.compile(scale_kernel, signature={"in_desc": "tensordesc<fp16>",
                                              "out_desc": "tensordesc<fp16[64, 64]>"},
                     constexprs={"BM": 64, "BN": 64}, target="sm_90a")


# ---------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("oi,oj", [(0, 0), (-3, 5), (30, 90), (40, 0)])
def test_gpu_window(oi, oj):
    torch = torch_or_skip()
    a = torch.randn(37, 104, device="cuda")[:, :100]
    out = torch.full((16, 32), float("nan"), device="cuda")
    window_kernel[(1,)](kiln.TensorDescriptor.from_tensor(a, [16, 32]), out, oi, oj, BM=16,
                        BN=32)
    ref = window_ref(a.cpu().numpy(), oi, oj, 16, 32)
    np.testing.assert_array_equal(out.cpu().numpy(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (1000, 1000, 1000), (200, 136, 4104)])
@pytest.mark.parametrize("stages", [3, 4])
def test_gpu_matmul_through_descriptors(dtype, M, N, K, stages):
    torch = torch_or_skip()
    dt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    BM, BN, BK = 128, 128, 64
    descs = [kiln.TensorDescriptor.from_tensor(a, [BM, BK]),
             kiln.TensorDescriptor.from_tensor(b, [BK, BN]),
             kiln.TensorDescriptor.from_tensor(c, [BM, BN])]
    grid = (kiln.cdiv(M, BM), kiln.cdiv(N, BN))
    matmul_desc_kernel[grid](*descs, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=8,
                             num_stages=stages)
    ref = a.float() @ b.float()
    err = ((c.float() - ref).norm() / ref.norm()).item()
    assert err < (5e-4 if dtype == "float16" else 2e-3), err


def test_dot_operands_are_copied_by_the_tma_on_sm90a():
    sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
           "c_desc": "tensordesc<fp16[128, 128]>", "K": "i32"}
    k = kiln.compile(matmul_desc_kernel, signature=sig,
                     constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64},
                     target="sm_90a", num_warps=8, num_stages=4)
    ptx = k.asm["ptx"]
    loop = ptx[ptx.index("mbarrier.try_wait"):ptx.index("wgmma.wait_group.sync.aligned 0")]
    # A in one box (the wgmma accumulator layout reads its rows in their natural order), B in
    # 2 strips of 64 columns; one arrival per group; no cp.async and no proxy fence.
    copies = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::"
                        r"complete_tx::bytes", loop)
    assert len(copies) == 3
    assert loop.count("mbarrier.arrive.expect_tx") == 1
    assert "cp.async.cg" not in ptx and "fence.proxy.async" not in loop
    # 4 transaction barriers (one arrival) and 4 barriers every warp arrives on when done
    # with a slot: no CTA barrier in the loop; thread 0 waits before it overwrites a slot.
    assert ptx.count("mbarrier.init.shared::cta.b64") == 8
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 8;", ptx)) == 4
    assert "bar.sync" not in loop
    assert loop.count("mbarrier.arrive.shared::cta.b64") == 1
    assert loop.count("mbarrier.try_wait.parity") == 2
    assert "wgmma.mma_async" in ptx
    # C: through shared memory (over the dead rings) and 2 TMA stores of 64 columns.
    epilogue = ptx[ptx.index("wgmma.wait_group.sync.aligned 0"):]
    assert epilogue.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 2
    assert "st.global" not in epilogue and "cp.async.bulk.wait_group.read 0" in epilogue
    assert k.metadata.dynamic_shared == 4 * (128 * 64 + 64 * 128) * 2
    # Per kernel parameter (map, base, 2 extents, 1 stride per descriptor; then K): every map
    # in boxes of its whole block.
    assert k.metadata.tma_box_rows == [128, 0, 0, 0, 0, 64, 0, 0, 0, 0, 128, 0, 0, 0, 0, 0]


# ---------------------------------------------------------------- descriptors built in kernels

@kiln.jit
def device_scale_kernel(in_ptr, out_ptr, M, N, stride_in, stride_out, BM: tl.constexpr,
                        BN: tl.constexpr):
    in_desc = tl.make_tensor_descriptor(in_ptr, shape=[M, N], strides=[stride_in, 1],
                                        block_shape=[BM, BN])
    out_desc = tl.make_tensor_descriptor(out_ptr, [M, N], [stride_out, 1], [BM, BN])
    i = tl.program_id(0) * BM
    j = tl.program_id(1) * BN
    out_desc.store([i, j], in_desc.load([i, j]) * 2)


@kiln.jit
def device_window_kernel(in_ptr, out_ptr, M, N, stride, oi, oj, BM: tl.constexpr,
                         BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(in_ptr, [M, N], [stride, 1], [BM, BN])
    r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + r, desc.load([oi, oj]))


@kiln.jit
def device_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def test_device_descriptors_cover_a_ragged_tensor():
    rng = np.random.default_rng(5)
    a = padded(rng, 37, 100, 4)
    out = np.full((37, 104), 7.0, np.float32)[:, :100]
    device_scale_kernel[(3, 4)](a, out, 37, 100, a.strides[0] // 4, out.strides[0] // 4, BM=16,
                                BN=32, **CPU)
    np.testing.assert_array_equal(out, 2 * a)
    assert (out.base[:, 100:] == 7.0).all()


@pytest.mark.parametrize("oi,oj", [(0, 0), (-3, 5), (30, 90), (-20, -40)])
def test_device_descriptor_outside_the_tensor_reads_zero(oi, oj):
    rng = np.random.default_rng(6)
    a = padded(rng, 37, 100, 4)
    out = np.empty((16, 32), np.float32)
    device_window_kernel[(1,)](a, out, 37, 100, a.strides[0] // 4, oi, oj, BM=16, BN=32, **CPU)
    np.testing.assert_array_equal(out, window_ref(a, oi, oj, 16, 32))


@kiln.jit
def device_bad_stride_kernel(p, n, s):
    d = tl.make_tensor_descriptor(p, [n, n], [1, s], [16, 16])
    d.store([0, 0], d.load([0, 0]))


@kiln.jit
def device_bad_rank_kernel(p, n):
    d = tl.make_tensor_descriptor(p, [n, n], [n, 1], [16])
    d.store([0, 0], d.load([0, 0]))


@pytest.mark.parametrize("kernel,args,message", [
    (device_bad_stride_kernel, (16, 16), "expected the constant 1 as the last stride of "
                                         "tl.make_tensor_descriptor"),
    (device_bad_rank_kernel, (16,), "expected shape, strides and block_shape of one non-zero "
                                    "rank"),
])
def test_device_descriptor_errors_name_the_line(kernel, args, message):
    with pytest.raises(kiln.CompilationError) as info:
        kernel[(1,)](np.zeros((16, 16), np.float32), *args, **CPU)
    text = str(info.value)
    assert message in text and kernel.__name__ in text
    assert "tl.make_tensor_descriptor(" in text  # the source line is quoted


def test_device_descriptor_matmul_takes_tma_rings_on_sm90a():
    """A descriptor built in the kernel from a 16-byte aligned pointer parameter, extents and a
    row stride that is a multiple of 16 (as specialized) gets a tensor map the launcher
    encodes from the launch's arguments: a hidden parameter after the kernel's own, one per
    descriptor; the TMA copies the dot operands and stores C, as for host descriptors."""
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32:16",
           "N": "i32:16", "K": "i32:16"}
    k = kiln.compile(device_matmul_kernel, signature=sig,
                     constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64},
                     target="sm_90a", num_warps=8, num_stages=4)
    ptx = k.asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster" in ptx and "wgmma.mma_async" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # C through the TMA
    assert "cp.async.cg" not in ptx and "ld.global" not in ptx
    params = re.findall(r"\.param \.align 64 \.b8 \w+_param_(\d+)\[128\]", ptx)
    assert params == ["6", "7", "8"], params  # after a_ptr, b_ptr, c_ptr, M, N, K


def test_device_descriptor_matmul_without_alignment_takes_cp_async_rings_on_sm90a():
    """Without the 16-byte guarantees (K, the row stride of A, not known to be a multiple of 16)
    the launcher cannot promise a valid tensor map: no hidden parameter, and A's and B's loads
    stay the masked loads of the blocks, which the pipeline copies into the rings (element by
    element: rows may start anywhere)."""
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32",
           "N": "i32", "K": "i32"}
    k = kiln.compile(device_matmul_kernel, signature=sig,
                     constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64},
                     target="sm_90a", num_warps=8, num_stages=4)
    ptx = k.asm["ptx"]
    assert "cp.async.commit_group" in ptx and "wgmma.mma_async" in ptx
    assert "cp.async.bulk" not in ptx and "[128]" not in ptx


@kiln.jit
def expert_rows_kernel(w_ptr, out_ptr, E, N, K, e, n0, BN: tl.constexpr, BK: tl.constexpr):
    # A 3-D weight descriptor read one expert at a time, its unit dimension reshaped away (as
    # unsloth's MoE kernels and Triton's grouped GEMMs write it), and written back the same way.
    w = tl.make_tensor_descriptor(w_ptr, shape=[E, N, K], strides=[N * K, K, 1],
                                  block_shape=[1, BN, BK])
    o = tl.make_tensor_descriptor(out_ptr, shape=[E, N, K], strides=[N * K, K, 1],
                                  block_shape=[1, BN, BK])
    x = tl.reshape(w.load([e, n0, 0]), (BN, BK))
    o.store([e, n0, 0], tl.reshape(x * 2, (1, BN, BK)))


@pytest.mark.parametrize("e,n0", [(0, 0), (2, 8), (3, 12), (4, 0), (-1, 0)])
def test_device_descriptor_unit_dimensions(e, n0):
    # Blocks [1, BN, BK] are accessed as their BN x BK tile: the expert's position checked as
    # a scalar (an expert outside the tensor reads zeros and writes nothing), rows past N zero.
    E, N, K = 4, 20, 16
    w = np.arange(E * N * K, dtype=np.float32).reshape(E, N, K)
    out = np.full_like(w, -1.0)
    expert_rows_kernel[(1,)](w, out, E, N, K, e, n0, BN=16, BK=16, **CPU)
    want = np.full_like(w, -1.0)
    if 0 <= e < E:
        want[e, n0:n0 + 16] = 2 * w[e, n0:n0 + 16]
    np.testing.assert_array_equal(out, want)


@kiln.jit
def expert_matmul_kernel(x_ptr, w_ptr, y_ptr, E, N, K, M, BM: tl.constexpr, BN: tl.constexpr,
                         BK: tl.constexpr):
    # y[e] = x @ w[e].T over K by descriptors made in the kernel: W's blocks [1, BN, BK].
    e = tl.program_id(0)
    wd = tl.make_tensor_descriptor(w_ptr, shape=[E, N, K], strides=[N * K, K, 1],
                                   block_shape=[1, BN, BK])
    xd = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = xd.load([0, k])
        w = tl.reshape(wd.load([e, 0, k]), (BN, BK))
        acc += tl.dot(x, w.T)
    r = tl.arange(0, BM)[:, None] * N + tl.arange(0, BN)[None, :]
    tl.store(y_ptr + e * M * N + r, acc)


def test_unit_dimension_blocks_feed_pipelined_dots():
    # On the CPU, the product; for sm_90a, W's loads go through the rings (cp.async copies):
    # before, the 3-D load and its reshape kept them out, each block loaded and waited for in
    # its iteration (17 ld.global and no cp.async in unsloth's grouped GEMM with TMA loads).
    E, N, K, M = 3, 16, 64, 16
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((E, N, K)).astype(np.float32)
    y = np.zeros((E, M, N), np.float32)
    expert_matmul_kernel[(E,)](x, w, y, E, N, K, M, BM=16, BN=16, BK=16, **CPU)
    np.testing.assert_allclose(y, np.einsum("mk,enk->emn", x, w), rtol=2e-2, atol=2e-2)
    sig = {"x_ptr": "*fp16:16", "w_ptr": "*fp16:16", "y_ptr": "*fp32:16", "E": "i32",
           "N": "i32:16", "K": "i32:16", "M": "i32:16"}
    ptx = kiln.compile(expert_matmul_kernel, signature=sig,
                       constexprs={"BM": 64, "BN": 128, "BK": 64}, target="sm_90a",
                       num_warps=4, num_stages=3).asm["ptx"]
    assert "wgmma.mma_async" in ptx and "cp.async.cg" in ptx
    assert "ld.global" not in ptx.split("wgmma.mma_async")[0].split("$L__BB")[-1]


@kiln.jit
def expert_matmul_tma_kernel(x_ptr, w_ptr, y_ptr, E, M, N: tl.constexpr, K: tl.constexpr,
                             TOPK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr):
    # y[e] = x @ w[e].T, W's 3-D descriptor with constant strides (a map the launcher encodes:
    # the TMA copies its [1, BN, BK] blocks), X's 2-D one beside it, its rows M * TOPK (an MoE
    # layer's tokens times experts a token: an extent the launcher computes)
    e = tl.program_id(0)
    n0 = tl.program_id(1) * BN
    rows = M * TOPK
    wd = tl.make_tensor_descriptor(w_ptr, shape=[E, N, K], strides=[N * K, K, 1],
                                   block_shape=[1, BN, BK])
    xd = tl.make_tensor_descriptor(x_ptr, shape=[rows, K], strides=[K, 1], block_shape=[BM, BK])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(xd.load([0, k]), tl.reshape(wd.load([e, n0, k]), (BN, BK)).T)
    r = tl.arange(0, BM)[:, None] * N + n0 + tl.arange(0, BN)[None, :]
    tl.store(y_ptr + e * BM * N + r, acc)


def test_expert_blocks_copied_by_the_tma():
    # On the CPU, the product (rows past M * TOPK read zeros); for sm_90a both operands go
    # through the TMA: W's block as a 3-D box (1 along the experts), X's as a 2-D one.
    E, M, TOPK, N, K = 3, 5, 2, 32, 64
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, K)).astype(np.float16)
    w = rng.standard_normal((E, N, K)).astype(np.float16)
    y = np.zeros((E, 16, N), np.float32)
    expert_matmul_tma_kernel[(E, 2)](x, w, y, E, M, N=N, K=K, TOPK=TOPK, BM=16, BN=16, BK=32,
                                     **CPU)
    xs = x.astype(np.float64)
    xs[M * TOPK:] = 0
    np.testing.assert_allclose(y, np.einsum("mk,enk->emn", xs, w), rtol=2e-2, atol=2e-2)
    sig = {"x_ptr": "*fp16:16", "w_ptr": "*fp16:16", "y_ptr": "*fp32:16", "E": "i32",
           "M": "i32:16"}
    ptx = kiln.compile(expert_matmul_tma_kernel, signature=sig,
                       constexprs={"N": 512, "K": 512, "TOPK": 2, "BM": 64, "BN": 128,
                                   "BK": 64},
                       target="sm_90a", num_warps=4, num_stages=3).asm["ptx"]
    assert "cp.async.bulk.tensor.3d" in ptx and "cp.async.bulk.tensor.2d" in ptx
    assert "cp.async.cg" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [3, 4])
def test_expert_blocks_copied_by_the_tma_gpu(stages):
    torch = pytest.importorskip("torch")
    E, M, TOPK, N, K = 5, 25, 2, 256, 512
    x = torch.randn(64, K, device="cuda", dtype=torch.float16)
    w = torch.randn(E, N, K, device="cuda", dtype=torch.float16)
    y = torch.empty(E, 64, N, device="cuda", dtype=torch.float32)
    expert_matmul_tma_kernel[(E, N // 128)](x, w, y, E, M, N=N, K=K, TOPK=TOPK, BM=64, BN=128,
                                            BK=64, num_warps=4, num_stages=stages)
    xs = x.double()
    xs[M * TOPK:] = 0  # past the descriptor's rows: zeros
    ref = torch.einsum("mk,enk->emn", xs, w.double())
    assert ((y.double() - ref).norm() / ref.norm()).item() < 5e-4


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(256, 256, 128), (200, 136, 72)],
                         ids=lambda s: "x".join(map(str, s)))
def test_device_descriptor_matmul_gpu(shape):
    torch = pytest.importorskip("torch")
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    device_matmul_kernel[(-(-M // 128), -(-N // 128))](a, b, c, M, N, K, BLOCK_M=128,
                                                       BLOCK_N=128, BLOCK_K=64, num_warps=8)
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 5e-4


@kiln.jit
def device_copy_f16_kernel(a_ptr, c_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    a = tl.make_tensor_descriptor(a_ptr, [M, N], [N, 1], [BM, BN])
    c = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    c.store([tl.program_id(0) * BM, 0], a.load([tl.program_id(0) * BM, 0]) * 2)


def test_device_descriptor_with_a_launcher_encoded_map_on_the_cpu():
    """fp16 descriptors made from aligned arguments get hidden tensor map parameters (the
    launcher's recipe); the CPU backend passes them unread and accesses the blocks itself."""
    a = (np.arange(64 * 32, dtype=np.float16).reshape(64, 32) / 64).astype(np.float16)
    c = np.zeros_like(a)
    device_copy_f16_kernel[(4,)](a, c, 64, 32, BM=16, BN=32, **CPU)
    np.testing.assert_array_equal(c, a * 2)
    sig = {"a_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32:16", "N": "i32:16"}
    k = kiln.compile(device_copy_f16_kernel, signature=sig, constexprs={"BM": 16, "BN": 32},
                     target="sm_90a")
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", k.asm["ptx"])) == 2


@kiln.jit
def host_and_device_desc_kernel(in_desc, a_ptr, c_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # a host descriptor beside two made in the kernel (one of them twice: one map)
    a = tl.make_tensor_descriptor(a_ptr, [M, N], [N, 1], [BM, BN])
    again = tl.make_tensor_descriptor(a_ptr, [M, N], [N, 1], [BM, BN])
    c = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    off = tl.program_id(0) * BM
    c.store([off, 0], a.load([off, 0]) + again.load([off, 0]) + in_desc.load([off, 0]))


def test_host_and_device_descriptors_in_one_kernel():
    """The maps of descriptors made in the kernel go after the host descriptor's parameters
    (Builder::derivedTensorMap, one per distinct descriptor); the launcher fills each from
    the recipe on it, in the launch's terms."""
    a = (np.arange(64 * 32, dtype=np.float16).reshape(64, 32) / 64).astype(np.float16)
    x = np.ones_like(a)
    c = np.zeros_like(a)
    host_and_device_desc_kernel[(4,)](kiln.TensorDescriptor.from_tensor(x, [16, 32]), a, c,
                                      64, 32, BM=16, BN=32, **CPU)
    np.testing.assert_array_equal(c, a * 2 + 1)
    sig = {"in_desc": "tensordesc<fp16[16, 32]>", "a_ptr": "*fp16:16", "c_ptr": "*fp16:16",
           "M": "i32:16", "N": "i32:16"}
    k = kiln.compile(host_and_device_desc_kernel, signature=sig,
                     constexprs={"BM": 16, "BN": 32}, target="sm_90a")
    # the host descriptor's map and the two made in the kernel
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", k.asm["ptx"])) == 3


@pytest.mark.gpu
def test_host_and_device_descriptors_in_one_kernel_gpu():
    torch = pytest.importorskip("torch")
    a = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    x = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    host_and_device_desc_kernel[(4,)](kiln.TensorDescriptor.from_tensor(x, [64, 64]), a, c,
                                      256, 64, BM=64, BN=64)
    torch.testing.assert_close(c, a + a + x, rtol=0, atol=0)
