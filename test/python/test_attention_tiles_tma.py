"""Attention written with pointers, as Triton's tutorial 06 writes it (the program moves K's
and V's bases to its batch and head, K is loaded transposed), copies K and V with the tensor
memory accelerator on sm_90a while knobs.compilation.tma_attention_tiles is on (the
default; KILN_TMA_ATTENTION_TILES=0 turns off -kiln-pointer-tiles-to-descriptors'
attention-tiles): K^T becomes the transpose of a descriptor block [BLOCK_N, D]
of a map over K's rows, at row coordinate off / stride_n + n, in a loop versioned on off
being whole rows (else the pointer loop runs: (B, S, H, D) storage, whose head offsets are
not). Checked here: the recipes and PTX for sm_90a, and the transformation's arithmetic on
the CPU backend, where the pass is forced on and every descriptor load is the masked load of
its block; (marker `gpu`) the tutorial's forward against torch by default. (Loops that
compute their pointers from the induction variable each iteration, as kiln_kernels'
pointer forward does, are not taken: the pass follows pointers a loop carries and advances.)"""
import os
import re
import sys

import numpy as np
import pytest

import kiln
import kiln.language as tl
import kiln.compiler.code_generator as code_generator
import kiln.runtime.jit as jit

from cuda_torch import torch_or_skip

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import cliff_sources_attention as ca  # noqa: E402
from test_cliff_attention import inputs, reference, relmax, strides  # noqa: E402


def attn_signature():
    sig = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "sm_scale": "fp32",
           "M": "*fp32:16", "Out": "*fp16:16"}
    for t in "qkvo":
        sig.update({f"stride_{t}{d}": "i32:16" for d in ("zhm" if t in "qo" else "zhn")})
        sig[f"stride_{t}d"] = "i32:1"
    sig.update(H="i32:16", N_CTX="i32:16")
    return sig


def compile_tutorial(attention_tiles, D=64, stage=1):
    """attention_tiles None: the knob as it is (its default)."""
    with kiln.knobs.compilation.scope():
        if attention_tiles is not None:
            kiln.knobs.compilation.tma_attention_tiles = attention_tiles
        return kiln.compile(ca.attn_fwd, signature=attn_signature(),
                            constexprs=dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=64, STAGE=stage),
                            target="sm_90a", num_warps=8, num_stages=3)


def test_tutorial_attention_copies_k_and_v_with_the_tma_on_sm90a():
    k = compile_tutorial(True)
    recipes = re.findall(r"kiln\.tensor_map_recipe = array<i64: ([0-9, -]+)>", k.asm["kiln"])
    # (kernel parameter numbers: the stride-1 parameters are constants, not parameters)
    names = [n for n, spec in attn_signature().items() if not spec.endswith(":1")]
    # K's map: base K, fp16, the block [BLOCK_N, D] (K^T's transpose), rows and columns
    # unbounded (the tutorial masks nothing), row stride stride_kn; V's the same over V.
    want = [[names.index("K"), ord("h"), 2, 64, 64, -2**31, -2**31, names.index("stride_kn")],
            [names.index("V"), ord("h"), 2, 64, 64, -2**31, -2**31, names.index("stride_vn")]]
    assert [[int(x) for x in r.split(",")] for r in recipes] == want
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in k.asm["ptx"]


def test_attention_tiles_on_by_default_and_the_knob_turns_them_off():
    assert kiln.knobs.compilation.tma_attention_tiles
    k = compile_tutorial(None)
    assert "tensor_map_recipe" in k.asm["kiln"]
    k = compile_tutorial(False)
    assert "tensor_map_recipe" not in k.asm["kiln"]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" not in k.asm["ptx"]


def bwd_signature():
    sig = {n: "*fp16:16" for n in ("Q", "K", "V", "DO", "DQ", "DK", "DV")}
    sig.update(sm_scale="fp32", M="*fp32:16", Delta="*fp32:16", stride_z="i32:16",
               stride_h="i32:16", stride_tok="i32:16", stride_d="i32:1", H="i32",
               N_CTX="i32:16")
    return sig


@pytest.mark.parametrize("D", [64, 128])
def test_tutorial_backward_tiles_two_dots_read(D):
    # The backward's loops read qT (loaded transposed) and do by two dots each, one of them
    # transposed back: at D 128 (rows of 256 bytes) both go to TMA rings the two dots share
    # (one copy each an iteration); at D 64 the loops keep cp.async (measured slower through
    # the TMA on the H100).
    k = kiln.compile(ca.attn_bwd, signature=bwd_signature(), target="sm_90a",
                     constexprs=dict(BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32,
                                     BLK_SLICE_FACTOR=2, HEAD_DIM=D, CAUSAL=True),
                     num_warps=8, num_stages=5)
    recipes = re.findall(r"kiln\.tensor_map_recipe = array<i64: ([-0-9, ]+)>", k.asm["kiln"])
    if D == 64:
        assert recipes == [] and "cp.async.bulk.tensor" not in k.asm["ptx"]
        return
    # qT and do (blocks [16, 128] on the diagonal, [32, 128] below it), K^T and V^T
    # ([16, 128] and [32, 128] in the dQ loops): eight maps, over rows of the (B H S, D) views.
    assert len(recipes) == 8, recipes
    assert {tuple(int(x) for x in r.split(", "))[3:5] for r in recipes} == {(16, 128),
                                                                            (32, 128)}
    assert "cp.async.bulk.tensor.2d.shared::cluster" in k.asm["ptx"]


