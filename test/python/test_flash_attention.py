"""Flash attention forward (kernels/python/kiln_kernels/flash_attention.py).

- CPU backend (numpy arrays, fp16 and bf16 through ml_dtypes): outputs and logsumexp against
  a float64 numpy softmax(q k^T * scale) v of the same rounded inputs; head dims 64 and 128,
  causal and not, sequence lengths that are multiples of BLOCK_N and not (the masked tail),
  (B, S, H, D)-strided inputs and output, a non-default scale; the tail cases in debug mode
  (bounds-checked loads and stores). Small tiles (32 x 16): the
  host compile of a dot grows fast with its size; each variant compiles in a few seconds.
- compile-only: the GPU tiles (128 x 128 / 128 x 64) compile to PTX for sm_90a with wgmma.
- argument errors of the host function.
- GPU (marker `gpu`): S = 1024 (and 1000), D = 64 / 128, causal and not, fp16 / bf16 against
  torch.nn.functional.scaled_dot_product_attention, and the logsumexp against torch's.
"""
import math
import os
import re
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_kernels import flash_attention as fa  # noqa: E402
from cuda_torch import torch_or_skip  # noqa: E402

CPU = dict(device="cpu")
# max |out - ref| for outputs of magnitude ~1: fp16 p and output roundings (2^-11), bf16's
# (2^-8); the logsumexp is fp32 throughout.
ATOL = {"float16": 1e-2, "bfloat16": 3e-2}
LSE_ATOL = 1e-4


def np_dtype(name):
    if name == "bfloat16":
        return pytest.importorskip("ml_dtypes").bfloat16
    return np.dtype(name)


def reference(q, k, v, causal, sm_scale):
    """float64 (out, lse) of q, k, v (B, H, S, D)."""
    q, k, v = (np.asarray(x).astype(np.float64) for x in (q, k, v))
    s = q @ k.transpose(0, 1, 3, 2) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    return e @ v / l, (m + np.log(l))[..., 0]


def inputs(shape, dtype, seed=0, layout="bhsd"):
    """q, k, v of shape (B, H, S, D); layout "bshd" gives views of (B, S, H, D) arrays."""
    rng = np.random.default_rng(seed)
    B, H, S, D = shape
    full = (B, S, H, D) if layout == "bshd" else shape
    out = []
    for _ in range(3):
        x = rng.standard_normal(full, dtype=np.float32).astype(np_dtype(dtype))
        out.append(x.transpose(0, 2, 1, 3) if layout == "bshd" else x)
    return out


def run_cpu(shape, dtype, causal, sm_scale=None, layout="bhsd", **kw):
    q, k, v = inputs(shape, dtype, layout=layout)
    B, H, S, D = shape
    if layout == "bshd":
        out = np.full((B, S, H, D), np.nan, dtype=q.dtype).transpose(0, 2, 1, 3)
    else:
        out = np.full(shape, np.nan, dtype=q.dtype)
    lse = np.full((B, H, S), np.nan, dtype=np.float32)
    fa.attention_forward(q, k, v, out, lse, causal=causal, sm_scale=sm_scale, **CPU, **kw)
    ref, ref_lse = reference(q, k, v, causal, sm_scale or 1.0 / math.sqrt(D))
    assert out.dtype == q.dtype
    err = np.abs(out.astype(np.float64) - ref).max()
    assert err < ATOL[dtype], f"max |out - ref| = {err:.3g}"
    lse_err = np.abs(lse.astype(np.float64) - ref_lse).max()
    assert lse_err < LSE_ATOL, f"max |lse - ref| = {lse_err:.3g}"


# ---------------------------------------------------------------- CPU backend

@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_cpu_fp16(D, causal):
    run_cpu((1, 2, 128, D), "float16", causal)


def test_attention_cpu_bf16_causal():
    run_cpu((1, 2, 128, 64), "bfloat16", True)


@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_cpu_tail(causal, overlap):
    # 100 = 6 whole key blocks of 16 and a tail of 4; the last query block is partial too.
    # Debug mode: every unmasked load and store is checked against the arrays' bounds.
    run_cpu((2, 1, 100, 64), "float16", causal, debug=True, overlap=overlap)


def test_attention_cpu_longest_first():
    # Query blocks launched last-first (the descriptor path's causal default) through
    # pointers, with a partial last query block.
    run_cpu((2, 1, 100, 64), "float16", True, debug=True, longest_first=True)


