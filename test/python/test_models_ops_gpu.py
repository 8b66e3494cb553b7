"""kiln_models ops on the GPU against torch, continued from test_models_ops.py (whose helpers
this file imports): linear, norms, elementwise, argmax and sampling, weight-only quantized
GEMV plans and their int4 math (marked `gpu`), and the two-step prefetch of the GEMV loop
against the plain loop (on the CPU too)."""

import numpy as np
import pytest

import kiln
from test_models_ops import (DTYPES, LLAMA_1B, bf16, close, close_linear, f64, lin, ops, quant,
                             rnd, sampling)

# ---------------------------------------------------------------- GPU, against torch

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 2048, 2048), (4, 3072, 2048), (16, 2048, 8192),
                                   (1, 4000, 520), (33, 1000, 328), (256, 1024, 512),
                                   (1000, 520, 200), (129, 257, 65)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_linear_gpu(shape, dtype):
    torch = _torch()
    M, N, K = shape
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    x = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
    w = torch.randn(N, K, device="cuda", dtype=dt, generator=g) / K ** 0.5
    out = torch.empty(M, N, device="cuda", dtype=dt)
    scratch = torch.empty(max(lin.linear_scratch_numel(M, N, K), 1), device="cuda")
    ops.linear(x, w, out, scratch=scratch)
    ref = x.double() @ w.double().T
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < (1e-5 if dtype == "float32" else 4e-3 if dtype == "bfloat16" else 1e-3), err


@pytest.mark.gpu
def test_norms_and_elementwise_gpu():
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(0)
    T, H, dt = 37, 2048, torch.bfloat16
    x = torch.randn(T, H, device="cuda", dtype=dt, generator=g)
    res = torch.randn(T, H, device="cuda", dtype=dt, generator=g)
    w = torch.randn(H, device="cuda", dtype=dt, generator=g)

    def hf(h):
        hf32 = h.float()
        return w * (hf32 * torch.rsqrt(hf32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt)

    out = torch.empty_like(x)
    ops.rmsnorm(x, w, out, 1e-5)
    torch.testing.assert_close(out, hf(x), rtol=1.6e-2, atol=1e-2)
    want_res = res + x
    ops.add_rmsnorm(x, res, w, out, 1e-5)
    assert torch.equal(res, want_res)
    torch.testing.assert_close(out, hf(want_res), rtol=1.6e-2, atol=1e-2)
    gu = torch.randn(T, 2 * 4096, device="cuda", dtype=dt, generator=g)
    o = torch.empty(T, 4096, device="cuda", dtype=dt)
    ops.silu_mul(gu, o)
    ref = torch.nn.functional.silu(gu[:, :4096]) * gu[:, 4096:]
    torch.testing.assert_close(o, ref, rtol=1.6e-2, atol=1e-2)
    table = torch.randn(1000, H, device="cuda", dtype=dt, generator=g)
    ids = torch.randint(0, 1000, (T,), device="cuda", dtype=torch.int32, generator=g)
    e = torch.empty(T, H, device="cuda", dtype=dt)
    ops.embedding(ids, table, e)
    assert torch.equal(e, table[ids.long()])
    rows = torch.tensor([3, 36, 0], device="cuda", dtype=torch.int32)
    gr = torch.empty(3, H, device="cuda", dtype=dt)
    ops.gather_rows(e, rows, gr)
    assert torch.equal(gr, e[rows.long()])


@pytest.mark.gpu
def test_argmax_and_sample_gpu():
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(1)
    B, V = 16, 128256
    logits = torch.randn(B, V, device="cuda", dtype=torch.bfloat16, generator=g) * 4
    out = torch.empty(B, device="cuda", dtype=torch.int32)
    ops.argmax(logits, out)
    assert torch.equal(out.long(), logits.float().argmax(-1))
    clean = logits.clone()  # sampling below: no NaN, no tie at the top (ties are all kept)
    logits[3, 5000] = float("nan")  # a NaN wins; split rows agree with torch
    logits[4, [7, 127000]] = 1e4  # ties in two ranges: the first
    for b in (1, B):
        part = torch.empty(sampling.argmax_scratch_numel(b, V), device="cuda")
        out.fill_(-1)
        ops.argmax(logits[:b], out[:b], scratch=part)
        assert torch.equal(out[:b].long(), logits[:b].float().argmax(-1))
    scratch = torch.empty(B * V, device="cuda")
    logits = clean
    ops.sample(logits, out, 0.7, 1, 1.0, 5, 0, scratch=scratch)
    assert torch.equal(out.long(), logits.float().argmax(-1))
    top = logits.float().topk(50, dim=-1).indices
    a = torch.empty_like(out)
    ops.sample(logits, a, 0.7, 50, 0.9, 5, 3, scratch=scratch)
    assert (top == a.long()[:, None]).any(-1).all()
    b = torch.empty_like(out)
    ops.sample(logits, b, 0.7, 50, 0.9, 5, 3, scratch=scratch)
    assert torch.equal(a, b)
    # The same draws as the CPU backend (Philox is exact on both; exp may differ by an ulp,
    # so allow a rare disagreement).
    host = np.empty(B, np.int32)
    ops.sample(logits.float().cpu().numpy(), host, 0.7, 50, 0.9, 5, 3,
               scratch=np.empty(B * V, np.float32))
    assert (host == a.cpu().numpy()).mean() >= 0.9


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 16, 300])
def test_linear_int8_int4_gpu(M):
    torch = _torch()
    N, K = 2048, 2048
    rng = np.random.default_rng(M)
    w = rng.standard_normal((N, K)).astype(np.float32)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    scratch = torch.empty(max(quant.quant_scratch_numel(M, N, K, group=128),
                              quant.quant_scratch_numel(M, N, K), 1), device="cuda")
    q, s = quant.quantize_int8(w)
    quant.linear_int8(x, torch.from_numpy(q).cuda(), torch.from_numpy(s).cuda(), out,
                      scratch=scratch)
    ref = x.double() @ torch.from_numpy(quant.dequantize_int8(q, s)).cuda().double().T
    assert ((out.double() - ref).norm() / ref.norm()).item() < 4e-3
    p, s4 = quant.quantize_int4(w, 128)
    quant.linear_int4(x, torch.from_numpy(p).cuda(), torch.from_numpy(s4).cuda(), out,
                      scratch=scratch)
    ref = x.double() @ torch.from_numpy(quant.dequantize_int4(p, s4)).cuda().double().T
    assert ((out.double() - ref).norm() / ref.norm()).item() < 4e-3


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 3, 16])
@pytest.mark.parametrize("shape", [LLAMA_1B["o"], LLAMA_1B["down"], (1000, 640)],
                         ids=lambda s: "x".join(map(str, s)))
