"""kernels/python/kiln_models/ops: the dense ops of the model's hot path (issue #24).

CPU backend, against float64 numpy with the roundings HF makes in the activation dtype: rmsnorm
and add_rmsnorm, linear (decode rows 1/3/16 on CUDA cores and on tensor-core tiles with and
without split-K, prefill rows 64+, K and N not multiples of the tiles, fp32 and bf16, the
descriptor kernel), int8/int4 linears (both plans; every code in every field of a word),
silu_mul, embedding,
gather_rows, argmax (ties, NaN, -inf rows) and sample (top_k=1 is argmax, draws stay in the
top-k set and the nucleus, same seed and step same tokens, frequencies follow softmax);
argument errors. sm_90a PTX of the linear kernels (cp.async rings, wgmma, the TMA; the CUDA-core
kernels' loads). GPU (marker `gpu`): the same ops on torch CUDA tensors against torch, in
test_models_ops_gpu.py.
"""
import importlib
import os
import re
import sys

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))

from kiln_models import ops  # noqa: E402

# The modules (ops.linear is the function of that name).
lin = importlib.import_module("kiln_models.ops.linear")
sampling = importlib.import_module("kiln_models.ops.sampling")
quant = importlib.import_module("kiln_models.ops.quant")

bf16 = pytest.importorskip("ml_dtypes").bfloat16
DTYPES = {"fp32": np.float32, "bf16": bf16}


def f64(a):
    return np.asarray(a).astype(np.float64)


def rnd(a, dt):
    """float64 values rounded to dtype dt (as torch rounds each op's result)."""
    return f64(np.asarray(a).astype(dt))


def close(out, ref, dt, rel=None):
    """Elementwise: within 1e-5 (fp32) or 2 bf16 ulps of |ref| (+ a small absolute floor)."""
    rel = rel if rel is not None else (1e-5 if dt is np.float32 else 2 ** -7)
    err = np.abs(f64(out) - ref)
    bound = rel * np.abs(ref) + rel * 1e-2 * max(np.abs(ref).max(), 1.0)
    assert np.all(err <= bound), f"max excess {np.max(err - bound)} (max err {err.max()})"


def close_linear(out, ref, dt):
    """fp32: norm-wise relative error < 1e-6; bf16: each element within 2 ulps of the exact
    product rounded to bf16."""
    if dt is np.float32:
        assert np.linalg.norm(f64(out) - ref) / np.linalg.norm(ref) < 1e-6
    else:
        close(out, rnd(ref, dt), dt)


def hf_rmsnorm(h, w, eps, dt):
    hf = f64(h)
    y = rnd(hf / np.sqrt((hf * hf).mean(-1, keepdims=True) + eps), dt)
    return y * f64(w)


# ---------------------------------------------------------------- norms

@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
@pytest.mark.parametrize("shape", [(1, 40), (3, 300), (16, 64)], ids=lambda s: "x".join(map(str, s)))
def test_rmsnorm_cpu(dt, shape):
    dt = DTYPES[dt]
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dt)
    w = (1 + 0.1 * rng.standard_normal(shape[1])).astype(dt)
    out = np.full(shape, np.nan, dt)
    assert ops.rmsnorm(x, w, out, 1e-5) is out
    close(out, hf_rmsnorm(x, w, 1e-5, dt), dt)


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
@pytest.mark.parametrize("shape", [(2, 48), (3, 300)], ids=lambda s: "x".join(map(str, s)))
def test_add_rmsnorm_cpu(dt, shape):
    dt = DTYPES[dt]
    rng = np.random.default_rng(7 + sum(shape))
    x = rng.standard_normal(shape).astype(dt)
    res = rng.standard_normal(shape).astype(dt)
    w = rng.standard_normal(shape[1]).astype(dt)
    want_res = (f64(res) + f64(x)).astype(dt)
    ops.add_rmsnorm(x, res, w, x, 1e-6)  # out over x, as the model's layer loop does
    np.testing.assert_array_equal(res, want_res)
    close(x, hf_rmsnorm(want_res, w, 1e-6, dt), dt)


# ---------------------------------------------------------------- linear

LINEAR_SHAPES = [(1, 40, 72), (3, 33, 300), (16, 70, 64), (64, 96, 130), (70, 50, 40)]


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
@pytest.mark.parametrize("shape", LINEAR_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_linear_cpu(dt, shape):
    dt = DTYPES[dt]
    M, N, K = shape
    rng = np.random.default_rng(M * N + K)
    x = rng.standard_normal((M, K)).astype(dt)
    w = rng.standard_normal((N, K)).astype(dt)
    ref = f64(x) @ f64(w).T
    # Both decode plans (CUDA cores, tensor-core tiles) for batches of up to 64 rows.
    for gemv in ((None,) if M > lin.DECODE_MAX_M else (True, False)):
        n_scratch = lin.linear_scratch_numel(M, N, K, cpu=True, gemv=gemv)
        for scratch in (None, np.zeros(max(n_scratch, 1), np.float32)):
            out = np.full((M, N), np.nan, dt)
            assert ops.linear(x, w, out, scratch=scratch, gemv=gemv) is out
            close_linear(out, ref, dt)


def test_linear_split_k_cpu():
    # K split over programs (fp32 partials in scratch, then the ordered reduce).
    M, N, K = 2, 20, 520
    cfg = lin.linear_config(M, N, K, itemsize=4, cpu=True, gemv=False)
    assert cfg["splits"] > 1 and cfg["k_split"] % cfg["BLOCK_K"] == 0
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    scratch = np.full(lin.linear_scratch_numel(M, N, K, cpu=True, gemv=False), np.nan,
                      np.float32)
    out = np.zeros((M, N), np.float32)
    ops.linear(x, w, out, scratch=scratch, gemv=False)
    close_linear(out, f64(x) @ f64(w).T, np.float32)
    assert not np.isnan(scratch[:cfg["splits"] * M * N]).any()


def test_linear_bf16_to_fp32_out_cpu():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 64)).astype(bf16)
    w = rng.standard_normal((24, 64)).astype(bf16)
    out = np.zeros((3, 24), np.float32)
    ops.linear(x, w, out)
    close_linear(out, f64(x) @ f64(w).T, np.float32)


