"""kernels/python/kiln_models/ops: what the CUDA-core linears fuse and their plan variants
(issue #24). CPU backend against float64 numpy: swiglu=True bitwise linear + silu_mul, norm=
(RMSNorm of x inside the linear) and residual=True (out += x @ w.T) for bf16/fp32, int8 and
int4 weights, their errors. GPU (marker `gpu`): the same on the 1B model's shapes, the
16-byte-load int4 kernel.
"""
import numpy as np
import pytest

from test_models_ops import (DTYPES, bf16, close, close_linear, f64, lin, ops,  # noqa: F401
                             quant, rnd)
from test_models_ops_gpu import _torch


def _swiglu_cases(rng, dt, N, K):
    """(name, run(x, out, swiglu), dequantized w): the CUDA-core linears of each weight kind."""
    w = rng.standard_normal((N, K)).astype(np.float32)
    q8, s8 = quant.quantize_int8(w)
    p4, s4 = quant.quantize_int4(w, 32)
    wd = w.astype(dt)
    return [
        ("float", lambda x, out, sw: ops.linear(x, wd, out, gemv=True, swiglu=sw)),
        ("int8", lambda x, out, sw: quant.linear_int8(x, q8, s8, out, gemv=True, swiglu=sw)),
        ("int4", lambda x, out, sw: quant.linear_int4(x, p4, s4, out, group=32, gemv=True,
                                                      swiglu=sw)),
    ]


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_linear_swiglu_is_linear_then_silu_mul_cpu(dt):
    # swiglu=True (silu_mul in the CUDA-core linear's store): bitwise the linear followed by
    # silu_mul, for every weight kind; I = 45 gate rows (not a whole number of programs' R / 2),
    # 1 and 3 rows of x, K = 96 (not a whole step: masked).
    dt = DTYPES[dt]
    rng = np.random.default_rng(11)
    I, K = 45, 96
    for name, run in _swiglu_cases(rng, dt, 2 * I, K):
        for M in (1, 3):
            x = rng.standard_normal((M, K)).astype(dt)
            gu = np.full((M, 2 * I), np.nan, dt)
            run(x, gu, False)
            ref = np.full((M, I), np.nan, dt)
            ops.silu_mul(gu, ref)
            out = np.full((M, I), np.nan, dt)
            run(x, out, True)
            np.testing.assert_array_equal(out, ref, err_msg=f"{name} M={M}")


def test_linear_swiglu_errors_cpu():
    x = np.zeros((2, 64), np.float32)
    w = np.zeros((10, 64), np.float32)
    with pytest.raises(ValueError, match=r"linear: expected 'out' of shape \[2, 5\]"):
        ops.linear(x, w, np.zeros((2, 10), np.float32), swiglu=True)
    with pytest.raises(ValueError, match=r"linear: expected an even number of weight rows"):
        ops.linear(x, np.zeros((9, 64), np.float32), np.zeros((2, 4), np.float32), swiglu=True)
    with pytest.raises(ValueError, match=r"linear: swiglu=True needs the CUDA-core plan"):
        ops.linear(x, w, np.zeros((2, 5), np.float32), swiglu=True, gemv=False)
    p4, s4 = quant.quantize_int4(np.zeros((10, 64), np.float32), 32)
    with pytest.raises(ValueError, match=r"linear_int4: swiglu=True needs the CUDA-core plan"):
        quant.linear_int4(np.zeros((8, 64), np.float32), p4, s4, np.zeros((8, 5), np.float32),
                          group=32, swiglu=True)


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 3])
def test_linear_swiglu_gpu(M):
    # The 1B model's gate_up (I 8192, K 2048) in bf16: bf16 gemv, int8, int4 (packed bf16x2
    # math, the wide-layer plan at one row), swiglu=True bitwise the linear then silu_mul.
    torch = _torch()
    rng = np.random.default_rng(12)
    I, K = 8192, 2048
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.from_numpy(rng.standard_normal((2 * I, K)).astype(np.float32))
    q8, s8 = (torch.from_numpy(a).cuda() for a in quant.quantize_int8(w.numpy()))
    p4, s4 = (torch.from_numpy(a).cuda() for a in quant.quantize_int4(w.numpy(), 128))
    wb = w.cuda().to(torch.bfloat16)
    runs = {"float": lambda out, sw: ops.linear(x, wb, out, swiglu=sw),
            "int8": lambda out, sw: quant.linear_int8(x, q8, s8, out, swiglu=sw),
            "int4": lambda out, sw: quant.linear_int4(x, p4, s4, out, group=128, swiglu=sw)}
    for name, run in runs.items():
        gu = torch.empty(M, 2 * I, device="cuda", dtype=torch.bfloat16)
        run(gu, False)
        ref = torch.empty(M, I, device="cuda", dtype=torch.bfloat16)
        ops.silu_mul(gu, ref)
        out = torch.full((M, I), float("nan"), device="cuda", dtype=torch.bfloat16)
        run(out, True)
        assert torch.equal(out, ref), name