@pytest.mark.parametrize("S", [16, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_cpu_overlap(S, causal):
    # The rotated loop (p @ v of the previous block beside q @ k of this one), including a
    # walk of one block and none at all (causal, first query block).
    run_cpu((1, 2, S, 64), "float16", causal, overlap=True)


def test_attention_cpu_strided_and_scale():
    # (B, S, H, D) arrays seen as (B, H, S, D): only the strides change (same variant as
    # the contiguous fp16 D=64 causal case).
    run_cpu((1, 2, 128, 64), "float16", True, sm_scale=0.3, layout="bshd")


def test_attention_cpu_no_lse():
    q, k, v = inputs((1, 2, 128, 64), "float16")
    out = np.zeros_like(q)
    fa.attention_forward(q, k, v, out, causal=False, **CPU)
    ref, _ = reference(q, k, v, False, 1.0 / 8.0)
    assert np.abs(out.astype(np.float64) - ref).max() < ATOL["float16"]


def test_attention_cpu_torch():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 64, 64, generator=g).half() for _ in range(3))
    out, lse = fa.attention(q, k, v, causal=True, return_lse=True)
    ref, ref_lse = reference(q.float().numpy(), k.float().numpy(), v.float().numpy(), True,
                             1.0 / 8.0)
    assert out.dtype == torch.float16 and out.shape == q.shape
    assert np.abs(out.double().numpy() - ref).max() < ATOL["float16"]
    assert np.abs(lse.double().numpy() - ref_lse).max() < LSE_ATOL


@pytest.mark.parametrize("overlap", [False, True, 2], ids=["plain", "overlap", "fa3"])
@pytest.mark.parametrize("causal,group", [(False, 1), (True, 1), (True, 2)],
                         ids=["full", "causal", "causal-gqa"])