def test_linear_descriptor_kernel_cpu():
    # The prefill TMA kernel (taken on the GPU for aligned 16-bit operands) on the CPU backend.
    M, N, K = 70, 40, 48
    rng = np.random.default_rng(11)
    x = rng.standard_normal((M, K)).astype(bf16)
    w = rng.standard_normal((N, K)).astype(bf16)
    out = np.full((M, N), np.nan, bf16)
    desc = lin._desc  # the descriptors `linear` makes
    grid = (kiln.cdiv(M, 32) * kiln.cdiv(N, 32),)
    lin.linear_tma_kernel[grid](desc(x, [32, 16]), desc(w, [32, 16]), desc(out, [32, 32]), M, N,
                                K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, device="cpu")
    close(out, rnd(f64(x) @ f64(w).T, bf16), bf16)


LLAMA_1B = {"qkv": (3072, 2048), "o": (2048, 2048), "gate_up": (16384, 2048),
            "down": (2048, 8192), "lm_head": (128256, 2048)}


def test_linear_config_llama_1b():
    # Tensor-core decode: the narrow-N layers split K to give ~2 programs per SM; the wide
    # ones do not.
    plans = {name: lin.linear_config(1, n, k, gemv=False) for name, (n, k) in LLAMA_1B.items()}
    assert [plans[n]["splits"] for n in LLAMA_1B] == [6, 8, 1, 9, 1]
    for p in plans.values():
        assert p["BLOCK_M"] == 64 and p["k_split"] % p["BLOCK_K"] == 0
        assert p["kernel"] == "tiles"
    assert lin.linear_config(1, 2048, 2048, split_ok=False, gemv=False)["splits"] == 1
    assert lin.linear_config(8192, 16384, 2048)["BLOCK_N"] == 256
    assert lin.linear_config(32, 2048, 2048)["BLOCK_M"] == 64  # batches up to 64: decode plan
    assert lin.linear_config(32, 2048, 2048)["splits"] == 8
    assert lin.linear_config(65, 2048, 2048)["BLOCK_M"] == 128
    assert lin.linear_scratch_numel(16, 2048, 8192) == 9 * 16 * 2048
    # CUDA cores by default up to 4 rows (forced up to 64), no K split: N / R programs, each
    # of 4 warps, fill the 132 SMs (512 for o_proj and down).
    assert lin.linear_config(4, 2048, 2048)["kernel"] == "gemv"
    assert lin.linear_config(5, 2048, 2048)["kernel"] == "tiles"
    assert lin.linear_config(64, 2048, 2048, gemv=True)["kernel"] == "gemv"
    assert lin.linear_config(65, 2048, 2048, gemv=True)["kernel"] == "tiles"
    gemv = {name: lin.linear_config(1, n, k) for name, (n, k) in LLAMA_1B.items()}
    assert [gemv[n]["programs"] for n in LLAMA_1B] == [768, 512, 4096, 512, 32064]
    assert all(p["splits"] == 1 and p["C"] * p["E"] == 1024 for p in gemv.values())
    assert lin.linear_scratch_numel(1, 2048, 8192) == 0
    assert lin.gemv_config(16, 2048, 2048)["programs"] == 1024 * 4  # 4 blocks of 4 rows


def test_fp16_cpu():
    # fp16 activations through the same kernels (one shape each).
    rng = np.random.default_rng(13)
    x = rng.standard_normal((3, 72)).astype(np.float16)
    w = rng.standard_normal((40, 72)).astype(np.float16)
    out = np.zeros((3, 40), np.float16)
    ops.linear(x, w, out)
    close(out, rnd(f64(x) @ f64(w).T, np.float16), np.float16, rel=2 ** -9)
    g = (1 + 0.1 * rng.standard_normal(72)).astype(np.float16)
    y = np.zeros_like(x)
    ops.rmsnorm(x, g, y, 1e-6)
    close(y, hf_rmsnorm(x, g, 1e-6, np.float16), np.float16, rel=2 ** -9)
    gu = rng.standard_normal((3, 80)).astype(np.float16)
    o = np.zeros((3, 40), np.float16)
    ops.silu_mul(gu, o)
    gg = f64(gu[:, :40])
    close(o, rnd(gg / (1 + np.exp(-gg)), np.float16) * f64(gu[:, 40:]), np.float16, rel=2 ** -9)


# ---------------------------------------------------------------- elementwise

