"""Launches from several Python threads at once: the launcher compiles a variant with the GIL
released, so two threads may compile the same variant together; the first one is kept and
both launch it (the second used to get a pointer to the variant it dropped: a segfault)."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import kiln
import kiln.language as tl


def _make_kernel():
    @kiln.jit
    def scale(x_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * a, mask=m)
    return scale


def _run(kernel, i, device):
    x = np.arange(1000, dtype=np.float32)
    outs = []
    for block in (16, 32, 64, 128, 256):
        if device == "cpu":
            out = np.empty_like(x)
            kernel[(kiln.cdiv(1000, block),)](x, out, 1000, float(i + 1), BLOCK=block,
                                              device="cpu")
        else:
            xd, out = kiln.from_numpy(x), kiln.empty([1000])
            kernel[(kiln.cdiv(1000, block),)](xd, out, 1000, float(i + 1), BLOCK=block)
            out = out.numpy()
        outs.append(out)
    return outs


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_threads_compile_the_same_variants(device):
    for _ in range(3):
        kernel = _make_kernel()  # no variant compiled yet
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda i: _run(kernel, i, device), range(4)))
        x = np.arange(1000, dtype=np.float32)
        for i, outs in enumerate(results):
            for out in outs:
                np.testing.assert_array_equal(out, x * (i + 1))
        assert kernel._num_variants() == 5
