"""kiln_models.ops at Llama-3.2-1B's shapes on the GPU (issue #24): the decode linears (bf16, int8,
int4; rows of x 1 and 16), the LM head's argmax and the prefill linears, beside torch peers
where they exist (F.linear: cuBLAS; torch.argmax), in one run.

Each case checks Kiln's output against torch (bf16: F.linear; int8/int4: F.linear on the
dequantized weights), then times it with common.do_bench (single calls between CUDA events;
the L2 emptied before each by default, as a decode step finds the weights: the 1B model's
2.5 GB never stay in the 50 MB L2). Prints key=value lines and a markdown table per part:
microseconds, GB/s of weight bytes (int4: packed nibbles + fp32 group scales; int8: codes +
fp32 row scales), and the fraction of the weight-read floor (weight bytes / --peak-gbps,
3350 for an H100 SXM's HBM3). Both decode plans of `linear` are timed where both apply
(`gemv=True`: CUDA cores, `gemv=False`: the tensor-core tiles with split-K), and `auto` is
what the model runs (linear.GEMV_MAX_M). "step" rows add one decode step's linears: 16 layers
of qkv, o, gate_up, down and the LM head (bf16 head for bf16, quantized for int8/int4).

Run: PYTHONPATH=build/python:kernels/python python3 bench/bench_models_ops.py
     [--which linear,int8,int4,argmax,prefill] [--m 1,16] [--rep MS] [--flush read|zero|none]
     [--peak-gbps 3350]
"""
import argparse
import importlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import fmt, markdown_table, relerr, report  # noqa: E402

# Llama-3.2-1B: (N, K) of each decode projection (q/k/v and gate/up fused as the model runs
# them) and how many a decode step runs.
SHAPES = {"qkv": (3072, 2048), "o_proj": (2048, 2048), "gate_up": (16384, 2048),
          "down": (2048, 8192), "lm_head": (128256, 2048)}
PER_STEP = {"qkv": 16, "o_proj": 16, "gate_up": 16, "down": 16, "lm_head": 1}
VOCAB = 128256
PREFILL_TOKENS = 4 * 2048
GROUP = 128

torch = F = ops = lin = quant = sampling = None


def setup():
    global torch, F, ops, lin, quant, sampling
    import torch
    import torch.nn.functional as F
    common.setup_paths()
    from kiln_models import ops
    lin = importlib.import_module("kiln_models.ops.linear")
    quant = importlib.import_module("kiln_models.ops.quant")
    sampling = importlib.import_module("kiln_models.ops.sampling")


def weight_bytes(kind, N, K):
    if kind == "bf16":
        return 2 * N * K
    if kind == "int8":
        return N * K + 4 * N
    return N * K // 2 + 4 * N * (K // GROUP)


