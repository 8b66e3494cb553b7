"""kiln_kernels.flash_attention_persistent: the persistent FlashAttention-3 forward (a
program walks every key block of several query blocks in one loop). CPU: against a float64
reference and bit for bit against the non-persistent forward, over programs that own one,
several and uneven numbers of tiles. GPU (marker `gpu`): against SDPA, fp16 and bf16."""
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_kernels import flash_attention as fa  # noqa: E402
from kiln_kernels import flash_attention_persistent as fp  # noqa: E402
from cuda_torch import torch_or_skip  # noqa: E402


def reference(q, k, v, scale):
    """Attention and its logsumexp in float64 (non-causal)."""
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) * scale
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return (np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v.astype(np.float64)),
            (np.log(p.sum(-1)) + m[..., 0]))


@pytest.mark.parametrize("B,H,H_KV,S,D,bm,bn,programs", [
    (1, 2, 2, 64, 16, 16, 16, 3),    # 8 tiles over 3 programs: 3, 3, 2
    (2, 3, 3, 64, 16, 32, 16, 4),    # 12 tiles, 3 each; two key blocks a tile (the least)
    (1, 1, 1, 64, 32, 32, 16, 1),    # one program, every tile
    (1, 4, 4, 32, 16, 16, 16, 32),   # more programs asked for than tiles: one tile each
    (1, 4, 2, 64, 16, 16, 16, 5),    # grouped-query heads
])
def test_persistent_forward_matches_the_reference_and_the_forward(B, H, H_KV, S, D, bm, bn,
                                                                  programs):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, S, D)).astype(np.float32)
    k, v = (rng.standard_normal((B, H_KV, S, D)).astype(np.float32) for _ in range(2))
    out = np.full_like(q, np.nan)
    lse = np.full((B, H, S), np.nan, np.float32)
    fp.attention_forward_persistent(q, k, v, out, lse, programs=programs, block_m=bm,
                                    block_n=bn, num_warps=4, device="cpu")
    rep = H // H_KV
    ref, ref_lse = reference(q, np.repeat(k, rep, 1), np.repeat(v, rep, 1), 1 / math.sqrt(D))
    assert np.abs(out - ref).max() < 2e-3
    assert np.abs(lse - ref_lse).max() < 2e-3
    plain = np.zeros_like(q)
    fa.attention_forward(q, k, v, plain, block_m=bm, block_n=bn, device="cpu")
    np.testing.assert_array_equal(out, plain)


def test_persistent_forward_rejects_what_it_cannot_tile():
    q = np.zeros((1, 1, 48, 16), np.float32)
    with pytest.raises(ValueError, match=r"expected S a multiple of BLOCK_M \(32\) and at least "
                                         r"2 \* BLOCK_N \(32\), found 48"):
        fp.attention_forward_persistent(q, q, q, q.copy(), block_m=32, block_n=16,
                                        device="cpu")
    q = np.zeros((1, 1, 16, 16), np.float32)
    with pytest.raises(ValueError, match=r"at least 2 \* BLOCK_N \(32\), found 16"):
        fp.attention_forward_persistent(q, q, q, q.copy(), block_m=16, block_n=16,
                                        device="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("B,H,H_KV,S", [(2, 4, 4, 1024), (1, 3, 3, 256), (4, 32, 32, 512),
                                        (2, 8, 2, 512)])  # (the last: grouped-query heads)
def test_persistent_forward_gpu(B, H, H_KV, S, dtype):
    torch = torch_or_skip()
    t = getattr(torch, dtype)
    torch.manual_seed(0)
    q = torch.randn(B, H, S, 128, device="cuda", dtype=t)
    k, v = (torch.randn(B, H_KV, S, 128, device="cuda", dtype=t) for _ in range(2))
    out = torch.full_like(q, float("nan"))
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    fp.attention_forward_persistent(q, k, v, out, lse)
    k, v = (x.repeat_interleave(H // H_KV, dim=1) for x in (k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    err = (out.double() - ref.double()).abs().max().item()
    assert err < (1e-2 if dtype == "float16" else 3e-2), f"max |out - sdpa| = {err:.3g}"
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(128)
    assert (lse.double() - torch.logsumexp(s, dim=-1)).abs().max().item() < 1e-4
