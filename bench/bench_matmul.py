"""Matmul on the GPU: Kiln beside its peers, measured in the same run.

Every variant times Kiln, cuBLAS (torch.matmul; torch._scaled_mm for fp8, torch._int_mm for
int8) and Triton on the same source: the Kiln kernel's twin (bench/common.py: the same text
under Triton's imports), autotuned over --triton-configs (each configuration that compiles is
timed; the fastest counts, and the table names it). Each prints key=value lines
(matmul_<variant>_<dtype>_<MxNxK>_<what>=...) as it goes, then a markdown table: TFLOP/s (TOPS
for int8) and Kiln's ratio to each peer (speed: > 1, Kiln is faster), and errors.

Timing (common.time_calls): median per call of --reps timings, each of --batch back-to-back
calls between two CUDA events, the device drained after each (batch 10: the host's launch
work overlaps the GPU's, as in a model; batch 1: each call alone, launch work included).
pointer then times Kiln, Triton at its fastest configuration and cuBLAS again in --rounds
interleaved rounds (common.interleaved_times: the order rotated and reversed each round), and
each figure is the median of its rounds.
Errors: ||C - ref|| / ||ref|| against a matmul of the same inputs in fp32 (fp64 for the
epilogue; int8 exact).

Variants (positional, several in one run; `all`: every one but peers):
  pointer      (or python) Triton's tutorial matmul through pointers (cp.async rings and
               wgmma on sm_90a), bench/kernel_sources.py's matmul_kernel; Kiln at 128x256x64,
               8 warps, --stages. fp16 and bf16 at 4096^3, 8192^3, 4000^3 (masked edges) and
               an LLM projection (8192x11008x4096).
  tma          the same through tensor descriptors (matmul_tma_kernel: TMA loads and stores
               on sm_90a), beside Kiln's pointer kernel at the same tiles (cp.async). --dump
               DIR writes the Kiln TMA kernel's PTX; --only kiln|triton times one kernel
               alone (for a profiler).
  persistent   a persistent matmul (matmul_persistent: one program per SM walking the tiles
               with tl.range(..., flatten=True)), beside the same text with flatten=False and
               Kiln's one-tile-per-program kernel; 4096^3 and 8192^3.
  epilogue     the library's matmul with a fused bias and activation
               (kiln_kernels.matmul.matmul), beside its own twin (the library module under
               Triton, launched as the library launches it), torch's unfused equivalent
               (cuBLAS addmm, then the activation) and cuBLAS's matmul alone.
  fp8          matmul_kernel on e4m3 and e5m2 operands (fp32 accumulation, fp16 out), B
               column-major (`b.t()` of a contiguous [N, K]: what Hopper's tensor cores read
               and torch._scaled_mm requires) and row-major; Kiln at its fastest of
               --configs; torch._scaled_mm (e4m3, column-major B; unit scales).
  int8         int8 x int8 -> int32 (matmul_int8_kernel), B both orders, Kiln at its fastest
               of --configs, torch._int_mm; checked exactly against torch._int_mm.
  mma-sync     the mma.sync path: matmul_kernel compiled for plain sm_90 (KILN_ARCH=sm_90:
               no wgmma, so cp.async rings read by ldmatrix into mma.sync.m16n8k16, the path
               of sm_80-class GPUs), a sweep of Kiln tiles at 4096^3 and 8192^3, the best at
               4000^3 and 8192x11008x4096, and the same kernel with num_stages=1 (operands
               staged through registers, the path before rings). With other variants it runs
               in a child process (the JIT's target is fixed at its first use).
  library-fp8  kiln_kernels.matmul.matmul on e4m3 operands (column-major B), fp16 out,
               beside its twin, torch._scaled_mm and the library's fp16 matmul of the shape;
               also with a bias and gelu fused.
  cpp          the C++ DSL's tutorial matmul (kernels/cpp/matmul.cpp, the same algorithm as
               matmul_kernel, written with kiln::lang) through libkiln-cpp-kernels.so (--cpp-lib,
               default build/bench/ or the GPU bundle's bench/), launched through ctypes on the
               same tensors, beside matmul_kernel from Python, Triton autotuned on that source
               and cuBLAS; fp16 (the C++ kernel's dtype), 128x256x64, 8 warps, --stages.
  peers        for kiln-bench --only=matmul (scripts/gpu.sh matmul): torch_matmul_<n>_tflops
               and triton_matmul_<n>_tflops at fp16 n^3, n = 4096 and 8192 (batch 1), with
               Kiln's pointer kernel from Python beside.

Run on the GPU machine with kiln importable (scripts/gpu.sh python does):
    python3 bench/bench_matmul.py pointer tma [--reps 25] [--stages 4] [--batch 10]
    python3 bench/bench_matmul.py fp8 --configs 128x256x128x8x3,128x128x128x8x4
Configurations are BLOCK_MxBLOCK_NxBLOCK_KxWARPSxSTAGES.
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import fmt, fmt_config, relerr, tflops  # noqa: E402

VARIANTS = ("pointer", "tma", "persistent", "epilogue", "fp8", "int8", "mma-sync",
            "library-fp8", "cpp", "peers")
ALIASES = {"python": "pointer", "mma_sync": "mma-sync", "library_fp8": "library-fp8",
           "descriptors": "tma"}
ALL = tuple(v for v in VARIANTS if v != "peers")

SHAPES = "4096x4096x4096,8192x8192x8192,4000x4000x4000,8192x11008x4096"
LLM_SHAPES = "4096x4096x4096,8192x8192x8192,8192x11008x4096"
TRITON_16BIT = "128x256x64x8x3,128x256x64x8x4,128x128x64x4x4,128x128x64x8x3"
CONFIGS_8BIT = "128x256x128x8x3,128x128x128x8x4,128x256x64x8x4"
# Per variant: --reps, --batch, --shapes, --dtypes, Triton's configurations (None: --configs).
DEFAULTS = {
    "pointer": (25, 10, SHAPES, "fp16,bf16", TRITON_16BIT),
    "tma": (25, 10, SHAPES, "fp16,bf16", TRITON_16BIT),
    "persistent": (25, 10, "4096x4096x4096,8192x8192x8192", "fp16,bf16", TRITON_16BIT),
    "epilogue": (15, 10, None, "fp16,bf16", TRITON_16BIT),
    "fp8": (25, 10, LLM_SHAPES, "float8_e4m3fn,float8_e5m2", None),
    "int8": (25, 10, LLM_SHAPES, "int8", None),
    "mma-sync": (20, 10, SHAPES, "fp16,bf16", TRITON_16BIT),
    "library-fp8": (15, 10, LLM_SHAPES, "float8_e4m3fn", CONFIGS_8BIT),
    "cpp": (25, 10, "4096x4096x4096,8192x8192x8192,4000x4000x4000", "fp16", TRITON_16BIT),
    "peers": (11, 1, "4096x4096x4096,8192x8192x8192", "fp16", TRITON_16BIT),
}
# The epilogue variant's cases: (M, N, K, bias, activation).
EPILOGUE_CASES = [(4096, 4096, 4096, True, "relu"), (8192, 8192, 8192, True, "gelu"),
                  (8192, 11008, 4096, False, "silu"), (8192, 4096, 11008, True, None),
                  (4000, 4000, 4000, True, "gelu")]
# mma-sync: Kiln's sweep (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages) and the register-staged
# path's best (session 4: 88.7 / 92.1 TFLOP/s).
MMA_CONFIGS = [(128, 128, 32, 4, 4), (128, 128, 64, 4, 3), (128, 256, 32, 8, 4),
               (128, 256, 64, 8, 3), (256, 128, 32, 8, 4), (128, 128, 32, 8, 4)]
REGISTER_STAGED = (128, 64, 32, 4, 1)
DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16"}


class Bench:
    """What every variant needs: torch, the Kiln and Triton modules of the kernels, the timer
    and the options resolved for the variant."""

    def __init__(self, args, variant):
        import torch
        self.torch, self.args, self.variant = torch, args, variant
        try:
            import kiln
            import kernel_sources
        except ImportError as e:
            if variant != "peers":
                raise
            # peers runs without Kiln's Python package (scripts/gpu.sh matmul builds none):
            # the cuBLAS and Triton lines only, Triton's kernel the twin of the file's text
            print(f"kiln unavailable ({e}): peers only", file=sys.stderr)
            kiln = kernel_sources = None
        self.kiln = kiln
        reps, batch, shapes, dtypes, tconf = DEFAULTS[variant]
        self.reps = args.reps or reps
        self.batch = args.batch or batch
        self.shapes = common.parse_shapes(args.shapes or shapes) if (args.shapes or shapes) \
            else None
        self.dtypes = (args.dtypes or dtypes).split(",")
        self.configs = common.parse_configs(args.configs or CONFIGS_8BIT)
        self._tconf = args.triton_configs or tconf
        self.ks = kernel_sources
        self.tw = None  # kernel_sources under Triton
        self.triton = None
        if not args.no_triton:
            self.triton, why = common.triton_or_none()
            if self.triton is None:
                print(f"triton unavailable ({why}): Kiln and cuBLAS only", file=sys.stderr)
            else:
                self.tw = common.twin(kernel_sources or "kernel_sources")
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        self.rows = []

    def dtype(self, name):
        return getattr(self.torch, DTYPE_NAMES.get(name, name))

    def timer(self, fn):
        return common.time_calls(fn, self.reps, self.batch)

    def triton_configs(self, kiln_cfg=None):
        """Triton's autotuning set: --triton-stages S alone means Kiln's tiles at S stages."""
        if self.args.triton_stages and kiln_cfg is not None:
            return [tuple(kiln_cfg[:4]) + (self.args.triton_stages,)]
        if self._tconf is None:
            return self.configs
        return common.parse_configs(self._tconf)

    def best_triton(self, make, kiln_cfg, label):
        """(TFLOP/s-ready Timing, config) of Triton autotuned over its configurations."""
        t, cfg, _ = common.best_of(make, self.triton_configs(kiln_cfg), self.timer,
                                   f"triton {label}")
        return t, cfg

    def emit(self, row):
        name = f"matmul_{self.variant.replace('-', '_')}_{row.get('dtype', '')}_{row['shape']}"
        for key, value in row.items():
            if key not in ("dtype", "shape"):
                common.report(f"{name}_{key}",
                              fmt_config(value) if isinstance(value, tuple) else value)
        self.rows.append(row)

    def title(self, what):
        return f"{what} (batches of {self.batch}, median of {self.reps}) — " \
               f"{common.device_name()}"


def ptr_launch(kernel, a, b, c, cfg):
    """A call of a pointer matmul kernel (kernel_sources' signature) at cfg."""
    BM, BN, BK, warps, stages = cfg
    M, K = a.shape
    N = b.shape[1]
    grid = (((M + BM - 1) // BM) * ((N + BN - 1) // BN),)
    meta = dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8, num_warps=warps,
                num_stages=stages)
    return lambda: kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                b.stride(1), c.stride(0), c.stride(1), **meta)


def tma_launch(kernel, TD, a, b, c, cfg):
    """A call of matmul_tma_kernel at cfg, its descriptors (TD: the library's
    TensorDescriptor class) built once."""
    BM, BN, BK, warps, stages = cfg
    M, K = a.shape
    N = b.shape[1]
    grid = (((M + BM - 1) // BM) * ((N + BN - 1) // BN),)
    descs = [TD.from_tensor(a, [BM, BK]), TD.from_tensor(b, [BK, BN]),
             TD.from_tensor(c, [BM, BN])]
    return lambda: kernel[grid](*descs, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                                GROUP_M=8, num_warps=warps, num_stages=stages)


def library_launch(mm, a, b, c, bias, activation, cfg):
    """A call of kiln_kernels.matmul's kernels (of `mm`: the library module or its twin) as
    its matmul() dispatches them (descriptors when every operand takes them and the inputs
    are 16-bit, else pointers), at tiles cfg instead of its config_for. Descriptors are built
    per call, as matmul() builds them."""
    BM, BN, BK, warps, stages = cfg
    M, K = a.shape
    N = b.shape[1]
    grid = (((M + BM - 1) // BM) * ((N + BN - 1) // BN),)
    meta = dict(BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8, HAS_BIAS=bias is not None,
                ACTIVATION=activation or "", num_warps=warps, num_stages=stages)
    bias_arg = bias if bias is not None else c
    fp8 = a.dtype in mm.FP8_DTYPES
    if K > 0 and not fp8 and all(mm._takes_descriptor(t) for t in (a, b, c)):
        TD = mm.kiln.TensorDescriptor
        return lambda: mm.matmul_tma_kernel[grid](
            TD.from_tensor(a, [BM, BK]), TD.from_tensor(b, [BK, BN]), TD.from_tensor(c, [BM, BN]),
            bias_arg, M, N, K, **meta)
    return lambda: mm.matmul_kernel[grid](a, b, c, bias_arg, M, N, K, a.stride(0), a.stride(1),
                                          b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                          **meta)


def interleave(B, row, finals, flop):
    """Times `finals` ({name: call}: Kiln, Triton at its fastest configuration, cuBLAS) again
    in --rounds interleaved rounds (common.interleaved_times, the order rotated and reversed
    each round: an H100 at its power limit slows within seconds, and timed one after the
    other what goes first runs on a cooler card); row[name] becomes the rate of the median,
    row[name + "_rounds"] the rounds' rates."""
    if B.args.rounds <= 0 or len(finals) < 2:
        return
    runs = common.interleaved_times(finals, B.timer, B.args.rounds, rotate=True)
    for name, ts in runs.items():
        row[name] = tflops(flop, statistics.median(ts))
        row[f"{name}_rounds"] = " ".join(f"{tflops(flop, x):.1f}" for x in ts)


def peer_columns(r, unit="TFLOP/s", cublas="cuBLAS"):
    """The columns every table has: Kiln, Triton (its tiles), cuBLAS, the two ratios."""
    t, c = r.get("triton"), r.get("cublas")
    return [fmt(r["kiln"]), fmt(t), fmt_config(r.get("triton_cfg")), fmt(c),
            fmt(r["kiln"] / t if t else None, ".3f"), fmt(r["kiln"] / c if c else None, ".3f")]


PEER_ALIGN = "rrlrrr"  # the alignment of peer_columns


def peer_headers(unit="TFLOP/s", cublas="cuBLAS"):
    return [f"Kiln {unit}", f"Triton {unit}", "Triton tiles", f"{cublas} {unit}",
            "Kiln/Triton", f"Kiln/{cublas.split()[0]}"]


# ============================================================================ variants

def pointer_cases(B):
    """Yields (row, a, b, ref, flop) for each --dtypes x --shapes case of the pointer
    variants (fresh random inputs, fp32 reference); frees them after each case."""
    torch = B.torch
    torch.manual_seed(0)
    for dname in B.dtypes:
        dtype = B.dtype(dname)
        for M, N, K in B.shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = torch.matmul(a.float(), b.float())
            yield {"dtype": dname, "shape": f"{M}x{N}x{K}"}, a, b, ref, 2.0 * M * N * K
            del a, b, ref
            torch.cuda.empty_cache()


def pointer_peers(B, row, finals, a, b, ref, kcfg, flop):
    """Triton autotuned on matmul_kernel's source and cuBLAS for one case: their rates (and
    Triton's tiles and error) in `row`, their calls in `finals`."""
    torch, tw = B.torch, B.tw
    ct = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=a.dtype)
    if tw is not None:
        t, cfg = B.best_triton(lambda cfg: ptr_launch(tw.matmul_kernel, a, b, ct, cfg),
                               kcfg, f"{row['dtype']} {row['shape']}")
        row.update(triton=tflops(flop, t), triton_cfg=cfg)
        if cfg:
            ptr_launch(tw.matmul_kernel, a, b, ct, cfg)()
            torch.cuda.synchronize()
            row["triton_err"] = relerr(ct, ref)
            finals["triton"] = ptr_launch(tw.matmul_kernel, a, b, ct, cfg)
    cc = torch.empty_like(ct)
    finals["cublas"] = lambda: torch.matmul(a, b, out=cc)
    row["cublas"] = tflops(flop, B.timer(finals["cublas"]))


def v_pointer(B):
    ks = B.ks
    kcfg = (128, 256, 64, 8, B.args.stages)
    for row, a, b, ref, flop in pointer_cases(B):
        c = B.torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=a.dtype)
        run = ptr_launch(ks.matmul_kernel, a, b, c, kcfg)
        run()
        B.torch.cuda.synchronize()
        row["kiln_err"] = relerr(c, ref)
        row["kiln"] = tflops(flop, B.timer(run))
        finals = {"kiln": run}
        pointer_peers(B, row, finals, a, b, ref, kcfg, flop)
        interleave(B, row, finals, flop)
        B.emit(row)
    common.markdown_table(
        ["dtype", "M x N x K"] + peer_headers() + ["Kiln rel. error", "Triton rel. error"],
        [[r["dtype"], r["shape"]] + peer_columns(r) +
         [fmt(r["kiln_err"], ".1e"), fmt(r.get("triton_err"), ".1e")] for r in B.rows],
        align="ll" + PEER_ALIGN + "rr",
        title=B.title(f"Matmul, Triton's tutorial kernel through pointers (Kiln "
                      f"{fmt_config(kcfg)}, GROUP_M=8)"))


def v_tma(B):
    torch, ks, tw, kiln = B.torch, B.ks, B.tw, B.kiln
    args = B.args
    kcfg = (128, 256, 64, 8, args.stages)
    TTD = None
    if tw is not None:
        from triton.tools.tensor_descriptor import TensorDescriptor as TTD
    dumped = False
    torch.manual_seed(0)
    for dname in B.dtypes:
        dtype = B.dtype(dname)
        for M, N, K in B.shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            flop = 2.0 * M * N * K
            row = {"dtype": dname, "shape": f"{M}x{N}x{K}"}
            c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
            if args.only == "triton":  # launches only, for a profiler
                if tw is None:
                    raise SystemExit("--only triton needs Triton")
                cfg = B.triton_configs(kcfg)[0]
                run_t = tma_launch(tw.matmul_tma_kernel, TTD, a, b, c, cfg)
                for _ in range(B.reps):
                    run_t()
                torch.cuda.synchronize()
                continue
            ref = torch.matmul(a.float(), b.float())
            run = tma_launch(ks.matmul_tma_kernel, kiln.TensorDescriptor, a, b, c, kcfg)
            compiled = run()
            torch.cuda.synchronize()
            if args.dump and not dumped:
                os.makedirs(args.dump, exist_ok=True)
                with open(os.path.join(args.dump, "kiln_matmul_tma.ptx"), "w") as f:
                    f.write(compiled.asm["ptx"])
                dumped = True
            row["kiln_err"] = relerr(c, ref)
            row["kiln"] = tflops(flop, B.timer(run))
            if args.only == "kiln":
                continue
            cp = torch.empty_like(c)
            row["kiln_cp_async"] = tflops(flop, B.timer(ptr_launch(ks.matmul_kernel, a, b, cp,
                                                                   kcfg)))
            if tw is not None:
                ct = torch.empty_like(c)
                t, cfg = B.best_triton(
                    lambda cfg: tma_launch(tw.matmul_tma_kernel, TTD, a, b, ct, cfg), kcfg,
                    f"{dname} {M}x{N}x{K}")
                row.update(triton=tflops(flop, t), triton_cfg=cfg,
                           triton_err=relerr(ct, ref) if cfg else None)
            cc = torch.empty_like(c)
            row["cublas"] = tflops(flop, B.timer(lambda: torch.matmul(a, b, out=cc)))
            B.emit(row)
            del a, b, c, cp, ref
            torch.cuda.empty_cache()
    if args.only != "all":
        return
    common.markdown_table(
        ["dtype", "M x N x K"] + peer_headers() +
        ["Kiln cp.async", "TMA/cp.async", "Kiln rel. error"],
        [[r["dtype"], r["shape"]] + peer_columns(r) +
         [fmt(r["kiln_cp_async"]), fmt(r["kiln"] / r["kiln_cp_async"], ".3f"),
          fmt(r["kiln_err"], ".1e")] for r in B.rows],
        align="ll" + PEER_ALIGN + "rrr",
        title=B.title(f"Matmul through tensor descriptors (TMA; Kiln {fmt_config(kcfg)}, "
                      f"GROUP_M=8)"))


def v_persistent(B):
    torch, ks, tw = B.torch, B.ks, B.tw
    kcfg = (128, 256, 64, 8, B.args.stages)
    plain = common.load(ks, "kiln", edits=ks.NOT_FLATTENED).matmul_persistent
    sms = B.sms

    def persistent(kernel, a, b, c, cfg):
        """A call of a persistent kernel: min(SMs, tiles) programs."""
        BM, BN, BK, warps, stages = cfg
        M, K = a.shape
        N = b.shape[1]
        grid = (min(sms, ((M + BM - 1) // BM) * ((N + BN - 1) // BN)),)
        return lambda: kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                    b.stride(1), c.stride(0), c.stride(1), BLOCK_M=BM,
                                    BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8, NUM_SMS=sms,
                                    num_warps=warps, num_stages=stages)

    torch.manual_seed(0)
    for dname in B.dtypes:
        dtype = B.dtype(dname)
        for M, N, K in B.shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = a.float() @ b.float()
            flop = 2.0 * M * N * K
            row = {"dtype": dname, "shape": f"{M}x{N}x{K}"}
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            run = persistent(ks.matmul_persistent, a, b, c, kcfg)
            run()
            torch.cuda.synchronize()
            row["kiln_err"] = relerr(c, ref)
            row["kiln"] = tflops(flop, B.timer(run))
            co = torch.empty_like(c)
            row["kiln_not_flattened"] = tflops(flop, B.timer(persistent(plain, a, b, co, kcfg)))
            row["kiln_one_tile"] = tflops(flop, B.timer(ptr_launch(ks.matmul_kernel, a, b, co,
                                                                   kcfg)))
            if tw is not None:
                ct = torch.empty_like(c)
                t, cfg = B.best_triton(
                    lambda cfg: persistent(tw.matmul_persistent, a, b, ct, cfg), kcfg,
                    f"{dname} {M}x{N}x{K}")
                row.update(triton=tflops(flop, t), triton_cfg=cfg,
                           triton_err=relerr(ct, ref) if cfg else None)
            row["cublas"] = tflops(flop, B.timer(lambda: torch.matmul(a, b, out=co)))
            B.emit(row)
            del a, b, c, co, ref
            torch.cuda.empty_cache()
    common.markdown_table(
        ["dtype", "M x N x K"] + peer_headers() +
        ["Kiln flatten=False", "Kiln one tile per program", "flattened/not", "Kiln rel. error"],
        [[r["dtype"], r["shape"]] + peer_columns(r) +
         [fmt(r["kiln_not_flattened"]), fmt(r["kiln_one_tile"]),
          fmt(r["kiln"] / r["kiln_not_flattened"], ".3f"), fmt(r["kiln_err"], ".1e")]
         for r in B.rows],
        align="ll" + PEER_ALIGN + "rrrr",
        title=B.title(f"Persistent matmul (tl.range(..., flatten=True); Kiln "
                      f"{fmt_config(kcfg)}, {sms} programs)"))


def v_epilogue(B):
    import torch.nn.functional as F
    torch = B.torch
    common.setup_paths()
    from kiln_kernels import matmul as mm
    tmm = common.twin(mm) if B.tw is not None else None

    def torch_epilogue(a, b, bias, activation, out):
        y = torch.addmm(bias, a, b, out=out) if bias is not None else \
            torch.matmul(a, b, out=out)
        if activation == "relu":
            return torch.relu_(y)
        if activation == "gelu":
            return F.gelu(y, approximate="tanh")
        if activation == "silu":
            return F.silu(y, inplace=True)
        return y

    torch.manual_seed(0)
    for dname in B.dtypes:
        dtype = B.dtype(dname)
        for M, N, K, has_bias, act in EPILOGUE_CASES:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            bias = torch.randn(N, device="cuda", dtype=dtype) if has_bias else None
            ref = torch_epilogue(a.double(), b.double(),
                                 None if bias is None else bias.double(), act, None)
            flop = 2.0 * M * N * K
            row = {"dtype": dname, "shape": f"{M}x{N}x{K}",
                   "epilogue": ("bias+" if has_bias else "") + (act or "none")}
            ck = torch.empty(M, N, device="cuda", dtype=dtype)
            run = lambda: mm.matmul(a, b, bias=bias, activation=act, out=ck)  # noqa: E731
            run()
            torch.cuda.synchronize()
            row["kiln_err"] = relerr(ck, ref)
            row["kiln"] = tflops(flop, B.timer(run))
            row["kiln_cfg"] = mm.config_for(M, N, K)
            if tmm is not None:
                ct = torch.empty_like(ck)
                t, cfg = B.best_triton(
                    lambda cfg: library_launch(tmm, a, b, ct, bias, act, cfg),
                    mm.config_for(M, N, K), f"{dname} {M}x{N}x{K}")
                row.update(triton=tflops(flop, t), triton_cfg=cfg,
                           triton_err=relerr(ct, ref) if cfg else None)
            co = torch.empty_like(ck)
            row["torch_unfused"] = tflops(flop, B.timer(
                lambda: torch_epilogue(a, b, bias, act, co)))
            row["cublas"] = tflops(flop, B.timer(lambda: torch.matmul(a, b, out=co)))
            B.emit(row)
            del a, b, ck, co, ref
            torch.cuda.empty_cache()
    common.markdown_table(
        ["dtype", "M x N x K", "epilogue"] + peer_headers(cublas="cuBLAS alone") +
        ["torch (cuBLAS + op)", "Kiln/torch", "Kiln tiles", "Kiln rel. error",
         "Triton rel. error"],
        [[r["dtype"], r["shape"], r["epilogue"]] + peer_columns(r) +
         [fmt(r["torch_unfused"]), fmt(r["kiln"] / r["torch_unfused"], ".3f"),
          fmt_config(r["kiln_cfg"]), fmt(r["kiln_err"], ".1e"),
          fmt(r.get("triton_err"), ".1e")] for r in B.rows],
        align="lll" + PEER_ALIGN + "rrlrr",
        title=B.title("Matmul with a fused epilogue (kiln_kernels.matmul; TFLOP/s of the "
                      "matmul's 2MNK; Triton: the library module's twin)"))


def v_fp8(B):
    torch, ks, tw = B.torch, B.ks, B.tw
    gen = torch.Generator(device="cuda").manual_seed(0)
    one = torch.ones((), device="cuda")
    for dname in B.dtypes:
        dtype = B.dtype(dname)
        for M, N, K in B.shapes:
            a = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
            bt = torch.randn(N, K, device="cuda", generator=gen).to(dtype)
            flop = 2.0 * M * N * K
            for order in B.args.orders.split(","):
                b = bt.t() if order == "col" else bt.t().contiguous()
                ref = a.float() @ b.float()
                row = {"dtype": dname.replace("float8_", ""), "shape": f"{M}x{N}x{K}",
                       "b": order}
                c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
                t, cfg, _ = common.best_of(lambda cfg: ptr_launch(ks.matmul_kernel, a, b, c,
                                                                  cfg),
                                           B.configs, B.timer, f"kiln {dname} {order}")
                row.update(kiln=tflops(flop, t), kiln_cfg=cfg,
                           kiln_err=relerr(c, ref) if cfg else None)
                if tw is not None:
                    ct = torch.zeros_like(c)
                    t, cfg = B.best_triton(lambda cfg: ptr_launch(tw.matmul_kernel, a, b, ct,
                                                                  cfg), None, f"{dname} {order}")
                    row.update(triton=tflops(flop, t), triton_cfg=cfg,
                               triton_err=relerr(ct, ref) if cfg else None)
                if dtype == torch.float8_e4m3fn and order == "col":
                    def scaled():
                        return torch._scaled_mm(a, b, one, one, out_dtype=torch.float16)
                    row["cublas"] = tflops(flop, B.timer(scaled))
                    row["cublas_err"] = relerr(scaled(), ref)
                B.emit(row)
            del a, bt
            torch.cuda.empty_cache()
    common.markdown_table(
        ["fp8", "M x N x K", "B"] + peer_headers(cublas="torch._scaled_mm") +
        ["Kiln tiles", "rel. error Kiln / Triton"],
        [[r["dtype"], r["shape"], r["b"]] + peer_columns(r) +
         [fmt_config(r["kiln_cfg"]),
          f"{fmt(r['kiln_err'], '.1e')} / {fmt(r.get('triton_err'), '.1e')}"]
         for r in B.rows],
        align="lll" + PEER_ALIGN + "ll",
        title=B.title(f"fp8 matmul, fp32 accumulation, fp16 out: Triton's tutorial kernel "
                      f"(Kiln at its fastest of {fmt_config(B.configs)})"))


def v_int8(B):
    torch, ks, tw = B.torch, B.ks, B.tw
    gen = torch.Generator(device="cuda").manual_seed(0)
    for M, N, K in B.shapes:
        a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8, generator=gen)
        bt = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8, generator=gen)
        flop = 2.0 * M * N * K
        for order in B.args.orders.split(","):
            b = bt.t() if order == "col" else bt.t().contiguous()
            ref = torch._int_mm(a, b)
            row = {"dtype": "int8", "shape": f"{M}x{N}x{K}", "b": order}
            c = torch.zeros(M, N, device="cuda", dtype=torch.int32)
            t, cfg, _ = common.best_of(lambda cfg: ptr_launch(ks.matmul_int8_kernel, a, b, c,
                                                              cfg),
                                       B.configs, B.timer, f"kiln int8 {order}")
            row.update(kiln=tflops(flop, t), kiln_cfg=cfg,
                       exact=bool(cfg) and bool(torch.equal(c, ref)))
            if tw is not None:
                ct = torch.zeros_like(c)
                t, cfg = B.best_triton(lambda cfg: ptr_launch(tw.matmul_int8_kernel, a, b, ct,
                                                              cfg), None, f"int8 {order}")
                row.update(triton=tflops(flop, t), triton_cfg=cfg,
                           triton_exact=bool(cfg) and bool(torch.equal(ct, ref)))
            row["cublas"] = tflops(flop, B.timer(lambda: torch._int_mm(a, b)))
            B.emit(row)
        del a, bt
        torch.cuda.empty_cache()
    common.markdown_table(
        ["M x N x K", "B"] + peer_headers("TOPS", "torch._int_mm") +
        ["Kiln tiles", "exact (Kiln, Triton)"],
        [[r["shape"], r["b"]] + peer_columns(r) +
         [fmt_config(r["kiln_cfg"]), f"{r['exact']}, {r.get('triton_exact')}"]
         for r in B.rows],
        align="ll" + PEER_ALIGN + "ll",
        title=B.title(f"int8 matmul -> int32, Triton's tutorial kernel (Kiln at its fastest "
                      f"of {fmt_config(B.configs)})"))


def v_mma_sync(B):
    torch, ks, tw = B.torch, B.ks, B.tw
    if os.environ.get("KILN_ARCH") != "sm_90":
        raise SystemExit("mma-sync measures Kiln's plain sm_90 path: run it alone (it sets "
                         "KILN_ARCH=sm_90) or with KILN_ARCH=sm_90")
    torch.manual_seed(0)
    best = {}
    for dname in B.dtypes:
        dtype = B.dtype(dname)
        for M, N, K in B.shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = torch.matmul(a.float(), b.float())
            flop = 2.0 * M * N * K
            sweep = M == N == K and M in (4096, 8192)
            configs = MMA_CONFIGS if sweep or dname not in best else [best[dname]]
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            results = []
            for cfg in configs:
                try:
                    run = ptr_launch(ks.matmul_kernel, a, b, c, cfg)
                    run()
                    torch.cuda.synchronize()
                    t = B.timer(run)
                except Exception as e:  # a configuration that does not fit is reported
                    print(f"{dname} {M}x{N}x{K} {cfg}: {e}", file=sys.stderr)
                    continue
                err = relerr(c, ref)
                results.append((tflops(flop, t), cfg, err))
                print(f"{dname}_{M}x{N}x{K} kiln-mma {fmt_config(cfg)}: "
                      f"{tflops(flop, t):.1f} TFLOP/s err {err:.1e}", flush=True)
            tf, cfg, err = max(results)
            if sweep and (M == 8192 or dname not in best):
                best[dname] = cfg
            row = {"dtype": dname, "shape": f"{M}x{N}x{K}", "kiln": tf, "kiln_cfg": cfg,
                   "kiln_err": err}
            row["kiln_staged"] = tflops(flop, B.timer(ptr_launch(ks.matmul_kernel, a, b, c,
                                                                 REGISTER_STAGED)))
            if tw is not None:
                ct = torch.empty_like(c)
                t, tcfg = B.best_triton(lambda cfg: ptr_launch(tw.matmul_kernel, a, b, ct, cfg),
                                        None, f"{dname} {M}x{N}x{K}")
                row.update(triton=tflops(flop, t), triton_cfg=tcfg)
            cc = torch.empty_like(c)
            row["cublas"] = tflops(flop, B.timer(lambda: torch.matmul(a, b, out=cc)))
            B.emit(row)
            del a, b, c, ref
            torch.cuda.empty_cache()
    common.markdown_table(
        ["dtype", "M x N x K"] + peer_headers(cublas="cuBLAS") +
        ["Kiln tiles", "Kiln registers-staged (1 stage)", "mma/staged", "rel. error"],
        [[r["dtype"], r["shape"]] + peer_columns(r) +
         [fmt_config(r["kiln_cfg"]), fmt(r["kiln_staged"]),
          fmt(r["kiln"] / r["kiln_staged"], ".2f"), fmt(r["kiln_err"], ".1e")]
         for r in B.rows],
        align="ll" + PEER_ALIGN + "lrrr",
        title=B.title("Matmul on the mma.sync path (Kiln for sm_90: cp.async rings, ldmatrix, "
                      "mma.sync; Triton: wgmma)"))


def v_library_fp8(B):
    torch = B.torch
    import torch.nn.functional as F
    common.setup_paths()
    from kiln_kernels import matmul as mm
    tmm = common.twin(mm) if B.tw is not None else None
    one = torch.ones((), device="cuda")
    dtype = B.dtype(B.dtypes[0])
    for M, N, K in B.shapes:
        a16 = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b16 = torch.randn(N, K, device="cuda", dtype=torch.float16).t()
        a, b = a16.to(dtype), b16.to(dtype)
        b16c = b16.contiguous()  # the fp16 matmul's B row-major (tensor descriptors)
        bias = torch.randn(N, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        flop = 2.0 * M * N * K
        for epi in ("none", "bias+gelu"):
            bias_e, act = (None, None) if epi == "none" else (bias, "gelu")
            row = {"dtype": "e4m3" if dtype == torch.float8_e4m3fn else B.dtypes[0],
                   "shape": f"{M}x{N}x{K}", "epilogue": epi}
            if epi == "none":
                def torch_fn():
                    return torch._scaled_mm(a, b, one, one, out_dtype=torch.float16)
                want = ref
            else:
                def torch_fn():
                    return F.gelu(torch._scaled_mm(a, b, one, one, bias=bias,
                                                   out_dtype=torch.float16), approximate="tanh")
                want = F.gelu(ref + bias.float(), approximate="tanh")
            kiln_fn = lambda: mm.matmul(a, b, bias_e, act)  # noqa: E731
            row["kiln_err"] = relerr(kiln_fn(), want)
            row["kiln"] = tflops(flop, B.timer(kiln_fn))
            row["kiln_cfg"] = mm.config_for(M, N, K, fp8=True)
            if tmm is not None:
                ct = torch.empty(M, N, device="cuda", dtype=torch.float16)
                t, cfg = B.best_triton(
                    lambda cfg: library_launch(tmm, a, b, ct, bias_e, act, cfg), None,
                    f"{M}x{N}x{K} {epi}")
                row.update(triton=tflops(flop, t), triton_cfg=cfg,
                           triton_err=relerr(ct, want) if cfg else None)
            row["cublas"] = tflops(flop, B.timer(torch_fn))
            if epi == "none":
                row["kiln_fp16"] = tflops(flop, B.timer(lambda: mm.matmul(a16, b16c)))
            B.emit(row)
        del a16, b16, a, b, b16c
        torch.cuda.empty_cache()
    common.markdown_table(
        ["M x N x K", "epilogue"] + peer_headers(cublas="torch._scaled_mm") +
        ["Kiln fp16 TFLOP/s", "Kiln tiles", "Kiln rel. error", "Triton rel. error"],
        [[r["shape"], r["epilogue"]] + peer_columns(r) +
         [fmt(r.get("kiln_fp16")), fmt_config(r["kiln_cfg"]), fmt(r["kiln_err"], ".1e"),
          fmt(r.get("triton_err"), ".1e")] for r in B.rows],
        align="ll" + PEER_ALIGN + "rlrr",
        title=B.title("The library matmul on fp8 operands (e4m3, column-major B, fp16 out; "
                      "Triton: the library module's twin)"))


def v_peers(B):
    """key=value lines beside kiln-bench --only=matmul (bench/kiln_bench.cpp)."""
    torch, ks, tw = B.torch, B.ks, B.tw
    kcfg = (128, 256, 64, 8, B.args.stages)
    for M, N, K in B.shapes:
        n = M
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        flop = 2.0 * M * N * K
        tag = str(n) if M == N == K else f"{M}x{N}x{K}"
        cublas = tflops(flop, B.timer(lambda: torch.matmul(a, b, out=c)))
        print(f"torch_matmul_{tag}_tflops={cublas:.2f}")
        if tw is not None:
            t, cfg = B.best_triton(lambda cfg: ptr_launch(tw.matmul_kernel, a, b, c, cfg),
                                   kcfg, f"fp16 {tag}")
            print(f"triton_matmul_{tag}_tflops={tflops(flop, t):.2f}")
            print(f"triton_matmul_{tag}_config={fmt_config(cfg)}")
        if ks is not None:  # Kiln from Python, beside kiln-bench's C++ figures
            kiln_t = tflops(flop, B.timer(ptr_launch(ks.matmul_kernel, a, b, c, kcfg)))
            print(f"kiln_py_matmul_{tag}_tflops={kiln_t:.2f}")
            print(f"kiln_py_matmul_{tag}_vs_torch={kiln_t / cublas:.3f}")
            if tw is not None:
                print(f"kiln_py_matmul_{tag}_vs_triton={kiln_t / tflops(flop, t):.3f}")
        sys.stdout.flush()


def load_cpp_matmul(path):
    """kiln_cpp_matmul of libkiln-cpp-kernels.so (bench/cpp_kernels.cpp) as a Python call."""
    import ctypes
    lib = common.cpp_kernels(path)
    f = lib.kiln_cpp_matmul
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_uint64] * 3 + [ctypes.c_int32] * 3 + [ctypes.c_void_p] + \
        [ctypes.c_int] * 4 + [ctypes.c_uint] * 2 + [ctypes.c_char_p, ctypes.c_size_t]

    def call(a, b, c, cfg, stream):
        BM, BN, BK, warps, stages = cfg
        M, K = a.shape
        lib.call(f, a.data_ptr(), b.data_ptr(), c.data_ptr(), M, b.shape[1], K, stream, BM, BN,
                 BK, 8, warps, stages)
    return call


def v_cpp(B):
    torch, ks = B.torch, B.ks
    kcfg = (128, 256, 64, 8, B.args.stages)
    cpp = load_cpp_matmul(B.args.cpp_lib)
    stream = torch.cuda.current_stream().cuda_stream
    for row, a, b, ref, flop in pointer_cases(B):
        c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=a.dtype)
        cp = torch.full_like(c, float("nan"))
        finals = {"cpp": lambda: cpp(a, b, c, kcfg, stream),
                  "kiln": ptr_launch(ks.matmul_kernel, a, b, cp, kcfg)}
        for name, out in (("cpp", c), ("kiln", cp)):
            finals[name]()
            torch.cuda.synchronize()
            row[f"{name}_err"] = relerr(out, ref)
            row[name] = tflops(flop, B.timer(finals[name]))
        pointer_peers(B, row, finals, a, b, ref, kcfg, flop)
        if "triton" in finals:  # Triton against itself: the run-to-run noise
            finals["triton_again"] = finals["triton"]
        interleave(B, row, finals, flop)
        B.emit(row)

    def ratio(r, peer):
        return fmt(r["cpp"] / r[peer] if r.get(peer) else None, ".3f")
    common.markdown_table(
        ["dtype", "M x N x K", "C++ DSL TFLOP/s", "Python TFLOP/s", "Triton TFLOP/s",
         "Triton tiles", "cuBLAS TFLOP/s", "C++/Python", "C++/Triton", "C++/cuBLAS",
         "Triton/Triton", "C++ rel. error", "Python rel. error"],
        [[r["dtype"], r["shape"], fmt(r["cpp"]), fmt(r["kiln"]), fmt(r.get("triton")),
          fmt_config(r.get("triton_cfg")), fmt(r["cublas"]), ratio(r, "kiln"),
          ratio(r, "triton"), ratio(r, "cublas"),
          fmt(r["triton_again"] / r["triton"] if r.get("triton_again") else None, ".3f"),
          fmt(r["cpp_err"], ".1e"), fmt(r["kiln_err"], ".1e")] for r in B.rows],
        align="llrrrlrrrrrrr",
        title=B.title(f"Matmul, Triton's tutorial kernel from the C++ DSL and from Python "
                      f"(Kiln {fmt_config(kcfg)}, GROUP_M=8)"))


RUN = {"pointer": v_pointer, "tma": v_tma, "persistent": v_persistent,
       "epilogue": v_epilogue, "fp8": v_fp8, "int8": v_int8, "mma-sync": v_mma_sync,
       "library-fp8": v_library_fp8, "cpp": v_cpp, "peers": v_peers}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 3)[3],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", default=["pointer"],
                    help="variants to run (default: pointer): " + ", ".join(VARIANTS) +
                    ", all; aliases: " + ", ".join(f"{k}={v}" for k, v in ALIASES.items()))
    ap.add_argument("--reps", type=int, default=0, help="timings per measurement "
                    "(default: the variant's: 25; epilogue and library-fp8 15; mma-sync 20; "
                    "peers 11)")
    ap.add_argument("--batch", type=int, default=0, help="calls per timing (default 10; "
                    "peers 1; 1: per call, launch work included)")
    ap.add_argument("--shapes", default="", help="MxNxK,... (default: the variant's)")
    ap.add_argument("--dtypes", default="", help="fp16,bf16 / float8_e4m3fn,float8_e5m2 "
                    "(default: the variant's)")
    ap.add_argument("--stages", type=int, default=4, help="Kiln's num_stages (pointer, tma, "
                    "persistent, peers)")
    ap.add_argument("--configs", default="", help="fp8, int8: the configurations Kiln runs, "
                    "its fastest counts (default " + CONFIGS_8BIT + "); also Triton's there")
    ap.add_argument("--triton-configs", default="", help="Triton's autotuning set (default "
                    "16-bit: " + TRITON_16BIT + "; 8-bit: --configs)")
    ap.add_argument("--triton-stages", type=int, default=0, help="Triton at Kiln's tiles "
                    "with this many stages only, not autotuned")
    ap.add_argument("--no-triton", action="store_true", help="Kiln and cuBLAS only")
    ap.add_argument("--rounds", type=int, default=5, help="pointer: Kiln, Triton's fastest "
                    "configuration and cuBLAS timed again in this many interleaved rounds "
                    "(order rotated), medians reported; 0: each timed once, one after another")
    ap.add_argument("--orders", default="col,row", help="fp8, int8: B column-major (col) "
                    "and/or row-major (row)")
    ap.add_argument("--dump", default=None, help="tma: write the Kiln TMA kernel's PTX to DIR")
    ap.add_argument("--cpp-lib", default="", help="cpp: libkiln-cpp-kernels.so's path")
    ap.add_argument("--only", choices=["all", "kiln", "triton"], default="all",
                    help="tma: time one kernel alone (for a profiler), else all")
    args = ap.parse_args(argv)
    names = []
    for v in args.variants:
        v = ALIASES.get(v, v)
        if v == "all":
            names += [x for x in ALL if x not in names]
        elif v in VARIANTS:
            if v not in names:
                names.append(v)
        else:
            ap.error(f"unknown variant {v!r}: expected one of {', '.join(VARIANTS)}, all")
    args.variants = names
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    variants = args.variants
    child = None
    if "mma-sync" in variants and len(variants) > 1:
        # The process JIT's target is fixed at its first use: mma-sync gets a process of its
        # own, with the same options.
        variants = [v for v in variants if v != "mma-sync"]
        known = set(VARIANTS) | set(ALIASES) | {"all"}
        child = [sys.executable, os.path.abspath(__file__), "mma-sync"] + \
            [a for a in argv if a not in known]
    elif variants == ["mma-sync"]:
        os.environ.setdefault("KILN_ARCH", "sm_90")
    import torch
    try:
        import kiln  # noqa: F401  (its version in the device line)
    except ImportError:
        pass
    print(common.device_line(triton=not args.no_triton), flush=True)
    status = 0
    for v in variants:
        print(f"\n== bench_matmul {v}", flush=True)
        B = Bench(args, v)
        try:
            RUN[v](B)
        except SystemExit:
            raise
        except Exception as e:  # one variant failing must not hide the others
            import traceback
            traceback.print_exc()
            common.report(f"matmul_{v.replace('-', '_')}_ERROR",
                          repr(e).replace("\n", " ")[:500])
            status = 1
        torch.cuda.empty_cache()
    if child:
        print("\n== bench_matmul mma-sync (child process, KILN_ARCH=sm_90)", flush=True)
        r = subprocess.run(child, env=dict(os.environ, KILN_ARCH="sm_90"))
        status = status or r.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