def test_descriptor_kernel_cpu(causal, group, overlap):
    # _attn_fwd_desc (the GPU's path for contiguous inputs) on the CPU backend, descriptors
    # over (B * H * S, D) numpy matrices, grouped-query heads included; overlap: the rotated
    # loop, whose first iteration reads block lo's values and last block hi - 1's keys again
    # (2: in FlashAttention-3's order, acc rescaled before p @ v, p carried in fp32); causal
    # blocks launched last-first (LONGEST_FIRST, attention_forward's default)
    B, H, S, D, BM, BN = 2, 4, 64, 32, 32, 16
    q, _, _ = inputs((B, H, S, D), "float16", seed=3)
    _, k, v = inputs((B, H // group, S, D), "float16", seed=4)
    out = np.full(q.shape, np.nan, dtype=q.dtype)
    lse = np.full((B, H, S), np.nan, dtype=np.float32)

    def desc(x, rows):
        return kiln.TensorDescriptor(x.reshape(-1, D), shape=[x.size // D, D], strides=[D, 1],
                                     block_shape=[rows, D])
    fa._attn_fwd_desc[(S // BM, B * H)](desc(q, BM), desc(k, BN), desc(v, BN), desc(out, BM),
                                        lse, 0.2, H, S, HEAD_DIM=D, BLOCK_M=BM, BLOCK_N=BN,
                                        CAUSAL=causal, GROUP=group, OVERLAP=overlap,
                                        LONGEST_FIRST=causal, **CPU)
    kr, vr = (np.repeat(x, group, axis=1) for x in (k, v))
    ref, ref_lse = reference(q, kr, vr, causal, 0.2)
    assert np.abs(out.astype(np.float64) - ref).max() < ATOL["float16"]
    assert np.abs(lse.astype(np.float64) - ref_lse).max() < LSE_ATOL


# ---------------------------------------------------------------- compile-only (no GPU)

def gpu_signature(dtype):
    sig = {name: f"*{dtype}:16" for name in ("Q", "K", "V", "Out")}
    sig.update(LSE="*fp32:16", sm_scale="fp32", Z="i32", H="i32:16", N_CTX="i32:16")
    for t, dims in (("q", "zhm"), ("k", "zhn"), ("v", "zhn"), ("o", "zhm")):
        sig.update({f"stride_{t}{d}": "i32:16" for d in dims})
        sig[f"stride_{t}k"] = "i32:1"
    return sig


@pytest.mark.parametrize("D,causal,dtype", [(128, False, "fp16"), (64, True, "bf16")])
def test_compiles_to_ptx(D, causal, dtype):
    bm, bn, nw, ns = fa.tile_config(D)
    k = kiln.compile(fa._attn_fwd, signature=gpu_signature(dtype),
                     constexprs=dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                     EVEN_N=True),
                     target="sm_90a", num_warps=nw, num_stages=ns)
    ptx = k.asm["ptx"]
    assert ".entry _attn_fwd" in ptx
    assert "wgmma.mma_async" in ptx and "ex2.approx" in ptx
    # K and V stream through rings of num_stages slots, q is copied once; nothing is staged
    # through registers. The two loops of causal attention share one pool.
    assert "st.shared" not in ptx and "cp.async.cg.shared.global" in ptx
    slot = lambda rows, cols: rows * cols * 2
    assert k.metadata.dynamic_shared == slot(bm, D) + ns * (slot(D, bn) + slot(bn, D))
    # Each loop ends with a wait for every group; with 2 stages its iterations wait for all
    # groups too (one in flight at most).
    waits = ptx.count("cp.async.wait_group 0;")
    assert waits == (2 if causal else 1) * (2 if ns == 2 else 1)


def test_overlap_compiles_to_ptx():
    # The rotated loop issues q @ k_j and p @ v_(j-1) back to back and waits for the second
    # only after the softmax's exp2s: no wgmma.wait_group 0 between the last commit of the
    # loop and its first ex2.
    bm, bn, nw, ns = fa.tile_config(128)
    k = kiln.compile(fa._attn_fwd, signature=gpu_signature("fp16"),
                     constexprs=dict(HEAD_DIM=128, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=False,
                                     EVEN_N=True, OVERLAP=True),
                     target="sm_90a", num_warps=nw, num_stages=ns)
    ptx = k.asm["ptx"]
    # Four groups: the peeled first iteration's q @ k (its p @ v of zeros is gone:
    # -kiln-peel-dot-loops), the loop's two, the peeled last iteration's p @ v (its q @ k, of
    # no key block, is gone).
    commits = [m.start() for m in re.finditer("wgmma.commit_group", ptx)]
    assert len(commits) == 4
    # The first iteration's softmax waits for its q @ k alone (nothing else in flight).
    assert "wgmma.wait_group.sync.aligned 0;" in ptx[commits[0]:ptx.index("ex2.approx",
                                                                          commits[0])]
    second = commits[2]
    first_exp = ptx.index("ex2.approx", second)
    between = ptx[second:first_exp]
    assert "wgmma.wait_group.sync.aligned 1;" in between
    assert "wgmma.wait_group.sync.aligned 0;" not in between
    assert "wgmma.wait_group.sync.aligned 0;" in ptx[first_exp:]


@pytest.mark.parametrize("D,causal", [(128, False), (64, True)])
def test_descriptor_kernel_compiles_to_ptx(D, causal):
    # K and V through the TMA into the rings, O stored by the TMA: no global stores in
    # registers but the logsumexp's. (q is copied once by cp.async, 16 bytes a copy where
    # the launch tells the extents are multiples of 16, which kiln.compile's spelling does
    # not say.)
    bm, bn, nw, ns = fa.descriptor_tile_config(D, causal)
    sig = {name: f"tensordesc<fp16[{rows}, {D}]>"
           for name, rows in (("desc_q", bm), ("desc_k", bn), ("desc_v", bn), ("desc_o", bm))}
    sig.update(LSE="*fp32:16", sm_scale="fp32", H="i32:16", N_CTX="i32:16")
    k = kiln.compile(fa._attn_fwd_desc, signature=sig,
                     constexprs=dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal),
                     target="sm_90a", num_warps=nw, num_stages=ns)
    ptx = k.asm["ptx"]
    assert "wgmma.mma_async" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx  # K, V
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # O
    assert ptx.count("st.global") == ptx.count("st.global.b32")  # the logsumexp only


# ---------------------------------------------------------------- errors

def test_errors():
    q = np.zeros((1, 2, 64, 64), np.float16)
    with pytest.raises(ValueError, match="one shape"):
        fa.attention_forward(q, q, q[:, :1], np.zeros_like(q), **CPU)
    odd = np.zeros((1, 2, 64, 80), np.float16)
    with pytest.raises(ValueError, match="head dimension of 16, 32, 64, 128 or 256, found 80"):
        fa.attention_forward(odd, odd, odd, np.zeros_like(odd), **CPU)
    with pytest.raises(ValueError, match="one dtype"):
        fa.attention_forward(q, q, q.astype(np.float32), np.zeros_like(q), **CPU)
    with pytest.raises(ValueError, match=r"expected lse of shape \(1, 2, 64\)"):
        fa.attention_forward(q, q, q, np.zeros_like(q), np.zeros((1, 2, 32), np.float32), **CPU)
    # the kernels write lse's rows as a contiguous fp32 (B, H, S) array
    with pytest.raises(ValueError, match=r"\(fp32, contiguous\), found \(1, 2, 64\) float16"):
        fa.attention_forward(q, q, q, np.zeros_like(q), np.zeros((1, 2, 64), np.float16), **CPU)
    with pytest.raises(ValueError, match=r"found \(1, 2, 64\) float32 not contiguous"):
        fa.attention_forward(q, q, q, np.zeros_like(q),
                             np.zeros((1, 64, 2), np.float32).transpose(0, 2, 1), **CPU)
    with pytest.raises(ValueError, match=r"BLOCK_M \(32\) to be a multiple of BLOCK_N \(64\)"):
        fa.attention_forward(q, q, q, np.zeros_like(q), block_m=32, block_n=64, **CPU)
    with pytest.raises(ValueError, match="positive, finite sm_scale, found -0.5"):
        fa.attention_forward(q, q, q, np.zeros_like(q), sm_scale=-0.5, **CPU)
    with pytest.raises(ValueError, match="expected overlap None, False, True, 'fa3' or "
                                         "'persistent', found 'FA3'"):
        fa.attention_forward(q, q, q, np.zeros_like(q), overlap="FA3", **CPU)
    with pytest.raises(ValueError, match="overlap='persistent' needs a non-causal attention.*"
                                         "found causal"):
        fa.attention_forward(q, q, q, np.zeros_like(q), causal=True, overlap="persistent",
                             **CPU)
    with pytest.raises(ValueError, match=r"at least 2 \* BLOCK_N \(128\), under 2\*\*31 "
                                         r"elements, found \(1, 2, 64, 64\)"):
        fa.attention_forward(q, q, q, np.zeros_like(q), overlap="persistent", block_m=64,
                             block_n=64, **CPU)
    with pytest.raises(ValueError, match="expected contiguous arrays, found out"):
        fa.attention_forward(q, q, q, np.zeros((1, 2, 64, 128), np.float16)[..., ::2],
                             overlap="persistent", block_m=32, block_n=16, **CPU)


def test_plans_kept_per_signature_cpu(monkeypatch):
    # A call's checks and choices are kept per signature (shapes, dtypes, contiguity,
    # options): a second call of the same signature on other arrays reuses the launch, reads
    # its own arrays (and a strided out's own strides), and keeps no array alive; an error is
    # raised on every call, never kept.
    import gc
    import weakref
    monkeypatch.setattr(fa, "_plans", {})
    shape = (1, 2, 64, 64)
    (q, k, v), (q2, k2, v2) = inputs(shape, "float16", 0), inputs(shape, "float16", 1)
    out, out2 = np.zeros_like(q), np.zeros_like(q)
    fa.attention_forward(q, k, v, out, causal=True, **CPU)
    fa.attention_forward(q2, k2, v2, out2, causal=True, **CPU)
    assert len(fa._plans) == 1
    for (a, b, c), o in (((q, k, v), out), ((q2, k2, v2), out2)):
        ref, _ = reference(a, b, c, True, 1.0 / 8.0)
        assert np.abs(o.astype(np.float64) - ref).max() < ATOL["float16"]
    # another option, another layout of out: each its own plan, both right
    strided = np.zeros((1, 64, 2, 64), np.float16).transpose(0, 2, 1, 3)
    fa.attention_forward(q2, k2, v2, strided, causal=True, **CPU)
    fa.attention_forward(q, k, v, out2, causal=False, **CPU)
    assert len(fa._plans) == 3
    ref, _ = reference(q2, k2, v2, True, 1.0 / 8.0)
    assert np.abs(strided.astype(np.float64) - ref).max() < ATOL["float16"]
    ref, _ = reference(q, k, v, False, 1.0 / 8.0)
    assert np.abs(out2.astype(np.float64) - ref).max() < ATOL["float16"]
    # no plan holds an array
    alive = weakref.ref(q)
    del q
    gc.collect()
    assert alive() is None
    for _ in range(2):
        with pytest.raises(ValueError, match="positive, finite sm_scale, found -0.5"):
            fa.attention_forward(q2, k2, v2, out, sm_scale=-0.5, **CPU)
    assert len(fa._plans) == 3
    # arguments that are not plain scalars (a numpy float) are not keyed: no plan kept
    fa.attention_forward(q2, k2, v2, out, sm_scale=np.float64(0.125), **CPU)
    assert len(fa._plans) == 3


def test_persistent_through_attention_forward_cpu():
    # overlap="persistent" runs flash_attention_persistent, bit for bit the forward's answer
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 2, 64, 16)).astype(np.float32) for _ in range(3))
    out, plain = np.full_like(q, np.nan), np.zeros_like(q)
    lse, plain_lse = np.full((2, 2, 64), np.nan, np.float32), np.zeros((2, 2, 64), np.float32)
    fa.attention_forward(q, k, v, out, lse, overlap="persistent", block_m=32, block_n=16, **CPU)
    fa.attention_forward(q, k, v, plain, plain_lse, block_m=32, block_n=16, **CPU)
    np.testing.assert_array_equal(out, plain)
    np.testing.assert_array_equal(lse, plain_lse)