class Bench:
    def __init__(self, args):
        self.args = args
        self.rows = {}  # part -> table rows
        self.step = {}  # (kind, M, plan) -> [us of each projection times its count]
        self.cache = {}  # (kind, shape name) -> weights

    def time(self, fn):
        a = self.args
        return common.do_bench(fn, warmup=10, rep=a.rep, flush=None if a.flush == "none"
                               else a.flush) * 1e3  # us

    def floor(self, nbytes):
        return nbytes / (self.args.peak_gbps * 1e3)  # us

    def add(self, part, name, us, nbytes, err=None, peer_us=None):
        gbs = nbytes / us / 1e3
        frac = self.floor(nbytes) / us
        report(f"{part}.{name}.us", us, "{:.2f}")
        report(f"{part}.{name}.gbps", gbs, "{:.0f}")
        report(f"{part}.{name}.of_floor", frac, "{:.3f}")
        if err is not None:
            report(f"{part}.{name}.relerr", err, "{:.2e}")
        row = [name, fmt(us, ".2f"), fmt(gbs, ".0f"), fmt(frac, ".2f"),
               fmt(err, ".1e") if err is not None else "-",
               fmt(peer_us / us, ".2f") if peer_us else "-"]
        self.rows.setdefault(part, []).append(row)

    # ------------------------------------------------------------------ decode linears

    def weights(self, kind, name):
        """(device weights, the dense weights they stand for), made once per (kind, shape):
        N(0, 0.02) like HF's init, quantized on the host for int8/int4."""
        key = (kind, name)
        if key not in self.cache:
            N, K = SHAPES[name]
            g = torch.Generator(device="cuda").manual_seed(N + K)
            w = torch.randn(N, K, device="cuda", dtype=torch.float32, generator=g) * 0.02
            if kind == "bf16":
                wb = w.to(torch.bfloat16)
                self.cache[key] = ((wb,), wb)
            else:
                wh = w.cpu().numpy()
                if kind == "int8":
                    q, s = quant.quantize_int8(wh)
                    ref = quant.dequantize_int8(q, s)
                else:
                    q, s = quant.quantize_int4(wh, GROUP)
                    ref = quant.dequantize_int4(q, s, GROUP)
                dev = (torch.from_numpy(q).cuda(), torch.from_numpy(s).cuda())
                self.cache[key] = (dev, torch.from_numpy(ref).cuda())
            del w
        return self.cache[key]

    def launcher(self, kind, x, wq, out, M, N, K):
        """(fn(gemv, scratch) -> a call of the op, fp32 elements of the tiles' scratch)."""
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        if kind == "bf16":
            return (lambda gemv, scratch: lambda: ops.linear(
                x, wq[0], out, scratch=scratch, gemv=gemv),
                lin.linear_scratch_numel(M, N, K, sms=sms, gemv=False))
        if kind == "int8":
            return (lambda gemv, scratch: lambda: quant.linear_int8(
                x, wq[0], wq[1], out, scratch=scratch, gemv=gemv),
                quant.quant_scratch_numel(M, N, K, sms=sms, gemv=False))
        return (lambda gemv, scratch: lambda: quant.linear_int4(
            x, wq[0], wq[1], out, group=GROUP, scratch=scratch, gemv=gemv),
            quant.quant_scratch_numel(M, N, K, GROUP, sms=sms, gemv=False))

    def linear(self, kind, M):
        g = torch.Generator(device="cuda").manual_seed(M)
        kinds = {"int8": "int8", "int4": "int4"}.get(kind, "float")
        auto = lin.uses_gemv(M, None, kinds)
        for name, (N, K) in SHAPES.items():
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
            out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            wq, ref_w = self.weights(kind, name)
            run, n_scratch = self.launcher(kind, x, wq, out, M, N, K)
            scratch = torch.empty(max(n_scratch, 1), device="cuda")
            ref = F.linear(x.float(), ref_w.float())
            nbytes = weight_bytes(kind, N, K)
            peer_us = None
            if kind == "bf16":  # cuBLAS on the same weights
                peer_us = self.time(lambda: F.linear(x, ref_w))
                self.add(f"{kind}_m{M}", f"{name} torch", peer_us, nbytes)
                self.step.setdefault((kind, M, "torch"), []).append(peer_us * PER_STEP[name])
            for plan, gemv in (("gemv", True), ("tiles", False)):
                fn = run(gemv, scratch)
                out.fill_(float("nan"))
                fn()
                err = relerr(out, ref)
                us = self.time(fn)
                label = f"{name} {plan}" + (" (auto)" if auto == gemv else "")
                self.add(f"{kind}_m{M}", label, us, nbytes, err, peer_us)
                self.step.setdefault((kind, M, plan), []).append(us * PER_STEP[name])
        nbytes = sum(weight_bytes(kind, *SHAPES[n]) * PER_STEP[n] for n in SHAPES)
        for plan in ("gemv", "tiles", "torch"):
            parts = self.step.get((kind, M, plan))
            if parts:
                self.add(f"{kind}_m{M}", f"step {plan}", sum(parts), nbytes)

    # ------------------------------------------------------------------ argmax

    def argmax(self):
        g = torch.Generator(device="cuda").manual_seed(0)
        for B in (1, 16):
            logits = torch.randn(B, VOCAB, device="cuda", dtype=torch.bfloat16, generator=g)
            out = torch.empty(B, device="cuda", dtype=torch.int32)
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            part = torch.empty(sampling.argmax_scratch_numel(B, VOCAB, sms=sms), device="cuda")
            want = logits.argmax(-1)
            nbytes = 2 * B * VOCAB
            peer_us = self.time(lambda: torch.argmax(logits, -1))
            self.add("argmax", f"B={B} torch", peer_us, nbytes)
            for name, scratch in (("one program a row", None), ("split", part)):
                ops.argmax(logits, out, scratch=scratch)
                ok = bool(torch.equal(out.long(), want))
                report(f"argmax.B={B} {name}.equal", ok)
                us = self.time(lambda: ops.argmax(logits, out, scratch=scratch))
                self.add("argmax", f"B={B} {name}", us, nbytes, 0.0 if ok else 1.0, peer_us)

    # ------------------------------------------------------------------ prefill

    def prefill(self):
        g = torch.Generator(device="cuda").manual_seed(1)
        M = PREFILL_TOKENS
        x = torch.randn(M, 2048, device="cuda", dtype=torch.bfloat16, generator=g)
        for name, (N, K) in SHAPES.items():
            if name == "lm_head":  # a prefill only reads the last positions' logits
                continue
            if K != x.shape[1]:
                x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
            w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
            out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            peer_ms = common.do_bench(lambda: F.linear(x, w), rep=self.args.rep, flush=None)
            ops.linear(x, w, out)
            err = relerr(out, F.linear(x, w))
            ms = common.do_bench(lambda: ops.linear(x, w, out), rep=self.args.rep, flush=None)
            flop = 2 * M * N * K
            for who, t in (("torch", peer_ms), ("kiln", ms)):
                report(f"prefill.{name}.{who}.us", t * 1e3, "{:.1f}")
                report(f"prefill.{name}.{who}.tflops", common.tflops(flop, t), "{:.0f}")
            self.rows.setdefault("prefill", []).append(
                [name, fmt(ms * 1e3, ".1f"), fmt(common.tflops(flop, ms), ".0f"),
                 fmt(common.tflops(flop, peer_ms), ".0f"), fmt(err, ".1e"),
                 fmt(peer_ms / ms, ".2f")])

    def tables(self):
        for part, rows in self.rows.items():
            if part == "prefill":
                markdown_table([f"shape (M = {PREFILL_TOKENS})", "kiln us", "kiln TFLOP/s",
                                "torch TFLOP/s", "relerr", "speed vs torch"], rows, title=part)
            else:
                markdown_table(["case", "us", "GB/s", "of floor", "relerr", "speed vs torch"],
                               rows, title=part)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--which", default="linear,int8,int4,argmax,prefill",
                    help="comma list of: linear (bf16), int8, int4, argmax, prefill")
    ap.add_argument("--m", default="1,16", help="rows of x of the decode linears")
    ap.add_argument("--rep", type=float, default=100, help="ms of timed calls per case")
    ap.add_argument("--flush", default="read", choices=("read", "zero", "none"),
                    help="empty the L2 before each timed call (decode)")
    ap.add_argument("--peak-gbps", type=float, default=3350.0,
                    help="DRAM bandwidth of the weight-read floor")
    args = ap.parse_args()
    which = [w.strip() for w in args.which.split(",") if w.strip()]
    bad = set(which) - {"linear", "int8", "int4", "argmax", "prefill"}
    if bad:
        ap.error(f"unknown --which {sorted(bad)}")
    setup()
    print(common.device_line(triton=False), flush=True)
    b = Bench(args)
    ms = [int(m) for m in args.m.split(",")]
    for kind in ("linear", "int8", "int4"):
        if kind in which:
            for M in ms:
                b.linear("bf16" if kind == "linear" else kind, M)
    if "argmax" in which:
        b.argmax()
    if "prefill" in which:
        b.prefill()
    b.tables()


if __name__ == "__main__":
    main()
