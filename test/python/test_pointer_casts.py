"""Triton's pointer casts (kiln.ptr_cast): `x.to(tl.pointer_type(T))` of an integer address
(Triton's tutorial 08, grouped GEMM, loads its operands' addresses from a table), a pointer to
int64 (and to int1: not null), a pointer to a pointer of another element type; bitcast of
pointers is their cast, as in Triton. On the CPU backend an access through an address the
kernel computed is not checked against the launch's buffers (it is in none of them)."""
import numpy as np
import pytest

import kiln
import kiln.language as tl

CPU = dict(device="cpu")


@kiln.jit
def gather_rows_kernel(table_ptr, sizes_ptr, out_ptr, BLOCK: tl.constexpr):
    """Program g sums the sizes[g] floats at the address table[g] (int64)."""
    g = tl.program_id(0)
    base = tl.load(table_ptr + g).to(tl.pointer_type(tl.float32))
    n = tl.load(sizes_ptr + g)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        acc += tl.load(base + start + offs, mask=start + offs < n, other=0.0)
    tl.store(out_ptr + g, tl.sum(acc, axis=0))


@kiln.jit
def pointer_facts_kernel(x_ptr, out_ptr):
    """out = [address of x as int64, x != null, bits of x[0] read through an int32 pointer]."""
    addr = x_ptr.to(tl.int64)
    tl.store(out_ptr, addr)
    tl.store(out_ptr + 1, x_ptr.to(tl.int1).to(tl.int64))
    bits = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True))
    tl.store(out_ptr + 2, bits.to(tl.int64))


@kiln.jit
def tile_of_addresses_kernel(table_ptr, out_ptr, N: tl.constexpr):
    """A tile of addresses: out[i] = *(float *)table[i]."""
    i = tl.arange(0, N)
    ptrs = tl.load(table_ptr + i).to(tl.pointer_type(tl.float32))
    tl.store(out_ptr + i, tl.load(ptrs))


@kiln.jit
def bad_cast_kernel(x_ptr, out_ptr, WHAT: tl.constexpr):
    if WHAT == 0:
        tl.store(out_ptr, x_ptr.to(tl.int32))
    else:
        y = tl.load(out_ptr.to(tl.pointer_type(tl.float32)))
        tl.store(out_ptr, y.to(tl.pointer_type(tl.float32)).to(tl.int64))


def test_grouped_addresses_cpu():
    rng = np.random.default_rng(0)
    groups = [rng.standard_normal(n).astype(np.float32) for n in (5, 64, 130, 1)]
    table = np.array([g.ctypes.data for g in groups], np.int64)
    sizes = np.array([g.size for g in groups], np.int32)
    out = np.zeros(len(groups), np.float32)
    gather_rows_kernel[(len(groups),)](table, sizes, out, BLOCK=32, **CPU)
    np.testing.assert_allclose(out, [g.sum() for g in groups], rtol=1e-5)


def test_pointer_to_int_and_bitcast_cpu():
    x = np.array([1.5, 2.0], np.float32)
    out = np.zeros(3, np.int64)
    pointer_facts_kernel[(1,)](x, out, **CPU)
    assert out[0] == x.ctypes.data
    assert out[1] == 1
    assert out[2] == x[:1].view(np.int32)[0]


def test_tile_of_addresses_cpu():
    vals = [np.array([float(i) * 1.25], np.float32) for i in range(8)]
    table = np.array([v.ctypes.data for v in vals], np.int64)
    out = np.zeros(8, np.float32)
    tile_of_addresses_kernel[(1,)](table, out, N=8, **CPU)
    np.testing.assert_array_equal(out, [v[0] for v in vals])


@pytest.mark.parametrize("what,message", [
    (0, "cannot cast pointer<fp32> to int32: expected int64, uint64 or int1"),
    (1, "cannot cast fp32 to pointer<fp32>: expected an integer or a pointer"),
])
def test_bad_pointer_casts_name_the_line(what, message):
    x = np.zeros(1, np.float32)
    out = np.zeros(1, np.int64)
    with pytest.raises(kiln.CompilationError) as info:
        bad_cast_kernel[(1,)](x, out, WHAT=what, **CPU)
    text = str(info.value)
    assert message in text and "bad_cast_kernel" in text and ".to(" in text


def test_pointer_casts_compile_for_sm90():
    k = kiln.compile(gather_rows_kernel, signature={"table_ptr": "*i64:16", "sizes_ptr": "*i32",
                                                    "out_ptr": "*fp32"},
                     constexprs={"BLOCK": 32}, target="sm_90a")
    ptx = k.asm["ptx"]
    assert "ld.global" in ptx and "st.global" in ptx


@pytest.mark.gpu
def test_grouped_addresses_gpu():
    torch = pytest.importorskip("torch")
    groups = [torch.randn(n, device="cuda") for n in (5, 64, 1000, 1)]
    table = torch.tensor([g.data_ptr() for g in groups], dtype=torch.int64, device="cuda")
    sizes = torch.tensor([g.numel() for g in groups], dtype=torch.int32, device="cuda")
    out = torch.zeros(len(groups), device="cuda")
    gather_rows_kernel[(len(groups),)](table, sizes, out, BLOCK=128)
    ref = torch.stack([g.sum() for g in groups])
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    x = torch.tensor([1.5, 2.0], device="cuda")
    facts = torch.zeros(3, dtype=torch.int64, device="cuda")
    pointer_facts_kernel[(1,)](x, facts)
    assert facts[0].item() == x.data_ptr() and facts[1].item() == 1
    assert facts[2].item() == x[:1].view(torch.int32).item()
