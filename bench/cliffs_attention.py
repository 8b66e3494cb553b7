"""Issue #23's attention section (run by bench/bench_cliffs.py): flash attention forward and
backward written in the style of Triton's tutorial 06 (bench/cliff_sources_attention.py: K
loaded transposed by pointer arithmetic, an exp2 online softmax, causal in two stages; the
backward a preprocess kernel and one kernel computing dK/dV then dQ), run under Kiln and
under Triton on the same source (common.twin), both over the same configurations through the
same host launchers, beside torch's scaled_dot_product_attention with no backend forced
("SDPA default").

Rows: attn_fwd[_causal] (one forward), attn_fwd_desc[_causal] (the forward through host
tensor descriptors, as the tutorial runs it on GPUs with the TMA), attn_fwd_fa2[_causal] (a
forward in FlashAttention-2's Triton style: K's and V's pointers computed from the loop's
start_n, causal by a mask up to the diagonal) and attn_bwd[_causal] (the
preprocess and the backward kernel; each library's backward reads the O and M of its own
forward at its best configuration). TFLOP/s: forward 4 * B * H * S^2 * D, backward 2.5 times
that, both halved when causal. The SDPA peer of a backward row times torch.autograd.grad of
SDPA's output (the backward alone, its graph kept). Errors (kiln_err, triton_err):
||x - ref|| / ||ref|| (common.relerr, float64) against SDPA in fp16 on the same inputs: O
for the forward, the largest of dQ, dK, dV's for the backward.

    python3 bench/cliffs_attention.py [--quick]      (this section alone)
"""
import math
import os
import sys

TITLE = ("Attention in the style of Triton's tutorial 06 (K loaded transposed by pointers, "
         "or through host descriptors)")
UNIT = "TFLOP/s"

# (B, H, S, D)
SHAPES = [(4, 32, 4096, 128), (1, 32, 16384, 128), (4, 32, 4096, 64)]
QUICK_SHAPES = [(4, 32, 4096, 128), (4, 32, 4096, 64)]
# forward (BLOCK_M, BLOCK_N, warps, stages)
FWD_CONFIGS = [(128, 64, 8, 3), (128, 128, 8, 3)]
# backward (BLOCK_M1, BLOCK_N1, BLOCK_M2, BLOCK_N2, warps, stages): tutorial 06's tiles
BWD_CONFIGS = [(32, 128, 128, 32, 4, 5), (32, 128, 128, 32, 8, 5)]
BLK_SLICE_FACTOR = 2
PRE_BLOCK = 128  # rows per program of the preprocess kernel