def test_gemv_plans_gpu(M, shape):
    # Both decode plans of bf16, int8 and int4 against the dequantized weights in fp64.
    torch = _torch()
    N, K = shape
    rng = np.random.default_rng(M + N)
    w = rng.standard_normal((N, K)).astype(np.float32)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    scratch = torch.empty(max(quant.quant_scratch_numel(M, N, K, 128, gemv=False),
                              quant.quant_scratch_numel(M, N, K, gemv=False),
                              lin.linear_scratch_numel(M, N, K, gemv=False), 1), device="cuda")
    q, s = quant.quantize_int8(w)
    p, s4 = quant.quantize_int4(w, 128)
    wb = torch.from_numpy(w).cuda().to(torch.bfloat16)
    cases = {"bf16": (lambda g: ops.linear(x, wb, out, scratch=scratch, gemv=g), wb.double()),
             "int8": (lambda g: quant.linear_int8(x, torch.from_numpy(q).cuda(),
                                                  torch.from_numpy(s).cuda(), out,
                                                  scratch=scratch, gemv=g),
                      torch.from_numpy(quant.dequantize_int8(q, s)).cuda().double()),
             "int4": (lambda g: quant.linear_int4(x, torch.from_numpy(p).cuda(),
                                                  torch.from_numpy(s4).cuda(), out,
                                                  scratch=scratch, gemv=g),
                      torch.from_numpy(quant.dequantize_int4(p, s4)).cuda().double())}
    for name, (run, wref) in cases.items():
        ref = x.double() @ wref.T
        for gemv in (True, False):
            out.fill_(float("nan"))
            run(gemv)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            assert err < 4e-3, (name, gemv, err)


@pytest.mark.gpu
def test_ops_on_device_arrays_gpu():
    # kiln.DeviceArray arguments (no torch): dtypes by name, the step counter on the device.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 256)).astype(bf16)
    w = rng.standard_normal((64, 256)).astype(bf16)
    out = kiln.empty((2, 64), "bfloat16")
    scratch = kiln.empty((lin.linear_scratch_numel(2, 64, 256) + 1,), "float32")
    ops.linear(kiln.from_numpy(x), kiln.from_numpy(w), out, scratch=scratch)
    close(out.numpy(), rnd(f64(x) @ f64(w).T, bf16), bf16)
    xp = rng.standard_normal((70, 256)).astype(bf16)  # prefill rows: the descriptor kernel
    outp = kiln.empty((70, 64), "bfloat16")
    ops.linear(kiln.from_numpy(xp), kiln.from_numpy(w), outp)
    close(outp.numpy(), rnd(f64(xp) @ f64(w).T, bf16), bf16)
    logits = rng.standard_normal((3, 1000)).astype(np.float32)
    tokens = kiln.empty((3,), "int32")
    ops.argmax(kiln.from_numpy(logits), tokens)
    assert tokens.numpy().tolist() == np.argmax(logits, 1).tolist()
    step = kiln.from_numpy(np.array([4], np.int32))
    ops.sample(kiln.from_numpy(logits), tokens, 1.0, 20, 0.9, 7, step,
               scratch=kiln.empty((3000,), "float32"))
    by_int = np.empty(3, np.int32)
    ops.sample(logits, by_int, 1.0, 20, 0.9, 7, 4, scratch=np.empty(3000, np.float32))
    assert (tokens.numpy() == by_int).mean() >= 2 / 3