@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_silu_mul_cpu(dt):
    dt = DTYPES[dt]
    rng = np.random.default_rng(1)
    gu = (2 * rng.standard_normal((3, 2 * 150))).astype(dt)
    out = np.zeros((3, 150), dt)
    ops.silu_mul(gu, out)
    g = f64(gu[:, :150])
    ref = rnd(g / (1 + np.exp(-g)), dt) * f64(gu[:, 150:])
    close(out, ref, dt)


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_embedding_and_gather_rows_cpu(dt):
    dt = DTYPES[dt]
    rng = np.random.default_rng(2)
    table = rng.standard_normal((50, 200)).astype(dt)
    ids = np.array([3, 0, 49, 7, 50, -1], np.int32)
    out = np.full((6, 200), 9, dt)
    ops.embedding(ids, table, out)
    np.testing.assert_array_equal(out[:4], table[ids[:4]])
    assert (f64(out[4:]) == 0).all()  # ids outside the table: zero rows, no stray read
    rows = np.array([5, 1], np.int32)
    g = np.zeros((2, 200), dt)
    ops.gather_rows(out, rows, g)
    np.testing.assert_array_equal(g, out[[5, 1]])


# ---------------------------------------------------------------- argmax and sampling

@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_argmax_cpu(dt):
    dt = DTYPES[dt]
    rng = np.random.default_rng(4)
    V = 1000  # 4 steps of 2 x 128 on the CPU, the last partial
    logits = rng.standard_normal((5, V)).astype(dt)
    logits[1, [10, 600, 999]] = 50.0  # ties: the first index
    logits[2, 700] = np.nan  # NaN wins (torch.argmax)
    logits[2, 800] = np.nan
    logits[3] = -np.inf  # no numbers: index 0
    logits[4, 999] = 60.0
    out = np.full(5, -7, np.int32)
    ops.argmax(logits, out)
    assert out.tolist() == [int(np.argmax(f64(logits[0]))), 10, 700, 0, 999]


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_argmax_split_cpu(dt):
    # Rows split into ranges (4 at B = 1 and 2 at B = 6 on the CPU plan), then combined: ties
    # in two ranges (the first index), a NaN after a larger number and NaNs in two ranges (the
    # first NaN), -inf rows, the maximum in the last, partial range; the same as unsplit.
    dt = DTYPES[dt]
    rng = np.random.default_rng(14)
    V = 1000
    logits = rng.standard_normal((6, V)).astype(dt)
    logits[1, [10, 600, 999]] = 50.0
    logits[2, [800, 300]] = np.nan
    logits[2, 100] = 80.0
    logits[3] = -np.inf
    logits[4, 999] = 60.0
    logits[5, [300, 900]] = 70.0
    want = [int(np.argmax(f64(logits[0]))), 10, 300, 0, 999, 300]
    for B in (1, 6):
        plan = sampling.argmax_plan(B, V, cpu=True)
        assert plan[3] == (4 if B == 1 else 2)
        n = sampling.argmax_scratch_numel(B, V, cpu=True)
        for row in range(0, 6, B):
            out = np.full(B, -7, np.int32)
            ops.argmax(logits[row:row + B], out, scratch=np.full(n, np.nan, np.float32))
            assert out.tolist() == want[row:row + B], (B, row)
    with pytest.raises(ValueError, match="argmax: expected 'scratch' of dtype float32 with at"):
        ops.argmax(logits, np.zeros(6, np.int32), scratch=np.zeros(23, np.float32))
    # sample() at temperature 0 splits through its scratch of B * V.
    out = np.full(6, -7, np.int32)
    ops.sample(logits, out, 0.0, 0, 1.0, 0, 0, scratch=np.zeros(6 * V, np.float32))
    assert out.tolist() == want


def _sample_rows(logits, temperature, top_k, top_p, seed, step):
    B, V = logits.shape
    out = np.full(B, -1, np.int32)
    ops.sample(logits, out, temperature, top_k, top_p, seed, step,
               scratch=np.zeros(B * V, np.float32))
    return out


def _probs(row, temperature):
    p = np.exp((f64(row) - f64(row).max()) / temperature)
    return p / p.sum()


def test_sample_top_k_1_is_argmax_cpu():
    rng = np.random.default_rng(6)
    logits = rng.standard_normal((4, 700)).astype(np.float32)
    greedy = ops.argmax(logits, np.zeros(4, np.int32))
    for step in range(3):
        np.testing.assert_array_equal(_sample_rows(logits, 1.5, 1, 1.0, 9, step), greedy)
    np.testing.assert_array_equal(_sample_rows(logits, 0.0, 0, 1.0, 9, 0), greedy)  # T=0


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_sample_stays_in_top_k_and_nucleus_cpu(dt):
    dt = DTYPES[dt]
    rng = np.random.default_rng(8)
    B, V = 64, 600
    row = (2 * rng.standard_normal(V)).astype(dt)
    logits = np.tile(row, (B, 1))  # one row, 64 independent draws (Philox counter has the row)
    order = np.argsort(-f64(row), kind="stable")
    topk = set(order[:10].tolist())
    toks = _sample_rows(logits, 0.8, 10, 1.0, 123, 0)
    assert set(toks.tolist()) <= topk and len(set(toks.tolist())) > 3
    p = _probs(row, 0.8)
    cum = np.cumsum(p[order])
    nucleus = set(order[:np.searchsorted(cum, 0.6) + 1].tolist())
    toks = _sample_rows(logits, 0.8, 0, 0.6, 123, 1)
    assert set(toks.tolist()) <= nucleus and len(set(toks.tolist())) > 1
    # Both: top-p over the renormalized top-5 set.
    p5 = p[order[:5]] / p[order[:5]].sum()
    both = set(order[:np.searchsorted(np.cumsum(p5), 0.5) + 1].tolist())
    toks = _sample_rows(logits, 0.8, 5, 0.5, 123, 2)
    assert set(toks.tolist()) <= both


