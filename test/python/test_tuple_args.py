"""Tuple arguments (Triton 3.3's tuple parameters): a kernel parameter bound to a tuple of
tensors, ints, floats, bools, None and tuples of them (NamedTuples too, read by field name);
each element is a parameter of its own, specialized like one (the tuple's structure and its
NamedTuple types are part of the key), and the kernel sees the tuple. CPU backend;
kiln.compile's signature takes a tuple of element types."""
from typing import NamedTuple

import numpy as np
import pytest

import kiln
import kiln.language as tl

CPU = dict(device="cpu")


@kiln.jit
def axpby(ptrs, coefs, n, BLOCK: tl.constexpr):
    x_ptr, y_ptr, out_ptr = ptrs
    a, b = coefs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) +
             b * tl.load(y_ptr + offs, mask=mask), mask=mask)


@kiln.jit
def sum_rows(srcs, out_ptr, N: tl.constexpr, K: tl.constexpr):
    # a tuple indexed by a static_range, with None and 1 among the elements
    offs = tl.arange(0, N)
    acc = tl.zeros([N], dtype=tl.float32)
    for k in tl.static_range(K):
        if srcs[k] is not None:
            acc += tl.load(srcs[k] + offs)
    tl.store(out_ptr + offs, acc)


def test_tuple_of_pointers_and_scalars():
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(100).astype(np.float32) for _ in range(2))
    out = np.full_like(x, np.nan)
    axpby[(4,)]((x, y, out), (2.0, -3.0), 100, BLOCK=32, **CPU)
    np.testing.assert_allclose(out, 2 * x - 3 * y, rtol=1e-6)
    # another element type (int coefficients) is another specialization
    axpby[(4,)]((x, y, out), (2, 1), 100, BLOCK=32, **CPU)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)


def test_tuple_with_none_and_indexing():
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    out = np.zeros(16, np.float32)
    sum_rows[(1,)]((a, None, b), out, N=16, K=3, **CPU)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    sum_rows[(1,)]((a, b, None), out, N=16, K=3, **CPU)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)


def test_tuple_arrays_are_checked_in_debug_launches():
    # the CPU backend's debug checks know the arrays inside a tuple (an access past one's
    # end is an error naming the parameter, not a silent read)
    x = np.ones(100, np.float32)
    out = np.zeros(100, np.float32)
    axpby[(4,)]((x, x, out), (1.0, 1.0), 100, BLOCK=32, debug=True, **CPU)
    np.testing.assert_array_equal(out, 2.0)
    short = np.ones(50, np.float32)
    with pytest.raises(Exception, match="ptrs"):
        axpby[(4,)]((x, short, out), (1.0, 1.0), 100, BLOCK=32, debug=True, **CPU)


def test_bad_tuple_elements_are_clear_errors():
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="argument 'ptrs'"):
        axpby[(1,)]((x, "x", x), (1.0, 1.0), 8, BLOCK=8, **CPU)
    with pytest.raises(TypeError, match=r"argument 'ptrs'.*element 0 is a TensorDescriptor"):
        axpby[(1,)]((kiln.TensorDescriptor.from_tensor(x, [8]), x, x), (1.0, 1.0), 8, BLOCK=8,
                    **CPU)


@kiln.jit
def nested_sum(out_ptr, t, N: tl.constexpr):
    # Triton's test_tuple test_serialize: a pointer, then a tuple of a scalar and a tuple
    x_ptr, (scale, (a, b)) = t
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale + t[1][1][0] - b + a)


def test_nested_tuples():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    nested_sum[(1,)](out, (x, (2.0, (3, 5))), N=8, **CPU)
    np.testing.assert_array_equal(out, x * 2 + 3 - 5 + 3)
    nested_sum[(1,)](out, (x, (1.0, (1, 4))), N=8, **CPU)  # 1s specialized, in a nested tuple
    np.testing.assert_array_equal(out, x + 1 - 4 + 1)


class Span(NamedTuple):
    src: object
    dst: object
    n: int


class Swapped(NamedTuple):
    dst: object
    src: object
    n: int


@kiln.jit
def copy_span(t, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(t.dst + offs, tl.load(t.src + offs, mask=offs < t.n), mask=offs < t.n)


def test_namedtuple_fields_by_name():
    # Triton's test_namedtuple: fields read by name; two NamedTuple types of one structure
    # with their fields in another order are two variants (the positions differ)
    a, b = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    copy_span[(1,)](Span(a, b, 5), BLOCK=8, **CPU)
    np.testing.assert_array_equal(b, np.where(np.arange(8) < 5, a, 0))
    c, d = np.arange(8, dtype=np.float32) + 10, np.zeros(8, np.float32)
    copy_span[(1,)](Swapped(d, c, 8), BLOCK=8, **CPU)
    np.testing.assert_array_equal(d, c)


def test_compile_takes_a_tuple_signature():
    k = kiln.compile(axpby, signature={"ptrs": ("*fp32:16", "*fp32:16", "*fp32:16"),
                                       "coefs": ("fp32", "fp32"), "n": "i32"},
                     constexprs={"BLOCK": 128}, target="sm_90")
    assert "ld.global" in k.asm["ptx"]
    k = kiln.compile(nested_sum, signature={"out_ptr": "*fp32", "t": ("*fp32", ("fp32",
                                                                                ("i32", "i32")))},
                     constexprs={"N": 8}, target="sm_90")
    assert "ld.global" in k.asm["ptx"]
    with pytest.raises(TypeError, match="no tensor descriptors inside"):
        kiln.compile(axpby, signature={"ptrs": ("*fp32", "tensordesc<fp32[8]>", "*fp32"),
                                       "coefs": ("fp32", "fp32"), "n": "i32"},
                     constexprs={"BLOCK": 128}, target="sm_90")


@kiln.jit
def matmul_from_tuple(ptrs, K, stride_am, stride_bk, stride_cm, BM: tl.constexpr,
                      BN: tl.constexpr, BK: tl.constexpr):
    a_ptr, b_ptr, c_ptr = ptrs
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BK
        b += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16))


def test_tma_maps_from_tuple_elements():
    # sm_90a: the pointer tiles of a tuple's elements go to the TMA like a plain argument's
    # (the launcher encodes each map from the element it names)
    sig = {"ptrs": ("*fp16:16",) * 3, "K": "i32:16", "stride_am": "i32:16",
           "stride_bk": "i32:16", "stride_cm": "i32:16"}
    k = kiln.compile(matmul_from_tuple, signature=sig, constexprs=dict(BM=128, BN=128, BK=64),
                     target="sm_90a", num_warps=8, num_stages=3)
    assert "cp.async.bulk.tensor" in k.asm["ptx"]


def test_tuple_matmul_cpu():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    b = rng.standard_normal((64, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float16)
    matmul_from_tuple[(2, 2)]((a, b, c), 64, 64, 32, 32, BM=16, BN=16, BK=16, **CPU)
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=2e-2, atol=5e-2)


@pytest.mark.gpu
def test_tuple_arguments_on_the_gpu():
    from cuda_torch import torch_or_skip
    torch = torch_or_skip()
    x, y = (torch.randn(1000, device="cuda") for _ in range(2))
    out = torch.full_like(x, float("nan"))
    axpby[(8,)]((x, y, out), (0.5, 2.0), 1000, BLOCK=128)
    torch.testing.assert_close(out, 0.5 * x + 2 * y)
    a, b = (torch.randn(256, 256, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    matmul_from_tuple[(2, 2)]((a, b, c), 256, 256, 256, 256, BM=128, BN=128, BK=64,
                              num_warps=8, num_stages=3)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)