def test_default_persistent_launch_glue(monkeypatch):
    # On the GPU the default path builds its launch with persistent_launch from its checked
    # arguments: here the descriptor path is forced on and the call recorded, then the launch
    # it builds runs on the CPU backend against the forward's own answer.
    from kiln_kernels import flash_attention_persistent as fp
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, 64, 16)).astype(np.float32) for _ in range(3))
    out, lse = np.zeros_like(q), np.zeros((1, 2, 64), np.float32)
    calls = []
    monkeypatch.setattr(fa, "_plans", {})
    monkeypatch.setattr(fa, "_descriptor_path", lambda *args: True)
    monkeypatch.setattr(fa, "descriptor_overlap_default", lambda *args: "persistent")
    monkeypatch.setattr(fa, "descriptor_tile_config", lambda *args: (64, 64, 4, 3))
    monkeypatch.setattr(fp, "persistent_launch",
                        lambda *args: calls.append(args) or (lambda *arrays: calls.append(arrays)))
    fa.attention_forward(q, k, v, out, lse, sm_scale=0.3, block_m=32, block_n=16)
    args, arrays = calls
    assert args[:2] == ((1, 2, 64, 16), 2) and args[3:9] == (0.3, None, 32, 16, 4, 3)
    assert all(a is b for a, b in zip(arrays, (q, k, v, out, lse)))
    monkeypatch.undo()
    run = fp.persistent_launch(*args[:2], None, *args[3:9], dict(args[9], device="cpu"))
    assert run(q, k, v, out, lse) is out
    plain, plain_lse = np.zeros_like(q), np.zeros_like(lse)
    fa.attention_forward(q, k, v, plain, plain_lse, sm_scale=0.3, block_m=32, block_n=16, **CPU)
    np.testing.assert_array_equal(out, plain)
    np.testing.assert_array_equal(lse, plain_lse)