@kiln.jit
def kt_from_iv(Q, K, V, Out, stride_h, stride_n, N_CTX, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, D: tl.constexpr):
    """out = q K^T V over whole key blocks, K^T and V read through pointers the body computes
    from the loop's start_n (FlashAttention-2's Triton style), not carried and advanced."""
    off_h = tl.program_id(1).to(tl.int64) * stride_h
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + off_h + offs_m[:, None] * stride_n + offs_d[None, :])
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    Kh = K + off_h
    Vh = V + off_h
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        kT = tl.load(Kh + offs_d[:, None] + cols[None, :] * stride_n)
        s = tl.dot(q, kT)
        v = tl.load(Vh + cols[:, None] * stride_n + offs_d[None, :])
        acc = tl.dot(s.to(v.dtype), v, acc)
    tl.store(Out + off_h + offs_m[:, None] * stride_n + offs_d[None, :], acc)


@pytest.fixture
def pass_on_the_cpu(monkeypatch):
    """The pass with attention-tiles on the CPU backend (it runs for sm_90a only): the maps
    are not encoded there and each descriptor load is its block's masked load, so results
    show whether the rewritten loop reads what the pointer loop read. Yields the recipes the
    front end hands the launcher."""
    monkeypatch.setattr(jit, "_tma_pointer_tiles", lambda arch: True)
    monkeypatch.setattr(kiln.knobs.compilation, "tma_attention_tiles", True)
    seen = []
    original = code_generator._launcher_recipe

    def record(kernel, recipe, arg_params):
        seen.append((kernel, tuple(recipe)))
        return original(kernel, recipe, arg_params)
    monkeypatch.setattr(code_generator, "_launcher_recipe", record)
    # compiled here, not taken from the IR cache, nor left in it or in the kernels' variants
    monkeypatch.setattr(jit, "load_ir", lambda key: None)
    monkeypatch.setattr(jit, "store_ir", lambda key, mlir, arg_params: None)
    kernels = (ca.attn_fwd, kt_from_iv)
    for k in kernels:
        k._clear_variants()
    yield seen
    for k in kernels:
        k._clear_variants()


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tutorial_forward_through_the_pass_on_cpu(pass_on_the_cpu, causal, layout):
    B, H, S, D = 2, 2, 64, 32
    if layout == "bshd":  # head offsets not whole rows: the loop as written runs
        q, k, v = (x.transpose(0, 2, 1, 3) for x in inputs((B, S, H, D), 9 + causal, 3))
    else:
        q, k, v = inputs((B, H, S, D), 9 + causal, 3)
    o = np.full(q.shape, np.nan, np.float16)
    m = np.full((B, H, S), np.nan, np.float32)
    ca.attn_fwd[(S // 32, B * H)](q, k, v, 0.2, m, o, *strides(q), *strides(k), *strides(v),
                                  *strides(o), H, S, HEAD_DIM=D, BLOCK_M=32, BLOCK_N=16,
                                  STAGE=3 if causal else 1, device="cpu")
    assert any(name == "attn_fwd" for name, _ in pass_on_the_cpu)
    ref_o, ref_m = reference(q, k, v, q, causal, 0.2)[:2]
    assert relmax(o, ref_o) < 1e-2
    np.testing.assert_allclose(m, ref_m, rtol=0, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tutorial_attention_with_attention_tiles_on_gpu(D, causal, layout):
    torch = torch_or_skip()
    import cliffs_attention as bench
    B, H, S = 2, 4, 1024
    torch.manual_seed(D + causal)
    shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.float16) for _ in range(3))
    if layout == "bshd":  # the loop as written runs (head offsets not whole rows)
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with kiln.knobs.compilation.scope():
        kiln.knobs.compilation.tma_attention_tiles = True
        for cfg in bench.FWD_CONFIGS:
            o = torch.full((B, H, S, D), float("nan"), device="cuda", dtype=torch.float16)
            m = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
            bench.fwd_launcher(ca, q, k, v, o, m, causal, cfg)()
            torch.cuda.synchronize()
            err = ((o.double() - ref.double()).norm() / ref.double().norm()).item()
            assert err < 5e-3, (cfg, err)


def test_pointers_from_the_induction_variable_through_the_pass_on_cpu(pass_on_the_cpu):
    # K^T and V become descriptor blocks at row coordinate off / stride_n + start_n; the
    # results match the pointer loop's.
    H, S, D = 2, 64, 32
    q, k, v = (x * 0.25 for x in inputs((H, S, D), 21, 3))
    out = np.full((H, S, D), np.nan, np.float32)
    kt_from_iv[(S // 32, H)](q, k, v, out, S * D, D, S, BLOCK_M=32, BLOCK_N=16, D=D,
                             device="cpu")
    assert [r for name, r in pass_on_the_cpu if name == "kt_from_iv"], pass_on_the_cpu
    want = np.einsum("hmd,hnd,hne->hme", q.astype(np.float64), k.astype(np.float64),
                     v.astype(np.float64))
    assert relmax(out, want) < 1e-2


def test_pointers_from_the_induction_variable_take_the_tma_on_sm90a():
    sig = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "Out": "*fp32:16",
           "stride_h": "i32:16", "stride_n": "i32:16", "N_CTX": "i32:16"}
    k = kiln.compile(kt_from_iv, signature=sig, target="sm_90a", num_warps=4, num_stages=3,
                     constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "D": 64})
    recipes = re.findall(r"kiln\.tensor_map_recipe = array<i64: ([-0-9, ]+)>", k.asm["kiln"])
    assert len(recipes) == 2, recipes  # K^T's block and V's, [64, 64] over K's and V's rows
    assert "cp.async.bulk.tensor.2d.shared::cluster" in k.asm["ptx"]
