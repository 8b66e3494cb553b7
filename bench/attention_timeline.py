#!/usr/bin/env python3
"""Where kiln_kernels' flash-attention forward spends a program's time, from the GPU's own
clock: the descriptor forward's walk (non-causal, _attn_fwd_inner_desc, the library's tiles)
with %globaltimer read at the program's entry, after the key loop and after the output's TMA
store, and %smid, written per program. Matching the programs of each SM gives:

    body      entry to the end of the key loop (q's copy, the ring's prologue, every key block)
    output    normalize, the TMA store of O and its wait
    gap       from one program's end to the next program's entry on the same SM (the launch)
    tail      how long each SM idles at the end of the grid (the last wave)

and, from two sequence lengths, the cost of one key block ((body_long - body_short) / (blocks
added)). Beside it, the library's own launch and SDPA with no backend forced, timed in the
same process (common.time_calls medians). Session 28 (bench/results/2026-11-27-h100-session28.md,
section 3) found the key loop's rate, not the program's edges, behind the gap to SDPA.

    python3 bench/attention_timeline.py [--head-dim 128] [--shapes 16x32x1024,4x32x4096]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

common.setup_paths()
import kiln  # noqa: E402
import kiln.language as tl  # noqa: E402
from kiln_kernels import flash_attention as fa  # noqa: E402

# One row of int64 a program: entry, loop end, output stored, SM id.
FIELDS = tl.constexpr(4)


@kiln.jit
def _globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                     is_pure=False, pack=1)


@kiln.jit
def _smid():
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                     is_pure=False, pack=1)


@kiln.jit
def attn_fwd_timed(desc_q, desc_k, desc_v, desc_o, T, sm_scale, N_CTX,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """kiln_kernels' _attn_fwd_desc, non-causal, one head per K/V head, with its timeline
    written to T (FIELDS int64 a program, in grid order)."""
    t_entry = _globaltimer()
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    q_row = off_hz * N_CTX + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([q_row, 0])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    acc, l_i, m_i = fa._attn_fwd_inner_desc(acc, l_i, m_i, q, desc_k, desc_v, off_hz * N_CTX,
                                            qk_scale, offs_m, 0, N_CTX, BLOCK_N, False)
    t_loop = _globaltimer()
    out = acc / l_i[:, None]
    desc_o.store([q_row, 0], out.to(desc_o.dtype))
    t_out = _globaltimer()
    row = T + (off_hz.to(tl.int64) * tl.num_programs(0) + start_m) * FIELDS
    tl.store(row, t_entry)
    tl.store(row + 1, t_loop)
    tl.store(row + 2, t_out)
    tl.store(row + 3, _smid().to(tl.int64))


def timeline(rows):
    """Per-program and per-SM figures (microseconds) of the rows (entry, loop, out, sm)."""
    start = min(r[0] for r in rows)
    end = max(r[2] for r in rows)
    by_sm = {}
    for r in rows:
        by_sm.setdefault(r[3], []).append(r)
    gaps, tails = [], []
    for progs in by_sm.values():
        progs.sort(key=lambda r: r[0])
        tails.append((end - progs[-1][2]) / 1e3)
        gaps += [(b[0] - a[2]) / 1e3 for a, b in zip(progs, progs[1:])]
    return {"body": [(r[1] - r[0]) / 1e3 for r in rows],
            "output": [(r[2] - r[1]) / 1e3 for r in rows],
            "gap": gaps or [0.0], "tail": tails, "span_ms": (end - start) / 1e6,
            "sms": len(by_sm)}


def quartiles(xs):
    """(first quartile, median, third quartile) of xs."""
    if len(xs) < 2:
        return (xs[0],) * 3
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--shapes", default="16x32x1024,4x32x4096", help="BxHxS,... (S a multiple "
                    "of the descriptor tiles' BLOCK_M; two or more give the cost of a key block)")
    ap.add_argument("--rep", type=int, default=30)
    args = ap.parse_args(argv)
    torch = common._torch()
    import torch.nn.functional as F
    D = args.head_dim
    bm, bn, nw, ns = fa.descriptor_tile_config(D)
    print(common.device_line(triton=False), flush=True)
    bodies = []
    for B, H, S in (tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")):
        if S % bm:
            raise SystemExit(f"attention_timeline: S = {S} is not a multiple of BLOCK_M = {bm}")
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        rows = torch.zeros((S // bm) * B * H * FIELDS.value, dtype=torch.int64, device="cuda")

        def desc(x, r):
            return kiln.TensorDescriptor(x.view(-1, D), shape=[x.numel() // D, D],
                                         strides=[D, 1], block_shape=[r, D])
        descs = (desc(q, bm), desc(k, bn), desc(v, bn), desc(o, bm))

        def timed():
            attn_fwd_timed[(S // bm, B * H)](*descs, rows, D ** -0.5, S, HEAD_DIM=D, BLOCK_M=bm,
                                             BLOCK_N=bn, num_warps=nw, num_stages=ns)
        timed()
        torch.cuda.synchronize()
        err = (o.float() - F.scaled_dot_product_attention(q, k, v).float()).abs().max().item()
        ms = {name: float(common.time_calls(fn, args.rep, warmup=10, drain=False))
              for name, fn in (("timed", timed),
                               ("library", lambda: fa.attention_forward(q, k, v, o)),
                               ("sdpa", lambda: F.scaled_dot_product_attention(q, k, v)))}
        timed()
        torch.cuda.synchronize()
        t = timeline(rows.view(-1, FIELDS.value).tolist())
        body = quartiles(t["body"])
        bodies.append((S // bn, body[1]))
        fmt = lambda xs: "/".join(f"{x:.2f}" for x in quartiles(xs))  # noqa: E731
        print(f"{B}x{H}x{S} D{D}: timed {ms['timed']:.3f} ms, library {ms['library']:.3f} ms, "
              f"SDPA default {ms['sdpa']:.3f} ms (library/SDPA {ms['sdpa'] / ms['library']:.3f});"
              f" span {t['span_ms']:.3f} ms on {t['sms']} SMs; max err {err:.1e}")
        print(f"  us (q1/median/q3): body {fmt(t['body'])}  output {fmt(t['output'])}  "
              f"gap {fmt(t['gap'])}  tail {fmt(t['tail'])}", flush=True)
        del q, k, v, o, rows
    if len(bodies) > 1:
        (n0, b0), (n1, b1) = min(bodies), max(bodies)
        if n1 > n0:
            print(f"key block: ({b1:.2f} - {b0:.2f}) us / {n1 - n0} blocks = "
                  f"{(b1 - b0) / (n1 - n0):.3f} us")


if __name__ == "__main__":
    main()