@pytest.mark.gpu
@pytest.mark.parametrize("tdt", ["bfloat16", "float16"])
@pytest.mark.parametrize("packed", ["1", "0"])
def test_gemv_int4_packed_math_gpu(tdt, packed, monkeypatch):
    # The int4 CUDA-core plan with 16-bit x (packed bf16x2 / f16x2 math, or fp32 fields with
    # KILN_MODELS_INT4_PACKED=0): every nibble in every position, a group of one word, rows and
    # words past the tile (K = 1000: 125 words, not a whole step), 1 to 4 rows of x. Each
    # product and the 4-product sums of a word round to 16 bits (2^-9 relative for bf16,
    # 2^-12 for fp16) before the fp32 accumulation: norm-wise errors well under 1e-2 / 2e-3.
    monkeypatch.setenv(quant.INT4_PACKED_ENV, packed)
    torch = _torch()
    dt = getattr(torch, tdt)
    rng = np.random.default_rng(5)
    N, K = 13, 1000
    p = rng.integers(0, 256, size=(N, K // 2)).astype(np.uint8)
    s4 = rng.uniform(0.5, 2.0, (N, K // 8)).astype(np.float32)
    w = torch.from_numpy(quant.dequantize_int4(p, s4, 8)).cuda().double()
    for M in (1, 3, 4):
        x = torch.randn(M, K, device="cuda", dtype=dt)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        quant.linear_int4(x, torch.from_numpy(p).cuda(), torch.from_numpy(s4).cuda(), out,
                          group=8, gemv=True)
        ref = x.double() @ w.T
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err < (1e-2 if tdt == "bfloat16" else 2e-3), (M, err)


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_gemv_two_step_prefetch_equals_the_loop_cpu(dt, monkeypatch):
    # K of exactly two steps (CPU plan: C = 16 pieces of 16 bytes): both steps' weights are
    # loaded before gdc_wait (TWO), summed in the loop's order: bitwise the loop's result.
    dt = DTYPES[dt]
    E = 16 // np.dtype(dt).itemsize
    rng = np.random.default_rng(4)
    M, N, K = 3, 21, 2 * 16 * E
    x = rng.standard_normal((M, K)).astype(dt)
    w = rng.standard_normal((N, K)).astype(dt)
    outs = []
    for two in ("1", "0"):
        monkeypatch.setenv(lin.GEMV_TWO_ENV, two)
        out = np.full((M, N), np.nan, dt)
        ops.linear(x, w, out, gemv=True)
        outs.append(out)
    assert lin.linear_config(M, N, K, np.dtype(dt).itemsize, cpu=True, gemv=True)["EVEN"]
    np.testing.assert_array_equal(outs[0], outs[1])
    close_linear(outs[0], f64(x) @ f64(w).T, dt)


@pytest.mark.gpu
def test_gemv_two_step_prefetch_gpu(monkeypatch):
    # The 1B model's K = 2048 at one row of x: bf16 (2 steps of 1024) and packed int4 (2 steps
    # of 128 words), with and without TWO: bitwise equal.
    torch = _torch()
    rng = np.random.default_rng(8)
    N, K = 3072, 2048
    w = rng.standard_normal((N, K)).astype(np.float32)
    x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
    wb = torch.from_numpy(w).cuda().to(torch.bfloat16)
    p, s4 = quant.quantize_int4(w, 128)
    pd, sd = torch.from_numpy(p).cuda(), torch.from_numpy(s4).cuda()
    res = {}
    for two in ("1", "0"):
        monkeypatch.setenv(lin.GEMV_TWO_ENV, two)
        a = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
        ops.linear(x, wb, a)
        quant.linear_int4(x, pd, sd, b, group=128)
        res[two] = (a, b)
    assert torch.equal(res["1"][0], res["0"][0]) and torch.equal(res["1"][1], res["0"][1])
    ref = x.double() @ wb.double().T
    assert ((res["1"][0].double() - ref).norm() / ref.norm()).item() < 4e-3