def _fusion_refs(x, w, g, eps, res):
    """float64 references of linear with norm (rmsnorm(x) * g, unrounded), and with residual
    (res + the product rounded to res's dtype)."""
    xn = f64(x) / np.sqrt((f64(x) ** 2).mean(1, keepdims=True) + eps) * f64(g)
    return xn @ f64(w).T, f64(res) + f64(rnd(f64(x) @ f64(w).T, res.dtype))


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
def test_linear_norm_and_residual_cpu(dt):
    # norm=g: the RMSNorm of x inside the CUDA-core linear; residual=True: out += x @ w.T;
    # every weight kind, 1 and 3 rows, K = 96 (a ragged last step), norm with swiglu.
    dt = DTYPES[dt]
    rng = np.random.default_rng(14)
    N, K, eps = 40, 96, 1e-5
    w = rng.standard_normal((N, K)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, K).astype(dt)
    q8, s8 = quant.quantize_int8(w)
    p4, s4 = quant.quantize_int4(w, 32)
    kinds = {"float": (w.astype(dt), lambda x, o, **k: ops.linear(x, w.astype(dt), o, **k)),
             "int8": (quant.dequantize_int8(q8, s8),
                      lambda x, o, **k: quant.linear_int8(x, q8, s8, o, **k)),
             "int4": (quant.dequantize_int4(p4, s4, 32),
                      lambda x, o, **k: quant.linear_int4(x, p4, s4, o, group=32, **k))}
    for name, (wd, run) in kinds.items():
        for M in (1, 3):
            x = (3 * rng.standard_normal((M, K))).astype(dt)
            res = rng.standard_normal((M, N)).astype(dt)
            ref_n, ref_r = _fusion_refs(x, wd, g, eps, res)
            out = np.full((M, N), np.nan, dt)
            run(x, out, gemv=True, norm=g, eps=eps)
            close_linear(out, ref_n, dt)
            out = res.copy()
            run(x, out, gemv=True, residual=True)
            close(out, ref_r, dt)
            sw = np.full((M, N // 2), np.nan, dt)
            run(x, sw, gemv=True, norm=g, eps=eps, swiglu=True)
            gate, up = ref_n[:, :N // 2], ref_n[:, N // 2:]
            close(sw, gate / (1 + np.exp(-gate)) * up, dt,
                  rel=2e-2 if dt != np.float32 else None)


def test_linear_fusion_errors_cpu():
    x = np.zeros((2, 64), np.float32)
    w = np.zeros((10, 64), np.float32)
    out = np.zeros((2, 10), np.float32)
    with pytest.raises(ValueError, match=r"linear: expected 'norm' of shape \[64\]"):
        ops.linear(x, w, out, norm=np.ones(32, np.float32))
    with pytest.raises(ValueError, match=r"linear: expected a float eps >= 0, found -1"):
        ops.linear(x, w, out, norm=np.ones(64, np.float32), eps=-1)
    with pytest.raises(ValueError, match=r"linear: expected residual=True or swiglu=True"):
        ops.linear(x, w, np.zeros((2, 5), np.float32), residual=True, swiglu=True)
    with pytest.raises(ValueError, match=r"linear: norm needs the CUDA-core plan"):
        ops.linear(x, w, out, norm=np.ones(64, np.float32), gemv=False)
    with pytest.raises(ValueError, match=r"linear: residual=True needs the CUDA-core plan"):
        ops.linear(x, w, out, residual=True, gemv=False)
    with pytest.raises(TypeError, match=r"linear_int8: expected residual True or False"):
        quant.linear_int8(x, np.zeros((10, 64), np.int8), np.ones(10, np.float32), out,
                          residual=1)


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 3])
def test_linear_norm_and_residual_gpu(M):
    # The 1B model's fused decode linears in bf16 against float64: qkv with the norm
    # (two-step prefetch), down with the residual (int4: the (2, 512) plan), gate_up with
    # norm and swiglu, for bf16, int8 and packed int4 weights.
    torch = _torch()
    rng = np.random.default_rng(15)
    eps = 1e-5
    for N, K, what in ((3072, 2048, "norm"), (2048, 8192, "residual"),
                       (2 * 1024, 2048, "swiglu")):
        w = rng.standard_normal((N, K)).astype(np.float32) / np.sqrt(K)
        q8, s8 = quant.quantize_int8(w)
        p4, s4 = quant.quantize_int4(w, 128)
        dev = {k: torch.from_numpy(a).cuda() for k, a in
               dict(q8=q8, s8=s8, p4=p4, s4=s4).items()}
        wb = torch.from_numpy(w).cuda().to(torch.bfloat16)
        kinds = {"float": (wb.double(), lambda x, o, **k: ops.linear(x, wb, o, **k)),
                 "int8": (torch.from_numpy(quant.dequantize_int8(q8, s8)).cuda().double(),
                          lambda x, o, **k: quant.linear_int8(x, dev["q8"], dev["s8"], o, **k)),
                 "int4": (torch.from_numpy(quant.dequantize_int4(p4, s4, 128)).cuda().double(),
                          lambda x, o, **k: quant.linear_int4(x, dev["p4"], dev["s4"], o,
                                                              group=128, **k))}
        x = (3 * torch.randn(M, K, device="cuda")).to(torch.bfloat16)
        g = torch.rand(K, device="cuda").add(0.5).to(torch.bfloat16)
        xn = x.double() / (x.double().pow(2).mean(1, keepdim=True) + eps).sqrt() * g.double()
        for name, (wd, run) in kinds.items():
            if what == "residual":
                res = torch.randn(M, N, device="cuda").to(torch.bfloat16)
                out = res.clone()
                run(x, out, residual=True)
                ref = res.double() + (x.double() @ wd.T).to(torch.bfloat16).double()
            elif what == "norm":
                out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                run(x, out, norm=g, eps=eps)
                ref = xn @ wd.T
            else:
                out = torch.empty(M, N // 2, device="cuda", dtype=torch.bfloat16)
                run(x, out, norm=g, eps=eps, swiglu=True)
                gu = xn @ wd.T
                ref = torch.nn.functional.silu(gu[:, :N // 2]) * gu[:, N // 2:]
            err = ((out.double() - ref).norm() / ref.norm()).item()
            assert err < 1.5e-2, (what, name, M, err)


def _int4_gpu(torch, rng, N, K):
    """A random [N, K] weight quantized to int4 (group 128): its dequantized values (float64)
    and the codes and scales, on the GPU."""
    p4, s4 = quant.quantize_int4(rng.standard_normal((N, K)).astype(np.float32), 128)
    wd = torch.from_numpy(quant.dequantize_int4(p4, s4, 128)).cuda().double()
    return wd, torch.from_numpy(p4).cuda(), torch.from_numpy(s4).cuda()


@pytest.mark.gpu
@pytest.mark.parametrize("R, C", [(8, 32), (32, 8), (16, 16)])
def test_gemv_int4_wide_gpu(R, C, monkeypatch):
    # gemv_int4_wide_kernel (16-byte weight loads, a plan's WIDE key): qkv-, gate_up- (with
    # swiglu and the fused norm) and down-shaped int4 linears at 1 and 3 rows against float64.
    torch = _torch()
    rng = np.random.default_rng(16)
    orig = quant.gemv_config
    monkeypatch.setattr(quant, "gemv_config",
                        lambda *a, **k: orig(*a, **k) | dict(WIDE=(R, C), PERSIST=None))
    for N, K, sw in ((3072, 2048, False), (2 * 2048, 2048, True), (2048, 8192, False)):
        wd, pd, sd = _int4_gpu(torch, rng, N, K)
        for M in (1, 3):
            x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
            out = torch.full((M, N // 2 if sw else N), float("nan"), device="cuda",
                             dtype=torch.bfloat16)
            g = torch.rand(K, device="cuda").add(0.5).to(torch.bfloat16)
            quant.linear_int4(x, pd, sd, out, group=128, swiglu=sw, norm=g if sw else None)
            xn = x.double() / (x.double().pow(2).mean(1, keepdim=True) + 1e-6).sqrt() * \
                g.double() if sw else x.double()
            ref = xn @ wd.T
            if sw:
                ref = torch.nn.functional.silu(ref[:, :N // 2]) * ref[:, N // 2:]
            err = ((out.double() - ref).norm() / ref.norm()).item()
            assert err < 1e-2, (N, K, M, err)


class _Spy:
    """A kernel's stand-in that counts its launches (kernel[grid](...))."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


@pytest.mark.gpu
@pytest.mark.parametrize("persist", [(4, 4), (8, 5, 2), (16, 1), (4, 2, 2), (8, 3, 2, 8, 8),
                                     (16, 2, 1, 8, 8)])
def test_gemv_int4_persist_gpu(persist, monkeypatch):
    # gemv_int4_persist_kernel (a plan's PERSIST key (R, programs a SM[, tiles ahead, words
    # a piece, warps]): programs loop over row tiles, x made once each): plain, swiglu +
    # fused norm, residual and fused norm alone, N not a whole number of tiles, K of 128 and
    # 256 words, at 1 and 3 rows against float64.
    torch = _torch()
    rng = np.random.default_rng(18)
    orig = quant.gemv_config
    monkeypatch.setattr(quant, "gemv_config",
                        lambda *a, **k: orig(*a, **k) | dict(PERSIST=persist))
    spy = _Spy(quant.gemv_int4_persist_kernel)
    monkeypatch.setattr(quant, "gemv_int4_persist_kernel", spy)
    for N, K, how in ((3072, 2048, "plain"), (2 * 2048, 2048, "swiglu"),
                      (3000, 1024, "residual"), (5000, 2048, "norm")):
        wd, pd, sd = _int4_gpu(torch, rng, N, K)
        for M in (1, 3):
            x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
            sw = how == "swiglu"
            out = torch.full((M, N // 2 if sw else N), float("nan"), device="cuda",
                             dtype=torch.bfloat16)
            g = torch.rand(K, device="cuda").add(0.5).to(torch.bfloat16)
            xd = x.double()
            if how in ("swiglu", "norm"):
                xd = xd / (xd.pow(2).mean(1, keepdim=True) + 1e-6).sqrt() * g.double()
            ref = xd @ wd.T
            if how == "residual":
                out = torch.randn(M, N, device="cuda").to(torch.bfloat16)
                ref = ref + out.double()
            quant.linear_int4(x, pd, sd, out, group=128, swiglu=sw,
                              norm=g if how in ("swiglu", "norm") else None,
                              residual=how == "residual")
            if sw:
                ref = torch.nn.functional.silu(ref[:, :N // 2]) * ref[:, N // 2:]
            err = ((out.double() - ref).norm() / ref.norm()).item()
            assert err < 1e-2, (N, K, M, how, err)
    assert spy.launches == 8
    # x far from 1 and fp16 x: the kernel's fp16 pairs are x scaled by a power of two per row
    wd, pd, sd = _int4_gpu(torch, rng, 3072, 2048)
    for dt, mag in ((torch.bfloat16, 3e4), (torch.bfloat16, 1e-4), (torch.float16, 1.0),
                    (torch.float16, 200.0)):
        x = (torch.randn(1, 2048, device="cuda") * mag).to(dt)
        out = torch.empty(1, 3072, device="cuda", dtype=dt)
        quant.linear_int4(x, pd, sd, out, group=128)
        ref = x.double() @ wd.T
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (dt, mag, err)
    assert spy.launches == 12


@pytest.mark.parametrize("dt", list(DTYPES), ids=str)
@pytest.mark.parametrize("shape", [(1, 40, 256), (3, 33, 128)],
                         ids=lambda s: "x".join(map(str, s)))
def test_linear_int4_bf16_scales_cpu(dt, shape):
    # int4 with bf16 scales (what a 16-bit model uploads): both plans give x @ the weights
    # dequantized with the bf16 scales, and exactly what fp32 scales of the same values give.
    dt = DTYPES[dt]
    M, N, K = shape
    rng = np.random.default_rng(M * N)
    w = rng.standard_normal((N, K)).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(dt)
    p, s4 = quant.quantize_int4(w, 64)
    sb = s4.astype(bf16)
    ref = f64(x) @ f64(quant.dequantize_int4(p, sb.astype(np.float32), 64)).T
    for gemv in (True, False):
        out = np.full((M, N), np.nan, dt)
        quant.linear_int4(x, p, sb, out, group=64, gemv=gemv)
        close_linear(out, ref, dt)
        same = np.full((M, N), np.nan, dt)
        quant.linear_int4(x, p, sb.astype(np.float32), same, group=64, gemv=gemv)
        assert np.array_equal(f64(out), f64(same))
    with pytest.raises(TypeError, match="linear_int4: expected .scales. of dtype float32 or bf"):
        quant.linear_int4(x, p, s4.astype(np.float16), out, group=64)


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 3, 16, 300])
def test_linear_int4_bf16_scales_gpu(M):
    # bf16 scales on the GPU's int4 plans (the persistent kernel at one row of the wide
    # layers, the packed/wide ones, tensor-core tiles at 300 rows): bitwise the fp32 scales
    # holding the same values, and near x @ the dequantized weights.
    torch = _torch()
    rng = np.random.default_rng(M)
    for N, K, sw in ((2 * 8192, 2048, M <= 4), (13000, 2048, False), (2048, 8192, False)):
        w = rng.standard_normal((N, K)).astype(np.float32)
        p, s4 = quant.quantize_int4(w, 128)
        s4 = s4.astype(bf16).astype(np.float32)
        pd = torch.from_numpy(p).cuda()
        sf, sb = torch.from_numpy(s4).cuda(), torch.from_numpy(s4).cuda().to(torch.bfloat16)
        x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        scratch = torch.empty(max(quant.quant_scratch_numel(M, N, K, 128), 1), device="cuda")
        outs = []
        for s in (sf, sb):
            out = torch.full((M, N // 2 if sw else N), float("nan"), device="cuda",
                             dtype=torch.bfloat16)
            quant.linear_int4(x, pd, s, out, group=128, swiglu=sw, scratch=scratch)
            outs.append(out)
        assert torch.equal(outs[0], outs[1]), (N, K, M)
        ref = x.double() @ torch.from_numpy(quant.dequantize_int4(p, s4)).cuda().double().T
        if sw:
            ref = torch.nn.functional.silu(ref[:, :N // 2]) * ref[:, N // 2:]
        err = ((outs[1].double() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (N, K, M, err)


def test_gemv_int4_persist_plan_ptx():
    # The one-row int4 plans of the 1B model's wide layers take the persistent kernel
    # (gate_up, LM head); the others keep theirs. Its sm_90a PTX (no GPU needed) for
    # gate_up: the first tile's words loaded before the loop and one tile ahead in it, 16
    # bytes a load (R 8 x 256 words on 128 threads: 4 loads a tile); a tile's epilogue (the
    # SwiGLU's exp2 and the store) runs after the next tile's math, so it appears twice: in
    # the loop and after it for the last tile.
    import kiln
    plan = {name: lin.gemv_config(1, N, K, "int4").get("PERSIST")
            for name, (N, K) in {"qkv": (3072, 2048), "o": (2048, 2048),
                                 "gate_up": (16384, 2048), "down": (2048, 8192),
                                 "head": (128256, 2048)}.items()}
    assert plan == dict(qkv=None, o=None, gate_up=(8, 4, 1, 4, 4), down=None,
                        head=(8, 3, 2, 8, 8))
    # a 16-bit model keeps those two's int4 scales in bf16 (read once a 4-word piece)
    sd = {name: quant.int4_scale_dtype(N, K, 128, "bfloat16")
          for name, (N, K) in {"qkv": (3072, 2048), "gate_up": (16384, 2048),
                               "down": (2048, 8192), "head": (128256, 2048)}.items()}
    assert sd == dict(qkv="float32", gate_up="bfloat16", down="float32", head="bfloat16")
    assert quant.int4_scale_dtype(16384, 2048, 128, "float32") == "float32"
    sig = {"x_ptr": "*bf16:16", "p_ptr": "*u8:16", "s_ptr": "*bf16:16", "out_ptr": "*bf16:16",
           "g_ptr": "*bf16:16", "eps": "fp32", "M": "i32", "N": "i32:16", "K": "i32:16",
           "KW": "i32:16", "N_GROUPS": "i32:16"}
    k = kiln.compile(quant.gemv_int4_persist_kernel, signature=sig, target="sm_90a",
                     num_warps=4, constexprs=dict(BM=1, R=8, C=64, GROUP_WORDS=16, F16=False,
                                                  DEPTH=1, SWIGLU=True, NORM=True))
    ptx = k.asm["ptx"]
    assert ptx.count("L2::cache_hint.v4.b32") == 8
    assert ptx.count("st.global") == 2 and ptx.count("ex2.approx") == 2
    assert "griddepcontrol.wait" in ptx
