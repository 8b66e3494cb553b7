"""tl.atomic_add / max / min / and / or / xor / xchg / cas, on the CPU backend with numpy
arrays (always) and on the GPU with kiln device arrays (marked `gpu`): a masked histogram,
a float sum into one scalar, running max and min, bitwise ops, exchange and compare-and-swap
returning old values, and errors at the user's line."""
import numpy as np
import pytest

import kiln
import kiln.language as tl


@kiln.jit
def histogram_kernel(x_ptr, bins_ptr, n, NBINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(bins_ptr + (x % NBINS), 1, mask=mask)


@kiln.jit
def reduce_kernel(x_ptr, sum_ptr, max_ptr, min_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.atomic_add(sum_ptr, tl.sum(x, axis=0))
    xi = x.to(tl.int32)
    tl.atomic_max(max_ptr + tl.zeros([BLOCK], tl.int32), xi, mask=mask)
    tl.atomic_min(min_ptr + tl.zeros([BLOCK], tl.int32), xi, mask=mask, sem="relaxed")


@kiln.jit
def bits_kernel(p_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_or(p_ptr + offs, 0xF0)
    tl.atomic_and(p_ptr + BLOCK + offs, 0x0F)
    tl.atomic_xor(p_ptr + 2 * BLOCK + offs, offs)
    old = tl.atomic_xchg(p_ptr + 3 * BLOCK + offs, offs * 10)
    tl.store(old_ptr + offs, old)


@kiln.jit
def cas_kernel(p_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    # Succeeds where the value is even (cmp == value), fails elsewhere.
    cmp = (offs // 2) * 2
    old = tl.atomic_cas(p_ptr + offs, cmp, offs + 100)
    tl.store(old_ptr + offs, old)


def run_all(launch, to_dev, to_host):
    rng = np.random.default_rng(5)
    # Histogram: 10000 values (a masked tail), 64 bins.
    x = rng.integers(0, 1 << 20, 10000).astype(np.int32)
    bins = to_dev(np.zeros(64, np.int32))
    launch(histogram_kernel, (kiln.cdiv(x.size, 256),), to_dev(x), bins, x.size, NBINS=64,
           BLOCK=256)
    np.testing.assert_array_equal(to_host(bins), np.bincount(x % 64, minlength=64))

    # Sum into one float, running max and min of integers.
    y = rng.uniform(-100, 100, 5000).astype(np.float32)
    s, mx, mn = (to_dev(np.zeros(1, np.float32)), to_dev(np.full(1, -2**31, np.int32)),
                 to_dev(np.full(1, 2**31 - 1, np.int32)))
    launch(reduce_kernel, (kiln.cdiv(y.size, 512),), to_dev(y), s, mx, mn, y.size, BLOCK=512)
    assert abs(float(to_host(s)[0]) - float(y.astype(np.float64).sum())) < 1e-2
    assert to_host(mx)[0] == y.astype(np.int32).max()
    assert to_host(mn)[0] == y.astype(np.int32).min()

    # Bitwise ops and exchange (which returns the old values).
    p = np.arange(4 * 16, dtype=np.int32) + 3
    old = to_dev(np.zeros(16, np.int32))
    dp = to_dev(p.copy())
    launch(bits_kernel, (1,), dp, old, BLOCK=16)
    got, offs = to_host(dp), np.arange(16, dtype=np.int32)
    np.testing.assert_array_equal(got[:16], p[:16] | 0xF0)
    np.testing.assert_array_equal(got[16:32], p[16:32] & 0x0F)
    np.testing.assert_array_equal(got[32:48], p[32:48] ^ offs)
    np.testing.assert_array_equal(got[48:], offs * 10)
    np.testing.assert_array_equal(to_host(old), p[48:])

    # Compare-and-swap: only lanes whose value equals cmp are replaced; all return the old.
    q = np.arange(16, dtype=np.int32)
    dq, old = to_dev(q.copy()), to_dev(np.zeros(16, np.int32))
    launch(cas_kernel, (1,), dq, old, BLOCK=16)
    expect = np.where(q % 2 == 0, q + 100, q)
    np.testing.assert_array_equal(to_host(dq), expect)
    np.testing.assert_array_equal(to_host(old), q)


def test_atomics_cpu():
    run_all(lambda k, grid, *a, **kw: k[grid](*a, device="cpu", **kw), lambda a: a, lambda a: a)


@pytest.mark.gpu
def test_atomics_gpu():
    if not kiln._C.has_gpu():
        pytest.skip("no GPU")

    def launch(k, grid, *a, **kw):
        k[grid](*a, **kw)
        kiln.synchronize()

    run_all(launch, kiln.from_numpy, lambda a: a.numpy())


def test_atomic_errors():
    @kiln.jit
    def bad_float_and(p_ptr):
        tl.atomic_and(p_ptr, 1.0)

    with pytest.raises(kiln.CompilationError, match="expected a pointer to integers for "
                                                    "atomic_and, found pointer<fp32>"):
        bad_float_and[(1,)](np.zeros(1, np.float32), device="cpu")

    @kiln.jit
    def bad_sem(p_ptr):
        tl.atomic_add(p_ptr, 1, sem="sometimes")

    with pytest.raises(kiln.CompilationError, match="expected sem 'acq_rel', 'acquire', "
                                                    "'release' or 'relaxed' for atomic_add"):
        bad_sem[(1,)](np.zeros(1, np.int32), device="cpu")
