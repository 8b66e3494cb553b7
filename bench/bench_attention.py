"""Flash attention forward on the GPU: Kiln (kernels/python/kiln_kernels/flash_attention.py)
beside, in one run:
  - Triton on the same source ("triton"): the twin of kiln_kernels.flash_attention (its text
    under Triton's imports, bench/common.py), launched by the same host code
    (attention_forward) with the same tiles, num_warps, num_stages and loop (overlap);
  - Triton on a formulation in the structure of Triton's fused-attention tutorial
    ("triton_tutorial"): bench/cliff_sources_attention.py's forward (the cliff benchmark's
    source, K loaded transposed by pointers, S a multiple of BLOCK_M) under Triton, at the
    same tiles, num_warps and num_stages. (Until session 20 this column was a Triton-only
    kernel of the same structure, bench/triton_peers.py; before bench/common.py it was the
    bench's only Triton column: "triton" in the results files written until then is that
    kernel);
  - torch SDPA on its flash backend ("sdpa"), and SDPA as a user gets it, no backend forced
    ("sdpa_default": cuDNN's on an H100 with torch 2.11): the peer issue #23 measures against.

Each case: q, k, v fp16 (B, H, S, D) from randn; every output against SDPA's (max abs error),
then each timed as the median of --rep per-launch CUDA-event timings (common.time_calls). Both
Triton kernels run at Kiln's tiles and at each of --triton-tiles; each one's fastest is its
figure. Then Kiln, its plain loop, the twin's fastest and SDPA default run again in --rounds
interleaved rounds (the order rotated and reversed each round: the H100 slows as it heats,
and a fixed order favours what goes first) and each figure is the median of its rounds.
Prints key=value lines (ms, TFLOP/s with flops = 4 * B * H * S^2 * D, halved for causal,
and Kiln's ratio to each peer as speed: >1 is faster) and a markdown table last.

Run: PYTHONPATH=<staged kiln package>:kernels/python python3 bench/bench_attention.py
     [--shapes 4x32x4096,1x32x16384] [--head-dim 128] [--dtype fp16] [--causal both]
     [--rep 100] [--block-m 128 --block-n 64 --warps 8 --stages 3]
     [--triton-tiles 128x64x8x3,128x64x8x4,128x128x8x3] [--overlap auto|on|off|both|fa3|fa3-both]
     [--peers twin,tutorial] [--descriptors auto|off]
Kiln's row is attention_forward's default path: through tensor descriptors
(_attn_fwd_desc, descriptor_tile_config's tiles) for these contiguous inputs, unless
--descriptors off; the Triton twin takes the same path and tiles. On the pointer path Kiln's
row and the twin's take attention_forward's default loop (--overlap auto: the rotated one on
the pointer path at D128; on the descriptor path FlashAttention-3's order, warp-specialized,
at D128 on sm_90, non-causal over every query block a program owns (the persistent kernel,
which the twin then runs under Triton too), else the plain one), the rotated loop
(overlap=True) with --overlap on or both, the plain loop with off; both also times the plain
loop (columns "Kiln plain").
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import report  # noqa: E402

ROWS = []
torch = F = k_fa = None  # set by main()


def bench_ms(fn, rep, warmup=10):
    """Median of `rep` per-launch CUDA-event timings (ms), after `warmup` launches, all queued
    back to back (bench_attention_bwd.py times the same way)."""
    return common.time_calls(fn, rep, warmup=warmup, drain=False)


def sdpa_flash():
    """A context manager that restricts SDPA to its flash backend."""
    import torch
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:  # torch < 2.3
        return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                              enable_mem_efficient=False)


def bench_case(B, H, S, D, dtype, causal, args, peers):
    key = f"attn_{'fp16' if dtype == torch.float16 else 'bf16'}_b{B}_h{H}_s{S}_d{D}" + \
          ("_causal" if causal else "")
    sm_scale = 1.0 / math.sqrt(D)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
    outs = {name: torch.empty_like(q) for name in ("kiln", "kiln_plain", "triton",
                                                   "triton_tutorial")}
    # the path attention_forward takes by default: descriptors for contiguous tensors with
    # whole blocks (_attn_fwd_desc), else pointers (_attn_fwd)
    overlap = {"auto": None, "off": False, "fa3": "fa3", "fa3-both": "fa3"}.get(args.overlap,
                                                                               True)
    # (the descriptor path's default loop: FlashAttention-3's order at D 128 on sm_90)
    desc_overlap = (k_fa.descriptor_overlap_default(D, q.device, causal, S) if overlap is None
                    else overlap)
    desc_tiles = k_fa.descriptor_tile_config(D, causal, desc_overlap)
    descriptors = args.descriptors == "auto" and k_fa._descriptor_path(
        q, k, v, outs["kiln"], args.block_m or desc_tiles[0])
    bm0, bn0, nw0, ns0 = desc_tiles if descriptors else k_fa.tile_config(D)
    bm, bn = args.block_m or bm0, args.block_n or bn0
    nw, ns = args.warps or nw0, args.stages or ns0
    report(f"{key}_tiles", f"BLOCK_M={bm},BLOCK_N={bn},num_warps={nw},num_stages={ns}")
    report(f"{key}_path", "descriptors" if descriptors else "pointers")

    def kiln_call(out, overlap):
        return lambda: k_fa.attention_forward(q, k, v, out, None, causal=causal,
                                              sm_scale=sm_scale, block_m=bm, block_n=bn,
                                              num_warps=nw, num_stages=ns, overlap=overlap,
                                              descriptors=descriptors)

    # Triton runs at Kiln's tiles and at each of --triton-tiles; its fastest is the peer.
    cfgs = [(bm, bn, nw, ns)]
    for spec in filter(None, args.triton_tiles.split(",")):
        cfg = tuple(int(x) for x in spec.split("x"))
        if cfg not in cfgs:
            cfgs.append(cfg)
    makers = {}
    if "twin" in peers:
        def twin_call(cfg):
            c_bm, c_bn, c_nw, c_ns = cfg
            return lambda: peers["twin"].attention_forward(
                q, k, v, outs["triton"], None, causal=causal, sm_scale=sm_scale, block_m=c_bm,
                block_n=c_bn, num_warps=c_nw, num_stages=c_ns, overlap=overlap,
                descriptors=descriptors)
        makers["triton"] = (twin_call, cfgs)
    if "tutorial" in peers:
        import cliffs_attention
        lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)

        def tutorial_call(cfg):  # (its sm_scale is 1 / sqrt(D), as here)
            return cliffs_attention.fwd_launcher(peers["tutorial"], q, k, v,
                                                 outs["triton_tutorial"], lse, causal, cfg)
        makers["triton_tutorial"] = (tutorial_call, [c for c in cfgs if S % c[0] == 0 and
                                                     c[0] % c[1] == 0])

    def sdpa_fn():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)

    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    ms, err, tiles = {}, {}, {"kiln": f"{bm}x{bn}x{nw}x{ns}"}

    def check(name, out):
        err[name] = (out.float() - ref.float()).abs().max().item()
        report(f"{key}_{name}_maxabs_vs_sdpa", err[name], "{:.3e}")
        if not err[name] < args.tol:
            report(f"{key}_{name}_CHECK", "FAIL")

    with sdpa_flash():
        ref = sdpa_fn()
        impls = [("kiln", kiln_call(outs["kiln"], overlap))]
        finals = dict(impls[:1])
        if args.overlap in ("both", "fa3-both"):
            impls.append(("kiln_plain", kiln_call(outs["kiln_plain"], False)))
        for name, fn in impls:
            try:
                fn()
                torch.cuda.synchronize()
                check(name, outs[name])
                ms[name] = bench_ms(fn, args.rep)
            except Exception as e:  # keep going: one failing impl must not hide the others
                report(f"{key}_{name}_ERROR", repr(e).replace("\n", " ")[:500])
                ms[name] = float("nan")
        for name, (make, name_cfgs) in makers.items():
            def log(cfg, t, name=name):
                if isinstance(t, Exception):
                    report(f"{key}_{name}_{common.fmt_config(cfg)}_ERROR",
                           repr(t).replace("\n", " ")[:300])
                else:
                    report(f"{key}_{name}_{common.fmt_config(cfg)}_ms", float(t))
            t, cfg, best_fn = common.best_of(make, name_cfgs,
                                             lambda fn: bench_ms(fn, args.rep),
                                             f"{key} {name}", on_result=log)
            ms[name] = float(t)
            if best_fn is not None:
                finals[name] = best_fn
            if cfg is not None:
                tiles[name] = common.fmt_config(cfg)
                report(f"{key}_{name}_tiles", tiles[name])
                check(name, outs[name])
        try:
            sdpa_fn()
            ms["sdpa"] = bench_ms(sdpa_fn, args.rep)
        except Exception as e:
            report(f"{key}_sdpa_ERROR", repr(e).replace("\n", " ")[:500])
            ms["sdpa"] = float("nan")
    try:  # the default backend choice, outside sdpa_flash()
        check("sdpa_default", sdpa_fn())
        ms["sdpa_default"] = bench_ms(sdpa_fn, args.rep)
        finals["sdpa_default"] = sdpa_fn
    except Exception as e:
        report(f"{key}_sdpa_default_ERROR", repr(e).replace("\n", " ")[:500])
        ms["sdpa_default"] = float("nan")
    if "kiln_plain" in ms and ms["kiln_plain"] == ms["kiln_plain"]:
        finals["kiln_plain"] = impls[1][1]
    if args.rounds > 0 and "kiln" in finals and ms["kiln"] == ms["kiln"]:
        # The figures above ran one after another, the peers last, on a GPU whose clock
        # falls as it heats (an H100 at its power limit: 1.9 -> 1.5 GHz within one case).
        # Time Kiln, its plain loop, Triton's best and SDPA default again in --rounds rounds,
        # the order rotated and reversed from round to round; each figure is its median.
        runs = common.interleaved_times(finals, lambda fn: bench_ms(fn, args.rep), args.rounds,
                                        rotate=True)
        for name in runs:
            ms[name] = statistics.median(runs[name])
            report(f"{key}_{name}_rounds_ms", " ".join(f"{t:.4f}" for t in runs[name]))
    for name, t in ms.items():
        report(f"{key}_{name}_ms", float(t))
        report(f"{key}_{name}_tflops", flops / t / 1e9, "{:.1f}")
    for peer in ("triton", "triton_tutorial", "sdpa", "sdpa_default"):
        if peer in ms:
            report(f"{key}_kiln_vs_{peer}", ms[peer] / ms["kiln"])
    if "kiln_plain" in ms:
        for peer in ("triton", "triton_tutorial"):
            if peer in ms:
                report(f"{key}_kiln_plain_vs_{peer}", ms[peer] / ms["kiln_plain"])
        report(f"{key}_overlap_vs_plain", ms["kiln_plain"] / ms["kiln"])
    ROWS.append((key, flops, ms, err, tiles))
    del q, k, v, outs, ref
    torch.cuda.empty_cache()


def main():
    global torch, F, k_fa
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4x32x4096,1x32x16384", help="BxHxS,...")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--causal", default="both", choices=["both", "false", "true"])
    ap.add_argument("--rep", type=int, default=100, help="timed launches per impl")
    ap.add_argument("--tol", type=float, default=1e-2, help="max abs error vs SDPA")
    ap.add_argument("--rounds", type=int, default=5,
                    help="then Kiln, its plain loop, Triton's best and SDPA default timed again "
                    "in this many interleaved rounds (order rotated), medians reported; 0: "
                    "each timed once, one after another")
    ap.add_argument("--block-m", type=int, default=0, help="0: tile_config's")
    ap.add_argument("--block-n", type=int, default=0)
    ap.add_argument("--warps", type=int, default=0)
    ap.add_argument("--stages", type=int, default=0)
    ap.add_argument("--descriptors", default="auto", choices=["auto", "off"],
                    help="auto: attention_forward's default path (descriptors for contiguous "
                         "tensors with whole blocks), off: the pointer kernel")
    ap.add_argument("--overlap", default="auto",
                    choices=["auto", "on", "off", "both", "fa3", "fa3-both"],
                    help="auto: attention_forward's default loop; on: the rotated loop "
                    "(overlap=True); both: on, and also times the plain loop; fa3: "
                    "FlashAttention-3's order on the descriptor path (overlap='fa3', the "
                    "twin too); fa3-both: fa3, and also times the plain loop")
    ap.add_argument("--triton-tiles", default="128x64x8x3,128x64x8x4,128x128x8x3",
                    help="BMxBNxWARPSxSTAGES,...: Triton also runs at these; its fastest counts")
    ap.add_argument("--peers", default="twin,tutorial",
                    help="Triton peers to time: twin (the same source), tutorial (the "
                    "tutorial-style source of bench_cliffs.py, under Triton); empty: Kiln and "
                    "SDPA only")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    import kiln
    common.setup_paths()
    from kiln_kernels import flash_attention as k_fa
    peers = {}
    wanted = set(filter(None, args.peers.split(",")))
    if wanted:
        triton, why = common.triton_or_none()
        if triton is None:
            print(f"triton unavailable ({why}): Kiln and SDPA only", file=sys.stderr)
        else:
            if "twin" in wanted:
                peers["twin"] = common.twin(k_fa)
            if "tutorial" in wanted:
                import cliff_sources_attention
                peers["tutorial"] = common.twin(cliff_sources_attention)
    torch.manual_seed(0)
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    print(common.device_line(), flush=True)
    report("kiln_gpu", kiln.has_gpu())
    causals = {"both": (False, True), "false": (False,), "true": (True,)}[args.causal]
    for causal in causals:
        for shape in args.shapes.split(","):
            B, H, S = (int(x) for x in shape.split("x"))
            try:
                bench_case(B, H, S, args.head_dim, dtype, causal, args, peers)
            except Exception as e:
                report(f"b{B}_h{H}_s{S}_causal{int(causal)}_ERROR",
                       repr(e).replace("\n", " ")[:500])
            torch.cuda.empty_cache()
    nan = float("nan")
    rows = []
    for key, flops, ms, err, tiles in ROWS:
        tf = {n: flops / t / 1e9 for n, t in ms.items()}
        k = ms["kiln"]
        rows.append([key, f"{k:.3f}", common.fmt(ms.get("triton"), ".3f"),
                     common.fmt(ms.get("triton_tutorial"), ".3f"), f"{ms['sdpa']:.3f}",
                     f"{tf['kiln']:.1f}", common.fmt(tf.get("triton")),
                     common.fmt(tf.get("triton_tutorial")), f"{tf['sdpa']:.1f}",
                     common.fmt(ms.get("triton", nan) / k, ".3f"),
                     common.fmt(ms.get("triton_tutorial", nan) / k, ".3f"),
                     f"{ms['sdpa'] / k:.3f}", common.fmt(err.get("kiln"), ".1e"),
                     common.fmt(err.get("triton"), ".1e"),
                     common.fmt(err.get("triton_tutorial"), ".1e"), tiles["kiln"],
                     tiles.get("triton", "-"), tiles.get("triton_tutorial", "-"),
                     common.fmt(tf.get("kiln_plain")),
                     common.fmt(ms.get("triton", nan) / ms.get("kiln_plain", nan), ".3f"),
                     common.fmt(tf.get("sdpa_default")),
                     common.fmt(ms.get("sdpa_default", nan) / k, ".3f")])
    print()
    common.markdown_table(
        ["case", "Kiln ms", "Triton ms", "Triton tutorial ms", "SDPA ms", "Kiln TFLOP/s",
         "Triton TFLOP/s", "Triton tutorial TFLOP/s", "SDPA TFLOP/s", "Kiln/Triton",
         "Kiln/Triton tutorial", "Kiln/SDPA flash", "Kiln max err", "Triton max err",
         "Triton tutorial max err", "Kiln tiles", "Triton tiles", "Triton tutorial tiles",
         "Kiln plain TFLOP/s", "plain/Triton", "SDPA default TFLOP/s", "Kiln/SDPA default"],
        rows, align="l" + "r" * 14 + "lll" + "rrrr")
    print("\nratios are speed (time of the peer / time of Kiln): >= 1 means Kiln is as fast or"
          " faster; errors are max |out - SDPA flash|; tiles BLOCK_MxBLOCK_NxWARPSxSTAGES, each"
          " Triton kernel at the fastest of Kiln's and --triton-tiles; Triton: the same source"
          " (the twin), Triton tutorial: Triton's formulation")


if __name__ == "__main__":
    main()
