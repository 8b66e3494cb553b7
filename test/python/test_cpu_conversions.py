"""Conversions the CPU backend lowers itself: float64 -> bfloat16 (LLVM would call
__truncdfbf2, which the process may lack: the fuzzer's mutant 0:495 failed to link) is rounded
once, to nearest even. The reference is exact (Python's round() on the 8-bit significand);
ml_dtypes itself rounds through float32 and is off on inputs beside a tie."""
import math

import numpy as np
import pytest

import kiln
import kiln.language as tl

ml_dtypes = pytest.importorskip("ml_dtypes")


@kiln.jit
def to_bf16(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.bfloat16), mask=mask)


def test_float64_to_bfloat16_rounds_once():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4000) * 10.0 ** rng.integers(-30, 30, 4000)
    # Doubles beside bf16 rounding ties, where rounding through float32 first would go wrong:
    # 1 + 2^-8 is a tie between two bf16 values; a hair above it must round up.
    tie = 1.0 + 2.0 ** -8
    x = np.concatenate([x, [tie, tie + 2.0 ** -40, tie - 2.0 ** -40, -tie - 2.0 ** -40, np.inf,
                            -np.inf, 0.0, -0.0, 3e38]])
    out = np.zeros(x.size, ml_dtypes.bfloat16)
    to_bf16[(kiln.cdiv(x.size, 256),)](x, out, x.size, BLOCK=256, device="cpu")
    ref = np.array([bf16_bits(v) for v in x], np.uint16)
    np.testing.assert_array_equal(out.view(np.uint16), ref)
    # Rounding through float32 (what ml_dtypes does) differs on the near-tie inputs.
    assert (x.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16) != ref).any()


def bf16_bits(v):
    """The bits of v rounded to nearest-even bfloat16 (v in bfloat16's normal range, 0 or
    infinite), computed exactly."""
    if v == 0 or math.isinf(v):
        return int(np.array([v], np.float32).view(np.uint32)[0] >> 16)
    m, e = math.frexp(v)  # |m| in [0.5, 1): 8 significant bits are round(m * 2^8)
    r = math.ldexp(round(m * 256), e - 8)  # exact in float32 and bfloat16
    return int(np.array([r], np.float32).view(np.uint32)[0] >> 16)