def test_sample_top_k_beyond_the_lanes_and_ties_cpu():
    # k larger than the CPU tile (256 lanes: no candidate bound, every e searched), and a
    # row of ties at the k-th value (all of them stay in, as HF keeps them).
    rng = np.random.default_rng(9)
    B, V = 32, 600
    row = rng.standard_normal(V).astype(np.float32)
    order = np.argsort(-row, kind="stable")
    toks = _sample_rows(np.tile(row, (B, 1)), 5.0, 300, 1.0, 77, 0)
    assert set(toks.tolist()) <= set(order[:300].tolist())
    tied = np.zeros(V, np.float32)
    tied[[5, 100, 400, 599]] = 1.0  # four tokens tie at the top; top_k=2 keeps all four
    toks = _sample_rows(np.tile(tied, (B, 1)), 1.0, 2, 1.0, 78, 0)
    assert set(toks.tolist()) == {5, 100, 400, 599}


def test_sample_is_deterministic_cpu():
    rng = np.random.default_rng(10)
    logits = rng.standard_normal((8, 300)).astype(np.float32)
    a = _sample_rows(logits, 1.0, 0, 1.0, 42, 5)
    np.testing.assert_array_equal(a, _sample_rows(logits, 1.0, 0, 1.0, 42, 5))
    step = np.array([5], np.int32)  # the step read on the device
    np.testing.assert_array_equal(a, _sample_rows(logits, 1.0, 0, 1.0, 42, step))
    others = [_sample_rows(logits, 1.0, 0, 1.0, 42, s) for s in (6, 7)]
    others.append(_sample_rows(logits, 1.0, 0, 1.0, 43, 5))
    assert all(not np.array_equal(a, o) for o in others)


def test_sample_keys_make_a_draw_independent_of_its_row_cpu():
    # keys[b] replaces the row in the draw's Philox counter: a request keeps its samples
    # whatever its row in the batch (a stop token shifting the rows after it, say)
    rng = np.random.default_rng(5)
    V = 300
    row, other = (rng.standard_normal(V).astype(np.float32) * 3 for _ in range(2))
    out = np.full(3, -1, np.int32)
    ops.sample(np.stack([row, other, row]), out, 1.0, 0, 1.0, 9, 3,
               scratch=np.zeros(3 * V, np.float32), keys=np.array([11, 4, 11], np.int32))
    alone = [_sample_keyed(row, k) for k in (11, 4)]
    assert out[0] == out[2] == alone[0]
    assert out[1] == _sample_keyed(other, 4)
    assert len({_sample_keyed(row, k) for k in range(24)}) > 1  # keys draw differently
    with pytest.raises(ValueError, match="keys"):
        ops.sample(row[None], np.zeros(1, np.int32), 1.0, 0, 1.0, 9, 3,
                   scratch=np.zeros(V, np.float32), keys=np.zeros(2, np.int32))


def _sample_keyed(row, key):
    out = np.full(1, -1, np.int32)
    ops.sample(row[None], out, 1.0, 0, 1.0, 9, 3, scratch=np.zeros(row.size, np.float32),
               keys=np.array([key], np.int32))
    return int(out[0])


def test_sample_follows_softmax_cpu():
    # 2048 draws of a 6-token distribution (one row per draw): frequencies within 4 sigma.
    row = np.array([2.0, 1.0, 0.5, 0.0, -1.0, -3.0], np.float32)
    B = 2048
    toks = _sample_rows(np.tile(row, (B, 1)), 1.3, 0, 1.0, 2024, 0)
    p = _probs(row, 1.3)
    freq = np.bincount(toks, minlength=6) / B
    assert np.all(np.abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / B) + 1e-3), (freq, p)


# ---------------------------------------------------------------- weight-only quantization

def test_quantizers_cpu():
    rng = np.random.default_rng(12)
    w = rng.standard_normal((6, 256)).astype(np.float32)
    w[2] = 0.0  # a zero row keeps a finite scale
    q, s = quant.quantize_int8(w)
    assert q.dtype == np.int8 and s.shape == (6,) and np.abs(q).max() <= 127
    assert np.all(np.abs(quant.dequantize_int8(q, s) - w) <= s[:, None] / 2 + 1e-7)
    p, s4 = quant.quantize_int4(w, 128)
    assert p.dtype == np.uint8 and p.shape == (6, 128) and s4.shape == (6, 2)
    err = np.abs(quant.dequantize_int4(p, s4, 128) - w)
    assert np.all(err <= np.repeat(s4, 128, axis=1) / 2 + 1e-7)
    # Packing: k even in the low nibble, k odd in the high one, q + 8.
    p1, s1 = quant.quantize_int4(np.array([[7.0, -8.0, 0.0, 1.0]], np.float32), 4)
    # scale 8/7: q = round([6.125, -7, 0, 0.875]) = [6, -7, 0, 1], stored [14, 1, 8, 9]
    assert np.isclose(s1[0, 0], 8.0 / 7.0) and p1.tolist() == [[14 | (1 << 4), 8 | (9 << 4)]]
    with pytest.raises(ValueError, match="quantize_int4: expected an even group dividing K"):
        quant.quantize_int4(w, 100)
    with pytest.raises(ValueError, match="quantize_int8: expected finite weights"):
        quant.quantize_int8(np.full((2, 2), np.nan, np.float32))


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
@pytest.mark.parametrize("shape", [(1, 40, 256), (3, 33, 128), (20, 50, 256)],
                         ids=lambda s: "x".join(map(str, s)))