def fwd_launcher(mod, q, k, v, o, m, causal, cfg):
    """A forward call of `mod` (the Kiln module or its Triton twin) at cfg: O into o, the
    base-2 logsumexp into m ((B, H, S) fp32)."""
    BM, BN, warps, stages = cfg
    B, H, S, D = q.shape
    sm_scale = 1.0 / math.sqrt(D)
    grid = (S // BM, B * H)
    return lambda: mod.attn_fwd[grid](
        q, k, v, sm_scale, m, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, S,
        HEAD_DIM=D, BLOCK_M=BM, BLOCK_N=BN, STAGE=3 if causal else 1, num_warps=warps,
        num_stages=stages)


def fwd_fa2_launcher(mod, q, k, v, o, causal, cfg):
    """attn_fwd_fa2 of `mod` at cfg (FlashAttention-2's Triton style: pointers computed from
    the loop's start_n): O into o. q, k, v and o share their strides."""
    BM, BN, warps, stages = cfg
    B, H, S, D = q.shape
    grid = (S // BM, B * H)
    return lambda: mod.attn_fwd_fa2[grid](
        q, k, v, 1.0 / math.sqrt(D), o, *q.stride()[:3], H, S, HEAD_DIM=D, BLOCK_M=BM,
        BLOCK_N=BN, CAUSAL=causal, num_warps=warps, num_stages=stages)


def fwd_desc_launcher(mod, td, q, k, v, o, m, causal, cfg):
    """attn_fwd_desc of `mod` at cfg through `td` (the library's TensorDescriptor class): q,
    k, v, o contiguous, described as (B * H * S, D) matrices."""
    BM, BN, warps, stages = cfg
    B, H, S, D = q.shape
    rows = B * H * S
    descs = [td(x, shape=[rows, D], strides=[D, 1], block_shape=[b, D])
             for x, b in ((q, BM), (k, BN), (v, BN))]
    desc_o = td(o, shape=[rows, D], strides=[D, 1], block_shape=[BM, D])
    grid = (S // BM, B * H)
    return lambda: mod.attn_fwd_desc[grid](
        *descs, 1.0 / math.sqrt(D), m, desc_o, H, S, HEAD_DIM=D, BLOCK_M=BM, BLOCK_N=BN,
        STAGE=3 if causal else 1, num_warps=warps, num_stages=stages)


def bwd_launcher(mod, q, k, v, o, m, do, dq, dk, dv, delta, causal, cfg):
    """A backward call of `mod` at cfg: the preprocess (delta) then dQ, dK, dV. q, k, v, o,
    do, dq, dk, dv share their strides."""
    M1, N1, M2, N2, warps, stages = cfg
    assert N1 == M2, "one program computes dK/dV of BLOCK_N1 keys and dQ of BLOCK_M2 queries"
    B, H, S, D = q.shape
    sm_scale = 1.0 / math.sqrt(D)

    def call():
        mod.attn_bwd_preprocess[(S // PRE_BLOCK, B * H)](
            o, do, delta, *o.stride(), H, S, BLOCK_M=PRE_BLOCK, HEAD_DIM=D)
        mod.attn_bwd[(S // N1, B * H)](
            q, k, v, sm_scale, do, dq, dk, dv, m, delta, *q.stride(), H, S,
            BLOCK_M1=M1, BLOCK_N1=N1, BLOCK_M2=M2, BLOCK_N2=N2,
            BLK_SLICE_FACTOR=BLK_SLICE_FACTOR, HEAD_DIM=D, CAUSAL=causal, num_warps=warps,
            num_stages=stages)
    return call


def _libraries(ctx, src):
    """(name, module, TensorDescriptor class) of Kiln and, when installed, Triton's twin."""
    libs = [("kiln", src, ctx.kiln.TensorDescriptor)]
    if ctx.triton is not None:
        libs.append(("triton", ctx.common.twin(src), ctx.triton_lib.TensorDescriptor))
    return libs


def _time_forward(ctx, row, lib, make, flop, label):
    """Times the forward `make(cfg)` over FWD_CONFIGS into `row` (lib's rate and best
    config; for Triton its best timed again, the noise); the best config, None if none ran
    (the best call ran last: its output is in place)."""
    common, timer = ctx.common, ctx.timer
    t, cfg, fn = common.best_of(make, FWD_CONFIGS, timer, label)
    row.update({lib: common.tflops(flop, t), f"{lib}_cfg": cfg})
    if lib == "triton" and fn is not None:
        row["triton_again"] = common.tflops(flop, timer(fn))
    row.setdefault("_fns", {})[lib] = fn
    return cfg


def rows(ctx):
    torch, common, timer = ctx.torch, ctx.common, ctx.timer
    common.setup_paths()
    import cliff_sources_attention as src
    F = torch.nn.functional
    libs = _libraries(ctx, src)
    out = []
    for B, H, S, D in (QUICK_SHAPES if ctx.quick else SHAPES):
        for causal in ((True,) if ctx.quick else (False, True)):
            torch.manual_seed(0)
            q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16)
                           for _ in range(4))
            shape = f"{B}x{H}x{S} d{D}"
            flop = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
            suffix = "_causal" if causal else ""
            # SDPA: the reference and the peer
            qr, kr, vr = (x.detach().clone().requires_grad_() for x in (q, k, v))
            ref_o = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
            ref_grads = torch.autograd.grad(ref_o, (qr, kr, vr), do, retain_graph=True)
            fwd = {"case": "attn_fwd" + suffix, "dtype": "fp16", "shape": shape,
                   "peer_name": "SDPA default"}
            bwd = dict(fwd, case="attn_bwd" + suffix)
            fwd_desc = dict(fwd, case="attn_fwd_desc" + suffix)
            fwd_fa2 = dict(fwd, case="attn_fwd_fa2" + suffix)

            def sdpa_fn():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            fwd["peer"] = common.tflops(flop, timer(sdpa_fn))
            fwd_desc["peer"] = fwd_fa2["peer"] = fwd["peer"]
            bwd["peer"] = common.tflops(2.5 * flop, timer(
                lambda: torch.autograd.grad(ref_o, (qr, kr, vr), do, retain_graph=True)))
            for lib, mod, td in libs:
                o = torch.full_like(q, float("nan"))
                m = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
                cfg = _time_forward(
                    ctx, fwd_desc, lib,
                    lambda c: fwd_desc_launcher(mod, td, q, k, v, o, m, causal, c), flop,
                    f"{lib} attn_fwd_desc{suffix} {shape}")
                fwd_desc[f"{lib}_err"] = common.relerr(o, ref_o) if cfg else None
                o.fill_(float("nan"))
                cfg = _time_forward(ctx, fwd, lib,
                                    lambda c: fwd_launcher(mod, q, k, v, o, m, causal, c),
                                    flop, f"{lib} attn_fwd{suffix} {shape}")
                fwd[f"{lib}_err"] = common.relerr(o, ref_o) if cfg else None
                o2 = torch.full_like(q, float("nan"))
                cfg2 = _time_forward(ctx, fwd_fa2, lib,
                                     lambda c: fwd_fa2_launcher(mod, q, k, v, o2, causal, c),
                                     flop, f"{lib} attn_fwd_fa2{suffix} {shape}")
                fwd_fa2[f"{lib}_err"] = common.relerr(o2, ref_o) if cfg2 else None
                del o2
                if cfg is None:  # no forward: no O and M for the backward
                    bwd.update({lib: math.nan, f"{lib}_cfg": None, f"{lib}_err": None})
                    continue
                dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
                delta = torch.empty((B, H, S), device="cuda", dtype=torch.float32)
                t, cfg, fn = common.best_of(
                    lambda c: bwd_launcher(mod, q, k, v, o, m, do, dq, dk, dv, delta, causal,
                                           c), BWD_CONFIGS, timer,
                    f"{lib} attn_bwd{suffix} {shape}")
                err = max(common.relerr(g, r) for g, r in zip((dq, dk, dv), ref_grads)) \
                    if cfg else None
                bwd.update({lib: common.tflops(2.5 * flop, t), f"{lib}_cfg": cfg,
                            f"{lib}_err": err})
                if lib == "triton" and fn is not None:
                    bwd["triton_again"] = common.tflops(2.5 * flop, timer(fn))
                bwd.setdefault("_fns", {})[lib] = fn
                del o, m, dq, dk, dv, delta
            # Kiln's and Triton's best of each row again, interleaved, SDPA default beside the
            # forwards (the outputs they write are checked already)
            for row, f in ((fwd, flop), (fwd_desc, flop), (fwd_fa2, flop), (bwd, 2.5 * flop)):
                fns = row.pop("_fns", {})
                if row is not bwd:
                    fns["peer"] = sdpa_fn
                common.interleaved(row, fns, timer, lambda ms, f=f: common.tflops(f, ms))
            for row in (fwd, fwd_desc, fwd_fa2, bwd):
                for key in ("triton", "triton_cfg", "triton_again", "triton_err"):
                    row.setdefault(key, None)
            out += [fwd, fwd_desc, fwd_fa2, bwd]
            del q, k, v, do, qr, kr, vr, ref_o, ref_grads
            torch.cuda.empty_cache()
    return out


def main(argv=None):
    """This section alone: bench_cliffs.py's run of it (same context, table and summary)."""
    import argparse
    p = argparse.ArgumentParser(description=TITLE)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_cliffs
    bench_cliffs.main(["--sections", "attention"] + (["--quick"] if args.quick else []))


if __name__ == "__main__":
    main()