def test_persistent_is_the_default_where_it_tiles(monkeypatch):
    # non-causal D 128 on sm_90 takes the persistent kernel; causal, other dims, other GPUs and
    # shapes it cannot tile keep FlashAttention-3's order (or the plain loop)
    monkeypatch.setattr(fa, "_capability_major", lambda device: 9)
    monkeypatch.setattr(fa, "torch", object())
    assert fa.descriptor_overlap_default(128, "cuda", causal=False, seq_len=4096) == "persistent"
    assert fa.descriptor_overlap_default(128, "cuda", causal=True, seq_len=4096) == "fa3"
    assert fa.descriptor_overlap_default(64, "cuda", causal=False, seq_len=4096) is None
    monkeypatch.setattr(fa, "_capability_major", lambda device: 10)
    assert fa.descriptor_overlap_default(128, "cuda", causal=False, seq_len=4096) is None
    assert fa._persistent_path(np.zeros((1, 1, 256, 1)), 128, 128)
    assert not fa._persistent_path(np.zeros((1, 1, 128, 1)), 128, 128)   # one key block
    assert not fa._persistent_path(np.zeros((1, 1, 384, 1)), 256, 128)   # S % BLOCK_M


# ---------------------------------------------------------------- GPU: against torch SDPA


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["plain", "overlap", "descriptors-plain",
                                  "descriptors-overlap", "descriptors-fa3", "default"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("S", [1024, 1000, 128])
def test_attention_gpu(S, D, causal, dtype, path):
    torch = torch_or_skip()
    F = torch.nn.functional
    t = getattr(torch, dtype)
    torch.manual_seed(0)
    B, H = 2, 4
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=t) for _ in range(3))
    # pointers (plain or rotated loop), or descriptors where the sequence takes whole blocks
    # (else the default falls back to pointers)
    descriptors = None if path.startswith("descriptors") or path == "default" else False
    overlap = "fa3" if path.endswith("fa3") else path.endswith("overlap")
    if path == "default":  # the persistent kernel at D 128 non-causal where S tiles
        overlap = None
    out, lse = fa.attention(q, k, v, causal=causal, return_lse=True, overlap=overlap,
                            descriptors=descriptors)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.dtype == t and out.shape == q.shape
    err = (out.double() - ref.double()).abs().max().item()
    assert err < ATOL[dtype], f"max |out - sdpa| = {err:.3g}"
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(D)
    if causal:
        s = s.masked_fill(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1),
                          float("-inf"))
    lse_err = (lse.double() - torch.logsumexp(s, dim=-1)).abs().max().item()
    assert lse_err < LSE_ATOL, f"max |lse - ref| = {lse_err:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_descriptors_in_a_cuda_graph_and_on_a_side_stream(causal):
    # The descriptor path (contiguous inputs) captured in a CUDA graph on a side stream: the
    # launcher encodes the tensor maps at capture, the replay reads the captured buffers'
    # new contents; then a launch on a side stream ordered by events only.
    torch = torch_or_skip()
    F = torch.nn.functional
    torch.manual_seed(3)
    B, H, S, D = 2, 4, 512, 128
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    fa.attention_forward(q, k, v, out, causal=causal, descriptors=True)  # compile first
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
        fa.attention_forward(q, k, v, out, causal=causal, descriptors=True)
    torch.cuda.current_stream().wait_stream(s)
    for x in (q, k, v):
        x.copy_(torch.randn_like(x))
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert (out.double() - ref.double()).abs().max().item() < ATOL["float16"]

    side = torch.cuda.Stream()
    out2 = torch.full_like(q, float("nan"))
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fa.attention_forward(q, k, v, out2, causal=causal, descriptors=True)
        done = out2 * 1  # ordered after the launch on the side stream
    side.synchronize()
    assert (done.double() - ref.double()).abs().max().item() < ATOL["float16"]