def test_linear_int8_int4_cpu(dt, shape):
    dt = DTYPES[dt]
    M, N, K = shape
    rng = np.random.default_rng(M + N + K)
    w = rng.standard_normal((N, K)).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(dt)
    q, s = quant.quantize_int8(w)
    p, s4 = quant.quantize_int4(w, 64)
    ref8 = f64(x) @ f64(quant.dequantize_int8(q, s)).T
    ref4 = f64(x) @ f64(quant.dequantize_int4(p, s4, 64)).T
    splits = 0
    # gemv True: the CUDA-core kernels (bit tricks on 32-bit words); False: tensor-core tiles,
    # with scratch their K split over programs, then reduced.
    for gemv, use_scratch in ((True, False), (False, False), (False, True)):
        n8 = quant.quant_scratch_numel(M, N, K, cpu=True, gemv=gemv)
        n4 = quant.quant_scratch_numel(M, N, K, group=64, cpu=True, gemv=gemv)
        splits += n8 + n4
        out = np.full((M, N), np.nan, dt)
        quant.linear_int8(x, q, s, out, scratch=np.zeros(n8 + 1, np.float32) if use_scratch
                          else None, gemv=gemv)
        close_linear(out, ref8, dt)
        out = np.full((M, N), np.nan, dt)
        quant.linear_int4(x, p, s4, out, group=64, scratch=np.zeros(n4 + 1, np.float32)
                          if use_scratch else None, gemv=gemv)
        close_linear(out, ref4, dt)
    assert splits > 0 or M > 1  # the one-row case splits K


