"""Flash attention forward on the GPU: Kiln (kernels/python/kiln_kernels/flash_attention.py)
beside a Triton kernel of the same algorithm (FlashAttention-2 forward in the structure of
Triton's fused-attention tutorial, written below with `import triton.language as tl`, launched
with the same grid, tiles, num_warps and num_stages) and torch SDPA on its flash backend, in
one run.

Each case: q, k, v fp16 (B, H, S, D) from randn; Kiln's and Triton's outputs against SDPA's
(max abs error), then each timed as the median of per-launch CUDA-event timings. Prints
key=value lines (ms, TFLOP/s with flops = 4 * B * H * S^2 * D, halved for causal, and Kiln's
ratio to Triton and to SDPA as speed: >1 is faster) and a markdown table last.

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_attention.py
     [--shapes 4x32x4096,1x32x16384] [--head-dim 128] [--dtype fp16] [--causal both]
     [--rep 100] [--block-m 128 --block-n 64 --warps 8 --stages 3]
     [--triton-tiles 128x64x8x3,128x64x8x4,128x128x8x3] [--overlap on|off|both]
Triton's twin runs at Kiln's tiles and at each of --triton-tiles; the fastest is its figure.
Kiln's row is its rotated loop (overlap=True) with --overlap on or both, the plain loop with
off; both also times the plain loop (columns "Kiln plain").
"""
import argparse
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels",
                                "python"))
import kiln  # noqa: E402
from kiln_kernels import flash_attention as k_fa  # noqa: E402

# ====================================================================== Triton twin


@triton.jit
def t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kk, stride_vn,
                     stride_vk, qk_scale, start_m, offs_m, N_CTX,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     STAGE: tl.constexpr):
    # STAGE 1: the key blocks left of the query block (causal, no mask); 2: the blocks on the
    # diagonal (causal mask); 3: every key block (non-causal, no mask).
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kT_ptrs = k_base + offs_d[:, None] * stride_kk + (lo + offs_n)[None, :] * stride_kn
    v_ptrs = v_base + (lo + offs_n)[:, None] * stride_vn + offs_d[None, :] * stride_vk
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        kT = tl.load(kT_ptrs)
        qk = tl.dot(q, kT)
        if STAGE == 2:
            causal = offs_m[:, None] >= (start_n + offs_n)[None, :]
            qk = qk * qk_scale + tl.where(causal, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
        kT_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit
def t_attn_fwd(Q, K, V, Out, sm_scale,
               stride_qz, stride_qh, stride_qm, stride_qk,
               stride_kz, stride_kh, stride_kn, stride_kk,
               stride_vz, stride_vh, stride_vn, stride_vk,
               stride_oz, stride_oh, stride_om, stride_ok,
               Z, H, N_CTX,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh
    o_base = Out + off_z * stride_oz + off_h * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0  # alpha = 0 on the first block
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e)
    if CAUSAL:
        acc, l_i, m_i = t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                         stride_kk, stride_vn, stride_vk, qk_scale, start_m,
                                         offs_m, N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N, 1)
        acc, l_i, m_i = t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                         stride_kk, stride_vn, stride_vk, qk_scale, start_m,
                                         offs_m, N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N, 2)
    else:
        acc, l_i, m_i = t_attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn,
                                         stride_kk, stride_vn, stride_vk, qk_scale, start_m,
                                         offs_m, N_CTX, HEAD_DIM, BLOCK_M, BLOCK_N, 3)
    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
             acc.to(Out.dtype.element_ty))


def triton_attention(q, k, v, out, causal, sm_scale, bm, bn, nw, ns):
    B, H, S, D = q.shape
    if S % bm:
        raise ValueError(f"the Triton twin needs S ({S}) to be a multiple of BLOCK_M ({bm})")
    t_attn_fwd[(triton.cdiv(S, bm), B * H)](
        q, k, v, out, sm_scale, *q.stride(), *k.stride(), *v.stride(), *out.stride(), B, H, S,
        HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, num_warps=nw, num_stages=ns)
    return out