@pytest.mark.gpu
@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_gpu_kept_plans_read_each_calls_tensors(D, causal, group):
    # attention_forward keeps its launch per signature: two sets of contiguous inputs in
    # turn, with a strided set of the same shape between them (another plan: pointers), each
    # output against SDPA's; then the first set again with a strided out.
    torch = torch_or_skip()
    F = torch.nn.functional
    torch.manual_seed(4)
    B, H, S = 2, 4, 512
    shapes = ((B, H, S, D), (B, H // group, S, D), (B, H // group, S, D))
    sets = [tuple(torch.randn(*s, device="cuda", dtype=torch.float16) for s in shapes)
            for _ in range(2)]
    strided = tuple(torch.randn(s[0], s[2], s[1], s[3], device="cuda",
                                dtype=torch.float16).transpose(1, 2) for s in shapes)
    for q, k, v in (sets[0], strided, sets[1], sets[0], strided, sets[1]):
        out = torch.full_like(q, float("nan"), memory_format=torch.contiguous_format)
        fa.attention_forward(q, k, v, out, causal=causal)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                             enable_gqa=group > 1)
        assert (out.double() - ref.double()).abs().max().item() < ATOL["float16"]
    q, k, v = sets[0]
    out = torch.full((B, S, H, D), float("nan"), device="cuda",
                     dtype=torch.float16).transpose(1, 2)
    fa.attention_forward(q, k, v, out, causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
    assert (out.double() - ref.double()).abs().max().item() < ATOL["float16"]


@pytest.mark.gpu
def test_attention_gpu_strided_and_scale():
    torch = torch_or_skip()
    F = torch.nn.functional
    torch.manual_seed(1)
    B, S, H, D = 2, 512, 4, 128
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16).transpose(1, 2)
               for _ in range(3))
    out = fa.attention(q, k, v, causal=True, sm_scale=0.05)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.05)
    assert (out.double() - ref.double()).abs().max().item() < ATOL["float16"]