def test_int4_groups_below_a_step_cpu():
    # A group of 32 or 64 below the GPU tile kernels' K step of 128 takes a step per group
    # (their two dots of K / 2 need K >= 32) instead of an error (the GPU twin:
    # test_fused_swiglu_changes_no_result's int4 model, group 32); smaller groups are a
    # clear error off the CUDA-core plan.
    for M in (8, 4096):
        for g in (32, 64):
            assert quant._plan(M, 2048, 2048, False, 132, False, g)[0]["BLOCK_K"] == g
    rng = np.random.default_rng(13)
    w = rng.standard_normal((24, 96)).astype(np.float32)
    p, s4 = quant.quantize_int4(w, 16)
    with pytest.raises(ValueError, match="expected a group that is a multiple of 32, found 16"):
        quant.linear_int4(np.zeros((5, 96), np.float32), p, s4, np.zeros((5, 24), np.float32),
                          group=16, gemv=False)


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_gemv_int_fields_cpu(dt):
    # The CUDA-core kernels read every field of a word: random codes (every int8 from -128 to
    # 127, every nibble 0..15) in every byte and nibble position, a group of one word (8),
    # rows and words past the tile (masked), several K steps (K = 1000: 125 int4 / 250 int8
    # words on C = 16).
    dt = DTYPES[dt]
    rng = np.random.default_rng(21)
    M, N, K = 3, 13, 1000
    x = rng.standard_normal((M, K)).astype(dt)
    q = rng.integers(-128, 128, size=(N, K)).astype(np.int8)
    s = rng.uniform(0.5, 2.0, N).astype(np.float32)
    assert q.min() == -128 and q.max() == 127
    out = np.full((M, N), np.nan, dt)
    quant.linear_int8(x, q, s, out, gemv=True)
    close_linear(out, f64(x) @ f64(quant.dequantize_int8(q, s)).T, dt)
    p = rng.integers(0, 256, size=(N, K // 2)).astype(np.uint8)
    s4 = rng.uniform(0.5, 2.0, (N, K // 8)).astype(np.float32)
    out = np.full((M, N), np.nan, dt)
    quant.linear_int4(x, p, s4, out, group=8, gemv=True)
    close_linear(out, f64(x) @ f64(quant.dequantize_int4(p, s4, 8)).T, dt)


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_quantized_lm_head_cpu(kind):
    # With quant the LM head is quantized too, here the tied embedding's own copy (the lookups
    # keep the dense table): the logits are those of the dequantized weights, head included,
    # and near the dense model's, in fp32 and in bf16 (relative errors printed).
    from kiln_models import checkpoint, reference
    from kiln_models.config import preset
    from kiln_models.model import LlamaModel
    c = preset("tiny").replace(hidden_size=128, intermediate_size=256, head_dim=32)
    assert c.tie_word_embeddings
    weights = checkpoint.random_weights(c, seed=3)

    def dq(w):
        return quant.dequantize_int8(*quant.quantize_int8(w)) if kind == "int8" else \
            quant.dequantize_int4(*quant.quantize_int4(w, 128), 128)

    deq = {n: dq(w) if n.startswith("model.layers.") and n.endswith("_proj.weight") else w
           for n, w in weights.items()}
    deq["lm_head.weight"] = dq(weights["model.embed_tokens.weight"])
    ids = np.random.default_rng(5).integers(0, c.vocab_size, 12)
    exact = reference.ReferenceLlama(c.replace(tie_word_embeddings=False), deq).forward(ids)[-1]
    dense = reference.ReferenceLlama(c, weights).forward(ids)[-1]

    def logits(dtype, **kw):
        m = LlamaModel(c, weights, dtype=dtype, max_batch=1, max_tokens=16, max_seq_len=16,
                       **kw)
        return m, m.logits_numpy(m.prefill([("a", ids)]))[0].astype(np.float64)

    def rel(a, b):
        return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))

    model, got = logits("fp32", quant=kind)
    assert isinstance(model.lm_head, tuple) and model.lm_head[0] == kind
    errs = {"fp32 vs dequantized": rel(got, exact), "fp32 vs dense": rel(got, dense)}
    _, dense_head = logits("fp32", quant=kind, quant_head=False)  # the previous behaviour
    errs["fp32 dense head vs dense"] = rel(dense_head, dense)
    _, bf = logits("bf16")
    _, bq = logits("bf16", quant=kind)
    errs["bf16 vs bf16 dense"] = rel(bq, bf)
    print(kind, ", ".join(f"{k}: {v:.2e}" for k, v in errs.items()))
    assert errs["fp32 vs dequantized"] <= 1e-4
    bound = 2e-2 if kind == "int8" else 0.4  # random N(0, 0.02) weights: int4's rounding shows
    assert errs["fp32 vs dense"] <= bound and errs["bf16 vs bf16 dense"] <= bound + 1e-2


def test_quant_errors():
    x = np.zeros((2, 128), np.float32)
    out = np.zeros((2, 8), np.float32)
    with pytest.raises(TypeError, match="linear_int8: expected 'q' of dtype int8"):
        quant.linear_int8(x, np.zeros((8, 128), np.uint8), np.ones(8, np.float32), out)
    with pytest.raises(ValueError, match=r"linear_int8: expected 'scales' of shape \[8\]"):
        quant.linear_int8(x, np.zeros((8, 128), np.int8), np.ones(7, np.float32), out)
    with pytest.raises(ValueError, match=r"linear_int4: expected 'x' of shape \[2, 256\]"):
        quant.linear_int4(x, np.zeros((8, 128), np.uint8), np.ones((8, 2), np.float32), out)
    with pytest.raises(ValueError, match="linear_int4: expected a group that divides K = 128"):
        quant.linear_int4(x, np.zeros((8, 64), np.uint8), np.ones((8, 2), np.float32), out,
                          group=48)
    x96 = np.zeros((2, 96), np.float32)
    with pytest.raises(ValueError, match="linear_int4: expected a group that is a multiple of 32"):
        quant.linear_int4(x96, np.zeros((8, 48), np.uint8), np.ones((8, 2), np.float32), out,
                          group=48, gemv=False)
    # A group that splits 32-bit words (4) takes the tile kernel even where gemv is asked.
    assert not quant._takes_gemv(1, 96, 4, True) and quant._takes_gemv(1, 96, 8, True)
    assert not quant._takes_gemv(1, 98, None, True) and quant._takes_gemv(4, 96, None, None)
    assert not quant._takes_gemv(5, 96, None, None) and quant._takes_gemv(16, 96, None, True)
    buf = np.zeros(8 * 96 + 1, np.int8)  # codes at an odd address: not read as int32 words
    assert not quant._takes_gemv(1, 96, None, True, buf[1:].reshape(8, 96))
    assert quant._takes_gemv(1, 96, None, True, buf[:-1].reshape(8, 96)) == \
        (quant._address(buf) % 4 == 0)
    with pytest.raises(ValueError, match="linear_int8: expected 'scratch' of at least"):
        quant.linear_int8(np.zeros((1, 256), np.float32), np.zeros((40, 256), np.int8),
                          np.ones(40, np.float32), np.zeros((1, 40), np.float32),
                          scratch=np.zeros(3, np.float32), gemv=False)


def test_quant_ptx_sm90a():
    sig = {"x_ptr": "*bf16:16", "q_ptr": "*i8:16", "s_ptr": "*fp32:16", "out_ptr": "*bf16:16",
           "part_ptr": "*fp32:16", "M": "i32", "N": "i32:16", "K": "i32:16",
           "K_SPLIT": "i32:16"}
    cfg = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1, "SPLIT": True}
    k = kiln.compile(quant.linear_int8_kernel, signature=sig, constexprs=cfg, target="sm_90a",
                     num_warps=4, num_stages=4)
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in k.asm["ptx"]
    assert "ld.global.v4.b32" in k.asm["ptx"]  # 16-byte loads of the int8 rows
    prefill, _, _, _ = quant._plan(4096, 2048, 2048, False, 132, False, None)
    k = kiln.compile(quant.linear_int8_kernel, signature=sig, constexprs={
        n: prefill[n] for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")} | {"SPLIT": False},
        target="sm_90a", num_warps=prefill["num_warps"], num_stages=prefill["num_stages"])
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in k.asm["ptx"]
    sig = {"x_ptr": "*bf16:16", "p_ptr": "*u8:16", "s_ptr": "*fp32:16", "out_ptr": "*bf16:16",
           "part_ptr": "*fp32:16", "M": "i32", "N": "i32:16", "K": "i32:16",
           "K_SPLIT": "i32:16", "K_PACKED": "i32:16", "K_SPLIT_PACKED": "i32:16",
           "N_GROUPS": "i32:16", "GROUP": "i32:16"}
    k = kiln.compile(quant.linear_int4_kernel, signature=sig, constexprs=cfg, target="sm_90a",
                     num_warps=4, num_stages=4)
    ptx = k.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in ptx
    assert "ld.global.v4.b32" in ptx and "ld.global.b8" not in ptx  # packed rows, 16 bytes


def _gemv_ptx(kind, M, N, K):
    cfg = lin.gemv_config(M, N, K, kind)
    consts = {n: cfg[n] for n in ("BM", "R", "C", "EVEN")}
    if kind == "float":
        sig = {"x_ptr": "*bf16:16", "w_ptr": "*bf16:16", "out_ptr": "*bf16:16",
               "g_ptr": "*bf16:16", "eps": "fp32", "M": "i32", "N": "i32:16", "K": "i32:16"}
        kernel, consts = lin.gemv_kernel, consts | {"E": cfg["E"]}
    else:
        sig = {"x_ptr": "*bf16:16", "q_ptr" if kind == "int8" else "p_ptr":
               "*i8:16" if kind == "int8" else "*u8:16", "s_ptr": "*fp32:16",
               "out_ptr": "*bf16:16", "g_ptr": "*bf16:16", "eps": "fp32", "M": "i32",
               "N": "i32:16", "K": "i32:16", "KW": "i32:16"}
        kernel = quant.gemv_int8_kernel
        if kind == "int4":
            sig["N_GROUPS"] = "i32:16"
            kernel, consts = quant.gemv_int4_kernel, consts | {"GROUP_WORDS": 16}
    k = kiln.compile(kernel, signature=sig, constexprs=consts, target="sm_90a",
                     num_warps=cfg["num_warps"])
    return cfg, k.asm["ptx"]


def test_gemv_ptx_sm90a():
    # o_proj at one row: every thread has R rows x 2 pieces of weights in flight (16-byte
    # loads of bf16, 4-byte words of int8/int4, marked evict-first), x in 16-byte (bf16
    # pieces, int4 words) or 8-byte (int8) loads, the first step's before the loop (its block
    # ends at the loop's first label) and the next step's in it; no tensor cores, no cp.async,
    # and the int fields become floats without I2F conversions.
    hint = "ld.global.L2::cache_hint"
    for kind, weight_load, x_load in (("float", hint + ".v4.b32", r"ld\.global\.v4\.b32"),
                                      ("int8", hint + ".b32", r"ld\.global\.(v2\.b32|v4\.b16)"),
                                      ("int4", hint + ".b32", r"ld\.global\.v4\.b32")):
        cfg, ptx = _gemv_ptx(kind, 1, 2048, 2048)
        u = cfg["C"] // 128  # pieces per lane and row (4 warps)
        before_loop = ptx[:re.search(r"^\$L__BB\d+_\d+:", ptx, re.M).start()]
        assert ptx.count(weight_load) == 2 * cfg["R"] * u, kind
        assert before_loop.count(weight_load) == cfg["R"] * u, kind
        assert len(re.findall(x_load, ptx)) == 2 * u, kind  # u pieces of x a thread and step
        assert "wgmma" not in ptx and "cp.async" not in ptx
        assert "cvt.rn.f32.s32" not in ptx and "cvt.rn.f32.u32" not in ptx
    cfg, ptx = _gemv_ptx("int4", 4, 2048, 2048)  # 4 rows of x share each word's fields
    assert cfg["BM"] == 4 and ptx.count("fma.rn.f32") >= 4 * 8 * cfg["R"] * cfg["C"] // 128


# ---------------------------------------------------------------- errors

def test_errors():
    x = np.zeros((3, 64), np.float32)
    w = np.zeros((32, 64), np.float32)
    out = np.zeros((3, 32), np.float32)
    with pytest.raises(ValueError, match=r"linear: expected 'w' of shape \[\*, 64\], found \[32, 60\]"):
        ops.linear(x, np.zeros((32, 60), np.float32), out)
    with pytest.raises(ValueError, match=r"linear: expected 'out' of shape \[3, 32\]"):
        ops.linear(x, w, np.zeros((3, 31), np.float32))
    with pytest.raises(TypeError, match="linear: expected 'x' and 'w' of one dtype"):
        ops.linear(x, w.astype(bf16), out)
    with pytest.raises(TypeError, match="linear: expected 'x' of dtype float32 or bfloat16"):
        ops.linear(x.astype(np.float64), w, out)
    with pytest.raises(ValueError, match="linear: expected 'x' to be contiguous"):
        ops.linear(np.zeros((3, 128), np.float32)[:, ::2], w, out)
    sq = np.zeros((3, 3), np.float32)
    with pytest.raises(ValueError, match="linear: expected 'out' to be another array than"):
        ops.linear(sq, np.zeros((3, 3), np.float32), sq)
    with pytest.raises(TypeError, match="linear: expected 'x' to be an array"):
        ops.linear([[1.0]], w, out)
    with pytest.raises(ValueError, match="linear: expected 'scratch' of at least"):
        ops.linear(np.zeros((2, 520), np.float32), np.zeros((20, 520), np.float32),
                   np.zeros((2, 20), np.float32), scratch=np.zeros(4, np.float32), gemv=False)
    with pytest.raises(ValueError, match=r"rmsnorm: expected 'w' of shape \[64\]"):
        ops.rmsnorm(x, np.zeros(65, np.float32), x, 1e-6)
    with pytest.raises(TypeError, match="rmsnorm: expected one activation dtype"):
        ops.rmsnorm(x, w[0], x.astype(bf16), 1e-6)
    with pytest.raises(ValueError, match="rmsnorm: expected 'eps' in"):
        ops.rmsnorm(x, w[0], x, -1.0)
    with pytest.raises(ValueError, match="add_rmsnorm: expected 'out' to be another array"):
        res = x.copy()
        ops.add_rmsnorm(x, res, w[0], res, 1e-6)
    with pytest.raises(ValueError, match=r"silu_mul: expected 'gate_up' of shape \[T, 2I\]"):
        ops.silu_mul(np.zeros((2, 7), np.float32), np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="embedding: expected 'ids' of dtype int32"):
        ops.embedding(np.zeros(3, np.int64), w, np.zeros((3, 64), np.float32))
    with pytest.raises(ValueError, match=r"gather_rows: expected 'out' of shape \[2, 64\]"):
        ops.gather_rows(x, np.zeros(2, np.int32), np.zeros((3, 64), np.float32))
    logits = np.zeros((2, 10), np.float32)
    o = np.zeros(2, np.int32)
    sc = np.zeros(20, np.float32)
    with pytest.raises(ValueError, match=r"argmax: expected 'out' of shape \[2\]"):
        ops.argmax(logits, np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="sample: expected 'temperature' in"):
        ops.sample(logits, o, -0.5, 0, 1.0, 0, 0, scratch=sc)
    with pytest.raises(ValueError, match="sample: expected 'top_p' in"):
        ops.sample(logits, o, 1.0, 0, 0.0, 0, 0, scratch=sc)
    with pytest.raises(ValueError, match="sample: expected 'top_k' to be a non-negative int"):
        ops.sample(logits, o, 1.0, -2, 1.0, 0, 0, scratch=sc)
    with pytest.raises(ValueError, match="sample: expected 'scratch', an fp32 array"):
        ops.sample(logits, o, 1.0, 0, 1.0, 0, 0)
    with pytest.raises(ValueError, match="sample: expected 'scratch' of dtype float32 with at least"):
        ops.sample(logits, o, 1.0, 0, 1.0, 0, 0, scratch=np.zeros(19, np.float32))
    with pytest.raises(ValueError, match="sample: expected 'step' to be an int"):
        ops.sample(logits, o, 1.0, 0, 1.0, 0, -1, scratch=sc)
    with pytest.raises(ValueError, match=r"sample: expected 'step' of shape \[1\]"):
        ops.sample(logits, o, 1.0, 0, 1.0, 0, np.zeros(2, np.int32), scratch=sc)
    with pytest.raises(ValueError, match="expected device None, 'cpu' or 'gpu'"):
        ops.argmax(logits, o, device="tpu")


# ---------------------------------------------------------------- sm_90a PTX

def _linear_ptx(M, N, K, split):
    cfg = lin.linear_config(M, N, K, gemv=False)
    sig = {"x_ptr": "*bf16:16", "w_ptr": "*bf16:16", "out_ptr": "*bf16:16",
           "part_ptr": "*fp32:16", "M": "i32", "N": "i32:16", "K": "i32:16", "K_SPLIT": "i32:16"}
    k = kiln.compile(lin.linear_kernel, signature=sig,
                     constexprs={n: cfg[n] for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
                     | {"SPLIT": split}, target="sm_90a", num_warps=cfg["num_warps"],
                     num_stages=cfg["num_stages"])
    return k.asm["ptx"]


def test_linear_decode_ptx_sm90a():
    # Decode (M = 1, o_proj): 16-byte cp.async copies into the rings, wgmma m64n64, no plain
    # element-wise global loads in the loop.
    ptx = _linear_ptx(1, 2048, 2048, True)
    assert "cp.async.cg.shared.global" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in ptx
    assert "ld.global.b16" not in ptx


def test_linear_prefill_ptx_sm90a():
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in _linear_ptx(8192, 16384,
                                                                                    2048, False)
    sig = {"x_desc": "tensordesc<bf16[128, 64]>", "w_desc": "tensordesc<bf16[256, 64]>",
           "out_desc": "tensordesc<bf16[128, 256]>", "M": "i32", "N": "i32", "K": "i32"}
    k = kiln.compile(lin.linear_tma_kernel, signature=sig,
                     constexprs={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8},
                     target="sm_90a", num_warps=8, num_stages=4)
    ptx = k.asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx  # TMA loads of x and w
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # TMA store of out
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx


def test_sampling_and_norm_ptx_sm90a():
    sig = {"logits_ptr": "*bf16:16", "out_ptr": "*i32:16", "p_ptr": "*fp32:16",
           "step_ptr": "*i32:16", "keys_ptr": "*i32:16", "V": "i32:16", "inv_t": "fp32",
           "top_k": "i32", "top_p": "fp32", "seed": "i32", "step": "i32"}
    k = kiln.compile(sampling.sample_kernel, signature=sig,
                     constexprs={"U": 4, "BLOCK": 4096, "TOP_K": True, "TOP_P": True,
                                 "STEP_IN_MEMORY": True, "KEYS": True}, target="sm_90a",
                     num_warps=16)
    # A vocabulary of a multiple of 16 (128256) is read in 16-byte loads.
    assert "bar.sync" in k.asm["ptx"] and "ld.global.v4.b32" in k.asm["ptx"]
    k = kiln.compile(sampling.argmax_kernel, signature={"logits_ptr": "*bf16:16",
                     "out_ptr": "*i32:16", "V": "i32:16"}, constexprs={"U": 4, "BLOCK": 4096},
                     target="sm_90a", num_warps=16)
    assert "ld.global.v4.b32" in k.asm["ptx"]
    U, BLOCK, warps, splits, chunk = sampling.argmax_plan(1, 128256)
    assert (splits, chunk) == (126, 1024)  # one tile of 1024 logits per program
    k = kiln.compile(sampling.argmax_partial_kernel, signature={
        "logits_ptr": "*bf16:16", "part_ptr": "*fp32:16", "V": "i32:16", "CHUNK": "i32:16"},
        constexprs={"U": U, "BLOCK": BLOCK}, target="sm_90a", num_warps=warps)
    assert k.asm["ptx"].count("ld.global.v4.b32") == 1  # 8 logits a thread
