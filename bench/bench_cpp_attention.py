"""The C++ DSL's attention forward beside the same source from Python, Triton and SDPA.

kernels/cpp/attention.cpp is FlashAttention-2's Triton style written with kiln::lang (K and V
by pointers computed from the loop's start_n, which the compiler takes to the TMA on sm_90a);
its key loop runs plain (`for_range`) and warp-specialized (`for_range_ws`, Triton's
`tl.range(..., warp_specialize=True)`: a producer warpgroup). It is launched through
libkiln-cpp-kernels.so (bench/cpp_kernels.cpp, ctypes; --cpp-lib) on the same tensors and
stream as the same algorithm from Python (bench/cliff_sources_attention.py's attn_fwd_fa2 under
Kiln, and under Triton), and SDPA with no backend forced (torch's default). Non-causal fp16,
(B, H, S, D) contiguous. Each implementation takes its faster of 128x64 and 128x128 tiles (8
warps, 3 stages); then the best calls are timed again in --rounds interleaved rounds
(common.interleaved_times), Triton twice (its run-to-run noise), and each figure is the
median of its rounds. TFLOP/s: 4 * B * H * S^2 * D. Errors: ||O - SDPA|| / ||SDPA||.

A second table, for the D = 128 shapes: kernels/cpp/attention.cpp's FlashAttention-3 order
(attentionFa3: descriptors made in the kernel, the warp-specialized loop the compiler peels;
128x128 tiles, 8 warps, 3 stages) beside kiln_kernels.flash_attention's default path from
Python (the same algorithm through host descriptors) and SDPA default, timed the same way
(SDPA twice: its run-to-run noise).

    python3 bench/bench_cpp_attention.py [--shapes 4x32x4096x128,4x32x4096x64] [--rounds 5]
"""
import argparse
import ctypes
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CONFIGS = [(128, 64, 8, 3), (128, 128, 8, 3)]


