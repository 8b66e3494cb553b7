"""The attention ops of kiln_models (kernels/python/kiln_models/ops/attention.py) on the GPU, at
Llama-3.2-1B's heads (32 query heads, 8 KV heads, head_dim 64, bf16, KV blocks of 16), beside
torch SDPA where it has a peer.

Cases
    rope_cache     T = 1, 16 (decode rows) and 8,192 (a 4 x 2,048 prefill)
    decode         B 1 / 4 / 16 x contexts 128 / 512 / 2,048 / 4,096 (every sequence of the
                   batch at that context, its blocks scattered over the cache), three ways:
                     fused     decode_attention with RoPE + cache write and the split combine in
                               one kernel (scratch with counters, positions/cos/sin/slot_mapping)
                     counters  rope_cache, then decode_attention combining in the kernel
                     separate  rope_cache, decode_attention, _decode_combine: what the model
                               launched before (scratch of two arrays)
                   peer: SDPA on K/V already gathered into contiguous [B, Hkv, ctx, D] tensors
                   (enable_gqa), the gather not timed; the fused kernel also at each of
                   --decode-tiles (BLOCK_N x num_warps, x0: without the key loop's
                   software pipelining)
    prefill        4 x 2,048 fresh prompts (kv_from_qkv=True, the model's path, and through the
                   block table) and 4 x 512 new tokens continuing 1,536 cached ones (the block
                   table); peer: SDPA causal on contiguous q/k/v (bottom-right causal for the
                   continued prompts)

Times
    graph_us   per call, `--layers` calls (each over its own layer's KV cache, as the 16 layers
               of a decode step) captured in one torch.cuda.CUDAGraph and replayed, CUDA events
               around the replays (a decode step's cost per layer, gaps between kernels
               included; the caches of small contexts stay in L2 across the layers)
    kernel_us  per call, the sum of the op's kernels' GPU durations from CUPTI
               (torch.profiler), eager launches with the L2 scrubbed (256 MiB written) before
               each call: the per-kernel figure the model's profile shows
    GB/s       decode: the K and V bytes read (B * Hkv * ctx * D * 2 * 2) over kernel_us;
               rope_cache: qkv's q/k read and written, v read, k/v written to the cache
    TFLOP/s    prefill: 4 * D * Hq * (query, key) pairs that the causal mask keeps

Prints key=value lines and markdown tables.

Run: PYTHONPATH=<kiln package>:kernels/python python3 bench/bench_models_attention.py
     [--only rope,decode,prefill] [--batches 1,4,16] [--contexts 128,512,2048,4096]
     [--layers 16] [--reps 20] [--num-splits N] [--split-min-tokens N]
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import fmt, markdown_table, report  # noqa: E402

torch = att = None
HQ, HKV, D, BS = 32, 8, 64, 16
KERNELS = ("_rope_cache_kernel", "_decode_kernel", "_decode_combine", "_prefill_kernel")


def setup():
    global torch, att
    import torch
    common.setup_paths()
    from kiln_models.ops import attention as att


# ====================================================================== timing

def graph_us(calls, replays=20):
    """Microseconds per call of `calls` (a list of functions, run in order) captured in one
    CUDA graph, over `replays` timed replays (median)."""
    for c in calls:  # compiles, loads modules: outside the capture
        c()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            for c in calls:
                c()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / len(calls))
    return float(np.median(times))


_SCRUB = None


def kernel_us(fn, reps):
    """({kernel name: us per call}, total us per call): CUPTI durations of the op's kernels
    over `reps` eager calls, the L2 scrubbed before each."""
    global _SCRUB
    from torch.profiler import ProfilerActivity, profile
    if _SCRUB is None:
        _SCRUB = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            _SCRUB.zero_()
            fn()
        torch.cuda.synchronize()
    per = {}
    for e in prof.key_averages():
        name = next((k for k in KERNELS if k in e.key), None)
        if name is None:
            continue
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0.0)
        per[name] = per.get(name, 0.0) + float(t) / reps
    return per, sum(per.values())


def events_us(fn, reps):
    """Median microseconds of single eager calls between CUDA events (the L2 not scrubbed)."""
    return float(common.time_calls(fn, reps, batch=1, warmup=3)) * 1e3


# ====================================================================== inputs

def dev(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to("cuda")


def rope_tables(P):
    inv = 1.0 / 500000.0 ** (np.arange(0, D, 2) / D)
    ang = np.arange(P)[:, None] * inv[None, :]
    return dev(np.cos(ang).astype(np.float32)), dev(np.sin(ang).astype(np.float32))


class Paged:
    """B sequences of ctx keys over `layers` KV caches of [blocks, 16, Hkv, D] bf16 (one per
    layer, as the model's), blocks handed out in a random order; the decode step's row b is
    the new token at position ctx - 1."""

    def __init__(self, B, ctx, layers, seed=0, new=1):
        rng = np.random.default_rng(seed)
        nb = -(-ctx // BS)
        self.B, self.ctx, self.new = B, ctx, new
        self.num_blocks = B * nb + 1
        order = rng.permutation(self.num_blocks)[:B * nb]
        self.h_tables = order.reshape(B, nb).astype(np.int32)
        self.tables = dev(self.h_tables)
        self.context_lens = dev(np.full(B, ctx, np.int32))
        shape = (self.num_blocks, BS, HKV, D)
        self.k = [torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(layers)]
        self.v = [torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(layers)]
        j = np.arange(ctx - new, ctx)
        slots = self.h_tables[:, j // BS] * BS + j % BS                # [B, new]
        self.h_slots = slots.reshape(-1).astype(np.int32)
        self.slots = dev(self.h_slots)
        self.positions = dev(np.tile(j, B).astype(np.int32))

    def gathered(self, layer):
        """K, V of layer as contiguous [B, Hkv, ctx, D] tensors (the SDPA peer's input)."""
        j = np.arange(self.ctx)
        slots = dev((self.h_tables[:, j // BS] * BS + j % BS).astype(np.int64))
        kf = self.k[layer].view(-1, HKV, D)[slots]                       # [B, ctx, Hkv, D]
        vf = self.v[layer].view(-1, HKV, D)[slots]
        return kf.transpose(1, 2).contiguous(), vf.transpose(1, 2).contiguous()


def kv_bytes(B, ctx):
    return B * HKV * ctx * D * 2 * 2


# ====================================================================== cases

def bench_rope(args, rows):
    cos, sin = rope_tables(8192)
    for T in (1, 16, 8192):
        p = Paged(1, max(T, 16), 1, seed=T, new=T)
        qkv = torch.randn(T, (HQ + 2 * HKV) * D, device="cuda", dtype=torch.bfloat16)
        fn = lambda: att.rope_cache(qkv, p.positions, cos, sin, p.k[0], p.v[0],  # noqa: E731
                                    p.slots, HQ, HKV, D)
        g = graph_us([fn] * args.layers)
        per, k = kernel_us(fn, args.reps)
        nbytes = T * ((HQ + HKV) * D * 2 + HKV * D + 2 * HKV * D) * 2
        gbs = nbytes / (k * 1e-6) / 1e9 if k else math.nan
        key = f"rope_cache_T{T}"
        report(f"{key}_graph_us", g)
        report(f"{key}_kernel_us", k)
        rows.append((f"rope_cache T={T}", fmt(g, ".2f"), fmt(k, ".2f"), fmt(gbs, ".0f")))


def decode_calls(p, qkv, out, scratch2, scratch3, cos, sin, mode, args, tile=None):
    """The per-layer call of one decode variant (see the module's docstring); tile: the
    decode kernel's (BLOCK_N, num_warps[, prefetch]), None for the default."""
    kw = dict(split_min_tokens=args.split_min_tokens, tile=tile and tuple(tile[:2]),
              single_split_tokens=args.single_split_tokens)
    if tile and len(tile) > 2:
        kw["prefetch"] = bool(tile[2])
    if args.num_splits:
        kw["num_splits"] = args.num_splits

    def make(layer):
        k, v = p.k[layer], p.v[layer]
        q = qkv[layer]

        def fused():
            att.decode_attention(q, k, v, p.tables, p.context_lens, out, HQ, HKV, D, 0.125,
                                 scratch=scratch3, positions=p.positions, cos=cos, sin=sin,
                                 slot_mapping=p.slots, **kw)

        def unfused(scratch):
            def call():
                att.rope_cache(q, p.positions, cos, sin, k, v, p.slots, HQ, HKV, D)
                att.decode_attention(q, k, v, p.tables, p.context_lens, out, HQ, HKV, D,
                                     0.125, scratch=scratch, **kw)
            return call
        return {"fused": fused, "counters": unfused(scratch3),
                "separate": unfused(scratch2)}[mode]
    return [make(i) for i in range(len(p.k))]


def bench_decode(args, rows, tile_rows):
    F = torch.nn.functional
    cos, sin = rope_tables(max(args.contexts) + 1)
    shapes = att.decode_attention_scratch(max(args.batches), HQ, D, max(args.contexts),
                                          n_kv_heads=HKV, counters=True)
    part = tuple(torch.empty(s, device="cuda") for s in shapes[:2])
    scratch3 = part + (torch.zeros(shapes[2], device="cuda", dtype=torch.int32),)
    for B in args.batches:
        for ctx in args.contexts:
            layers = max(1, min(args.layers, (4 << 30) // kv_bytes(B, ctx)))
            p = Paged(B, ctx, layers, seed=B * 7919 + ctx)
            base = torch.randn(B, (HQ + 2 * HKV) * D, device="cuda", dtype=torch.bfloat16)
            qkv = [base.clone() for _ in range(layers)]
            out = torch.empty(B, HQ * D, device="cuda", dtype=torch.bfloat16)

            # check: fused against rope_cache + decode, both against SDPA on gathered K/V
            ref_q = base.clone()
            k0, v0 = p.k[0].clone(), p.v[0].clone()
            att.rope_cache(ref_q, p.positions, cos, sin, k0, v0, p.slots, HQ, HKV, D)
            p.k[0].copy_(k0)
            p.v[0].copy_(v0)
            kg, vg = p.gathered(0)
            qh = ref_q[:, :HQ * D].view(B, HQ, 1, D)
            sdpa = F.scaled_dot_product_attention(qh.float(), kg.float(), vg.float(),
                                                  scale=0.125, enable_gqa=True)
            qkv[0].copy_(base)
            decode_calls(p, qkv, out, part, scratch3, cos, sin, "fused", args)[0]()
            err = ((out.float() - sdpa.view(B, -1)).abs().max()).item()
            report(f"decode_B{B}_ctx{ctx}_fused_maxerr_vs_sdpa", err, "{:.2e}")

            key = f"decode_B{B}_ctx{ctx}"
            res = {}
            for mode in ("fused", "counters", "separate"):
                calls = decode_calls(p, qkv, out, part, scratch3, cos, sin, mode, args)
                g = graph_us(calls)
                per, k = kernel_us(calls[0], args.reps)
                res[mode] = (g, k, per)
                report(f"{key}_{mode}_graph_us", g)
                report(f"{key}_{mode}_kernel_us", k)
                for name, t in per.items():
                    report(f"{key}_{mode}_{name.strip('_')}_us", t)

            def peer():
                F.scaled_dot_product_attention(qh, kg, vg, scale=0.125, enable_gqa=True)
            try:
                t_peer = events_us(peer, args.reps)
            except Exception as e:  # an older torch without enable_gqa
                print(f"  SDPA peer: {type(e).__name__}: {e}", file=sys.stderr)
                t_peer = math.nan
            report(f"{key}_sdpa_gathered_us", t_peer)
            tiles = []
            for tile in args.decode_tiles:
                name = "x".join(str(t) for t in tile)
                try:
                    calls = decode_calls(p, qkv, out, part, scratch3, cos, sin, "fused", args,
                                         tile)
                    calls[0]()
                    e = (out.float() - sdpa.view(B, -1)).abs().max().item()
                    g = graph_us(calls)
                    _, k = kernel_us(calls[0], args.reps)
                except Exception as ex:
                    print(f"  tile {name}: {type(ex).__name__}: {str(ex)[-300:]}",
                          file=sys.stderr)
                    e = g = k = math.nan
                report(f"{key}_fused_tile{name}_graph_us", g)
                report(f"{key}_fused_tile{name}_kernel_us", k)
                report(f"{key}_fused_tile{name}_maxerr_vs_sdpa", e, "{:.2e}")
                tiles += [fmt(g, ".2f"), fmt(k, ".2f")]
            tile_rows.append((f"B={B} ctx={ctx}", *tiles))
            splits = min(shapes[1][2], att.decode_split_count(
                B, HKV, p.h_tables.shape[1] * BS, args.split_min_tokens))
            gbs = kv_bytes(B, ctx) / (res["fused"][1] * 1e-6) / 1e9
            rows.append((f"B={B} ctx={ctx}", splits, layers,
                         *(fmt(res[m][i], ".2f") for m in ("fused", "counters", "separate")
                           for i in (0, 1)),
                         fmt(gbs, ".0f"), fmt(t_peer, ".2f")))
            del p, qkv


def causal_pairs(new, ctx):
    """(query, key) pairs a causal mask keeps for `new` queries at the end of `ctx` keys."""
    return new * (ctx - new) + new * (new + 1) // 2


def bench_prefill(args, rows):
    F = torch.nn.functional
    cases = [("fresh 4x2048 (kv_from_qkv)", 2048, 2048, True),
             ("fresh 4x2048 (block table)", 2048, 2048, False),
             ("continued 4x512 after 1536", 512, 2048, False)]
    for name, new, ctx, from_qkv in cases:
        B = 4
        T = B * new
        p = Paged(B, ctx, 1, seed=new + ctx, new=new)
        qkv = torch.randn(T, (HQ + 2 * HKV) * D, device="cuda", dtype=torch.bfloat16)
        # the new tokens' K/V in the cache (rope_cache's job; here a copy of qkv's columns)
        kv_rows = qkv[:, HQ * D:].view(T, 2, HKV, D)
        p.k[0].view(-1, HKV, D)[p.slots.long()] = kv_rows[:, 0]
        p.v[0].view(-1, HKV, D)[p.slots.long()] = kv_rows[:, 1]
        cu = dev(np.arange(0, T + 1, new, dtype=np.int32))
        out = torch.empty(T, HQ * D, device="cuda", dtype=torch.bfloat16)

        def fn():
            att.prefill_attention(qkv, p.k[0], p.v[0], cu, p.tables, p.context_lens, out, new,
                                  HQ, HKV, D, 0.125, kv_from_qkv=from_qkv)
        t_ev = float(common.do_bench(fn, rep=200)) * 1e3
        per, k = kernel_us(fn, max(5, args.reps // 4))
        flop = 4 * D * HQ * B * causal_pairs(new, ctx)
        tf = flop / (k * 1e-6) / 1e12 if k else math.nan

        q = qkv[:, :HQ * D].view(B, new, HQ, D).transpose(1, 2)
        kg, vg = p.gathered(0)
        if new == ctx:
            def peer():
                F.scaled_dot_product_attention(q, kg, vg, is_causal=True, scale=0.125,
                                               enable_gqa=True)
        else:
            from torch.nn.attention.bias import causal_lower_right
            bias = causal_lower_right(new, ctx)
            kr = kg.repeat_interleave(HQ // HKV, dim=1)
            vr = vg.repeat_interleave(HQ // HKV, dim=1)

            def peer():
                F.scaled_dot_product_attention(q, kr, vr, attn_mask=bias, scale=0.125)
        try:
            t_peer = float(common.do_bench(peer, rep=200)) * 1e3
        except Exception as e:
            print(f"  SDPA peer ({name}): {type(e).__name__}: {e}", file=sys.stderr)
            t_peer = math.nan
        # check against fp32 SDPA on the same inputs (first sequence, 4 heads)
        j = torch.arange(ctx, device="cuda")
        mask = j[None, :] <= (ctx - new + torch.arange(new, device="cuda"))[:, None]
        qs = q[:1, :4].float()
        ks = kg[:1].float().repeat_interleave(HQ // HKV, dim=1)[:, :4]
        vs = vg[:1].float().repeat_interleave(HQ // HKV, dim=1)[:, :4]
        r = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=0.125)
        got = out[:new].view(new, HQ, D)[:, :4].transpose(0, 1).float()
        err = (got - r[0]).abs().max().item()
        key = "prefill_" + name.split()[0] + ("_qkv" if from_qkv else "_paged")
        report(f"{key}_maxerr_vs_sdpa", err, "{:.2e}")
        report(f"{key}_us", t_ev)
        report(f"{key}_kernel_us", k)
        report(f"{key}_tflops", tf)
        report(f"{key}_sdpa_us", t_peer)
        rows.append((name, fmt(t_ev, ".1f"), fmt(k, ".1f"), fmt(tf, ".0f"), fmt(t_peer, ".1f"),
                     fmt(flop / (t_peer * 1e-6) / 1e12 if t_peer == t_peer else math.nan,
                         ".0f")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="rope,decode,prefill")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--contexts", default="128,512,2048,4096")
    ap.add_argument("--layers", type=int, default=16,
                    help="calls per captured graph, each over its own KV cache")
    ap.add_argument("--reps", type=int, default=20, help="profiled calls per case")
    ap.add_argument("--num-splits", type=int, default=None,
                    help="force the decode split count (at most the scratch's)")
    ap.add_argument("--split-min-tokens", type=int, default=None)
    ap.add_argument("--single-split-tokens", type=int, default=None,
                    help="decode contexts of at most this many keys run in one split "
                         "(default: twice split_min_tokens)")
    ap.add_argument("--decode-tiles", default="64x4,64x8,128x8,32x2,64x4x0,64x8x0",
                    help="(BLOCK_N)x(num_warps)[x(prefetch 0/1)] tiles of the fused decode "
                         "kernel to time beside the default ('' for none)")
    args = ap.parse_args()
    args.batches = [int(x) for x in args.batches.split(",")]
    args.contexts = [int(x) for x in args.contexts.split(",")]
    args.decode_tiles = [tuple(int(y) for y in x.split("x")) for x in
                         args.decode_tiles.split(",") if x.strip()]
    setup()
    if args.split_min_tokens is None:
        args.split_min_tokens = att.SPLIT_MIN_TOKENS
    print(common.device_line(triton=False))
    only = set(args.only.split(","))
    if "rope" in only:
        rows = []
        bench_rope(args, rows)
        markdown_table(["rope_cache", "graph us", "kernel us", "GB/s"], rows,
                       title="rope_cache (Llama-3.2-1B heads, bf16)")
    if "decode" in only:
        rows, tile_rows = [], []
        bench_decode(args, rows, tile_rows)
        markdown_table(["case", "splits", "layers", "fused graph us", "fused kernel us",
                        "counters graph us", "counters kernel us", "separate graph us",
                        "separate kernel us", "fused GB/s", "SDPA gathered us"], rows,
                       title="decode attention per layer (rope + attention; graph: replayed "
                             "step, kernel: CUPTI, L2 scrubbed)")
        if args.decode_tiles:
            markdown_table(["case"] + ["x".join(map(str, t)) + f" {w} us"
                                       for t in args.decode_tiles
                                       for w in ("graph", "kernel")], tile_rows,
                           title="fused decode by tile (BLOCK_N x num_warps [x prefetch])")
    if "prefill" in only:
        rows = []
        bench_prefill(args, rows)
        markdown_table(["prefill", "us (events)", "kernel us", "TFLOP/s", "SDPA us",
                        "SDPA TFLOP/s"], rows, title="prefill attention, one layer")


if __name__ == "__main__":
    main()