# ====================================================================== timing and checks

ROWS = []


def report(key, value, fmt="{:.4f}"):
    print(f"{key}={fmt.format(value) if isinstance(value, float) else value}", flush=True)


def bench_ms(fn, rep, warmup=10):
    """Median of `rep` per-launch CUDA-event timings (ms), after `warmup` launches."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def sdpa_flash():
    """A context manager that restricts SDPA to its flash backend."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:  # torch < 2.3
        return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                              enable_mem_efficient=False)


def bench_case(B, H, S, D, dtype, causal, args):
    key = f"attn_{'fp16' if dtype == torch.float16 else 'bf16'}_b{B}_h{H}_s{S}_d{D}" + \
          ("_causal" if causal else "")
    bm0, bn0, nw0, ns0 = k_fa.tile_config(D)
    bm, bn = args.block_m or bm0, args.block_n or bn0
    nw, ns = args.warps or nw0, args.stages or ns0
    report(f"{key}_tiles", f"BLOCK_M={bm},BLOCK_N={bn},num_warps={nw},num_stages={ns}")
    sm_scale = 1.0 / math.sqrt(D)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
    o_kiln, o_triton, o_other = (torch.empty_like(q) for _ in range(3))

    def kiln_call(out, overlap):
        return lambda: k_fa.attention_forward(q, k, v, out, None, causal=causal,
                                              sm_scale=sm_scale, block_m=bm, block_n=bn,
                                              num_warps=nw, num_stages=ns, overlap=overlap)

    kiln_fn = kiln_call(o_kiln, args.overlap != "off")
    kiln_other_fn = kiln_call(o_other, False)  # --overlap both: the plain loop beside

    # Triton runs at Kiln's tiles and at each of --triton-tiles; its fastest is the peer.
    triton_cfgs = [(bm, bn, nw, ns)]
    for spec in filter(None, args.triton_tiles.split(",")):
        cfg = tuple(int(x) for x in spec.split("x"))
        if cfg not in triton_cfgs and S % cfg[0] == 0:
            triton_cfgs.append(cfg)
    triton_cfg = triton_cfgs[0]

    def triton_fn():
        triton_attention(q, k, v, o_triton, causal, sm_scale, *triton_cfg)

    def sdpa_fn():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)

    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    ms, err = {}, {}
    with sdpa_flash():
        ref = sdpa_fn()
        impls = [("kiln", kiln_fn, o_kiln), ("triton", triton_fn, o_triton),
                 ("sdpa", sdpa_fn, None)]
        if args.overlap == "both":
            impls.insert(1, ("kiln_plain", kiln_other_fn, o_other))
        for name, fn, out in impls:
            try:
                fn()
                torch.cuda.synchronize()
                if out is not None:
                    err[name] = (out.float() - ref.float()).abs().max().item()
                    report(f"{key}_{name}_maxabs_vs_sdpa", err[name], "{:.3e}")
                    if not err[name] < args.tol:
                        report(f"{key}_{name}_CHECK", "FAIL")
                ms[name] = bench_ms(fn, args.rep)
                if name == "triton":
                    best = (ms[name], triton_cfgs[0])
                    for cfg in triton_cfgs[1:]:
                        triton_cfg = cfg
                        t = bench_ms(fn, args.rep)
                        report(f"{key}_triton_{'x'.join(map(str, cfg))}_ms", t)
                        best = min(best, (t, cfg))
                    ms[name], triton_cfg = best
                    report(f"{key}_triton_tiles", "x".join(map(str, triton_cfg)))
            except Exception as e:  # keep going: one failing impl must not hide the others
                report(f"{key}_{name}_ERROR", repr(e).replace("\n", " ")[:500])
                ms[name] = float("nan")
    for name, t in ms.items():
        report(f"{key}_{name}_ms", t)
        report(f"{key}_{name}_tflops", flops / t / 1e9, "{:.1f}")
    r_t, r_s = ms["triton"] / ms["kiln"], ms["sdpa"] / ms["kiln"]
    report(f"{key}_kiln_vs_triton", r_t)
    report(f"{key}_kiln_vs_sdpa", r_s)
    if "kiln_plain" in ms:
        report(f"{key}_kiln_plain_vs_triton", ms["triton"] / ms["kiln_plain"])
        report(f"{key}_overlap_vs_plain", ms["kiln_plain"] / ms["kiln"])
    ROWS.append((key, flops, ms, r_t, r_s, err.get("kiln", float("nan")),
                 err.get("triton", float("nan")), f"{bm}x{bn}x{nw}x{ns}",
                 "x".join(map(str, triton_cfg))))
    del q, k, v, o_kiln, o_triton, o_other, ref
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4x32x4096,1x32x16384", help="BxHxS,...")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--causal", default="both", choices=["both", "false", "true"])
    ap.add_argument("--rep", type=int, default=100, help="timed launches per impl")
    ap.add_argument("--tol", type=float, default=1e-2, help="max abs error vs SDPA")
    ap.add_argument("--block-m", type=int, default=0, help="0: tile_config's")
    ap.add_argument("--block-n", type=int, default=0)
    ap.add_argument("--warps", type=int, default=0)
    ap.add_argument("--stages", type=int, default=0)
    ap.add_argument("--overlap", default="both", choices=["on", "off", "both"],
                    help="Kiln's rotated loop (overlap=True); both: also times the plain loop")
    ap.add_argument("--triton-tiles", default="128x64x8x3,128x64x8x4,128x128x8x3",
                    help="BMxBNxWARPSxSTAGES,...: Triton also runs at these; its fastest counts")
    args = ap.parse_args()
    torch.manual_seed(0)
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    report("device", torch.cuda.get_device_name().replace(" ", "_"))
    report("triton_version", triton.__version__)
    report("torch_version", torch.__version__)
    report("kiln_gpu", kiln.has_gpu())
    causals = {"both": (False, True), "false": (False,), "true": (True,)}[args.causal]
    for causal in causals:
        for shape in args.shapes.split(","):
            B, H, S = (int(x) for x in shape.split("x"))
            try:
                bench_case(B, H, S, args.head_dim, dtype, causal, args)
            except Exception as e:
                report(f"b{B}_h{H}_s{S}_causal{int(causal)}_ERROR",
                       repr(e).replace("\n", " ")[:500])
            torch.cuda.empty_cache()
    print()
    print("| case | Kiln ms | Triton ms | SDPA ms | Kiln TFLOP/s | Triton TFLOP/s | SDPA TFLOP/s"
          " | Kiln/Triton | Kiln/SDPA | Kiln max err | Triton max err | Kiln tiles"
          " | Triton tiles | Kiln plain TFLOP/s | plain/Triton |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, flops, ms, r_t, r_s, e_k, e_t, tiles_k, tiles_t in ROWS:
        tf = {n: flops / t / 1e9 for n, t in ms.items()}
        print(f"| {key} | {ms['kiln']:.3f} | {ms['triton']:.3f} | {ms['sdpa']:.3f} |"
              f" {tf['kiln']:.1f} | {tf['triton']:.1f} | {tf['sdpa']:.1f} | {r_t:.3f} |"
              f" {r_s:.3f} | {e_k:.1e} | {e_t:.1e} | {tiles_k} | {tiles_t} |"
              + (f" {tf['kiln_plain']:.1f} | {ms['triton'] / ms['kiln_plain']:.3f} |"
                 if "kiln_plain" in ms else " - | - |"))
    print("\nratios are speed (time of the peer / time of Kiln): >= 1 means Kiln is as fast or"
          " faster; errors are max |out - SDPA flash|; tiles BLOCK_MxBLOCK_NxWARPSxSTAGES, Triton"
          " at the fastest of Kiln's and --triton-tiles")


if __name__ == "__main__":
    main()