def bind_attention(lib):
    """libkiln-cpp-kernels.so's kiln_cpp_attention_fa2 and kiln_cpp_attention_fa3 with their
    ctypes signatures: (q, k, v, o pointers, B, H, S, D, scale, [fa2: warp-specialized,]
    stream, BLOCK_M, BLOCK_N, num_warps, num_stages, error buffer, its size)."""
    tail = [ctypes.c_int] * 2 + [ctypes.c_uint] * 2 + [ctypes.c_char_p, ctypes.c_size_t]
    head = [ctypes.c_uint64] * 4 + [ctypes.c_int32] * 4 + [ctypes.c_float]
    fa2, fa3 = lib.kiln_cpp_attention_fa2, lib.kiln_cpp_attention_fa3
    fa2.argtypes = head + [ctypes.c_int, ctypes.c_void_p] + tail
    fa3.argtypes = head + [ctypes.c_void_p] + tail
    fa2.restype = fa3.restype = ctypes.c_int
    return fa2, fa3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4x32x4096x128,4x32x4096x64", help="BxHxSxD,...")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cpp-lib", default="")
    args = ap.parse_args(argv)
    import torch
    import cliff_sources_attention as src
    import cliffs_attention as ca
    F = torch.nn.functional
    lib = common.cpp_kernels(args.cpp_lib)
    f, f3 = bind_attention(lib)
    from kiln_kernels import flash_attention as fa
    triton, why = common.triton_or_none()
    tw = common.twin(src) if triton is not None else None
    print(common.device_line(triton=triton is not None), flush=True)

    def timer(fn):
        return common.time_calls(fn, args.reps, 5)
    rows, fa3_rows = [], []
    for shape in args.shapes.split(","):
        B, H, S, D = (int(x) for x in shape.split("x"))
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
        ref = F.scaled_dot_product_attention(q, k, v)
        flop = 4.0 * B * H * S * S * D
        scale = 1.0 / math.sqrt(D)
        stream = torch.cuda.current_stream().cuda_stream
        row, best = {"shape": f"{B}x{H}x{S} d{D}"}, {}

        def cpp(ws, o):
            return lambda cfg: (lambda: lib.call(
                f, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), B, H, S, D, scale,
                int(ws), stream, cfg[0], cfg[1], cfg[2], cfg[3]))
        impls = dict.fromkeys(("cpp", "cpp_ws", "python", "triton"))
        outs = {}
        for name in list(impls):
            o = torch.full_like(q, float("nan"))
            if name.startswith("cpp"):
                impls[name] = cpp(name == "cpp_ws", o)
            elif name == "python":
                impls[name] = lambda cfg, o=o: ca.fwd_fa2_launcher(src, q, k, v, o, False, cfg)
            elif tw is not None:
                impls[name] = lambda cfg, o=o: ca.fwd_fa2_launcher(tw, q, k, v, o, False, cfg)
            else:
                continue
            t, cfg, fn = common.best_of(impls[name], CONFIGS, timer, f"{name} {shape}")
            if fn is None:
                continue
            best[name], outs[name] = fn, o
            row[f"{name}_cfg"] = cfg
            row[f"{name}_err"] = common.relerr(o, ref)

        def sdpa():
            F.scaled_dot_product_attention(q, k, v)
        best["sdpa"] = sdpa
        if "triton" in best:
            best["triton_again"] = best["triton"]
        runs = common.interleaved_times(best, timer, args.rounds, rotate=True)
        for name, ts in runs.items():
            row[name] = common.tflops(flop, statistics.median(ts))
        rows.append(row)
        for key, value in row.items():
            if key != "shape":
                common.report(f"cpp_attention_{shape}_{key}",
                              common.fmt_config(value) if isinstance(value, tuple) else value)
        if D == 128:
            o3, o_py = torch.full_like(q, float("nan")), torch.full_like(q, float("nan"))
            fa3 = {
                "cpp_fa3": lambda: lib.call(f3, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                            o3.data_ptr(), B, H, S, D, scale, stream, 128, 128,
                                            8, 3),
                "python": lambda: fa.attention_forward(q, k, v, o_py, sm_scale=scale),
                "sdpa": sdpa, "sdpa_again": sdpa}
            for fn in fa3.values():
                fn()
            torch.cuda.synchronize()
            r3 = {"shape": row["shape"], "cpp_fa3_err": common.relerr(o3, ref),
                  "python_err": common.relerr(o_py, ref)}
            for name, ts in common.interleaved_times(fa3, timer, args.rounds,
                                                     rotate=True).items():
                r3[name] = common.tflops(flop, statistics.median(ts))
            fa3_rows.append(r3)
            for key, value in r3.items():
                if key != "shape":
                    common.report(f"cpp_attention_fa3_{shape}_{key}", value)
        del q, k, v, ref, outs
        torch.cuda.empty_cache()

    def r(row, a, b):
        return common.fmt(row[a] / row[b] if row.get(a) and row.get(b) else None, ".3f")
    common.markdown_table(
        ["shape", "C++ plain", "C++ ws", "Python", "Triton", "SDPA default", "C++ ws/Python",
         "C++ ws/Triton", "C++ ws/SDPA", "C++/Python", "Triton/Triton", "C++ ws error"],
        [[x["shape"], common.fmt(x.get("cpp")), common.fmt(x.get("cpp_ws")),
          common.fmt(x.get("python")), common.fmt(x.get("triton")), common.fmt(x["sdpa"]),
          r(x, "cpp_ws", "python"), r(x, "cpp_ws", "triton"), r(x, "cpp_ws", "sdpa"),
          r(x, "cpp", "python"), r(x, "triton_again", "triton"),
          common.fmt(x.get("cpp_ws_err"), ".1e")] for x in rows],
        align="lrrrrrrrrrrr",
        title=f"Attention forward (FA2 style, non-causal fp16) from the C++ DSL, TFLOP/s, "
              f"medians of {args.rounds} interleaved rounds — {common.device_name()}")
    if fa3_rows:
        common.markdown_table(
            ["shape", "C++ fa3", "Python default", "SDPA default", "SDPA again",
             "C++ fa3/Python", "C++ fa3/SDPA", "SDPA/SDPA", "C++ fa3 error", "Python error"],
            [[x["shape"], common.fmt(x["cpp_fa3"]), common.fmt(x["python"]),
              common.fmt(x["sdpa"]), common.fmt(x["sdpa_again"]), r(x, "cpp_fa3", "python"),
              r(x, "cpp_fa3", "sdpa"), r(x, "sdpa_again", "sdpa"),
              common.fmt(x["cpp_fa3_err"], ".1e"), common.fmt(x["python_err"], ".1e")]
             for x in fa3_rows],
            align="lrrrrrrrrr",
            title=f"Attention forward (FlashAttention-3's order, non-causal fp16, D 128) from "
                  f"the C++ DSL, TFLOP/s, medians of {args.rounds} interleaved rounds — "
                  f"{common.device_name()}")


if __name__ == "__main__":
    main()
