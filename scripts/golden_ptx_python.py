#!/usr/bin/env python3
"""Golden PTX replay of the Python kernel library: compiles each @kiln.jit kernel of
kernels/python/kiln_kernels at the configurations its host wrapper and the benchmarks launch it
with (tiles, num_warps, num_stages, dtypes, and the specialization a launch derives from its
arguments) through kiln.compile for each target in TARGETS, and compares the PTX with
test/golden/python/<kernel>.<config>.<arch>.ptx, so that a compiler refactor shows it changed no
generated code (scripts/golden_ptx.py does the same for kernels/*.mlir).

    scripts/golden_ptx_python.py              # check (exit 1 and a diff on any difference)
    scripts/golden_ptx_python.py --update     # regenerate after a deliberate change

It needs the kiln package on PYTHONPATH (build/python, or a staged copy) and no GPU; ctest runs
the check (test `golden-ptx-python`). kernels/python is taken from this checkout.

Every @kiln.jit function of the library is accounted for: a kernel with its cases in CASES, a
device function in HELPERS (compiled inside the kernels named there), or a reason in
NOT_COMPILED; a function in none of them fails the check. A case that cannot be compiled for a
target is listed in UNSUPPORTED with the reason, printed on every run."""
import argparse
import importlib
import os
import pathlib
import pkgutil
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "test" / "golden" / "python"
# sm_90a: wgmma, TMA and the warpgroup paths; sm_80: cp.async rings, ldmatrix and mma.sync.
TARGETS = ("sm_90a", "sm_80")

# A fresh, private disk cache: no compiled kernel from an earlier build can stand in for one
# compiled now (set before kiln is imported; removed at exit).
_CACHE = tempfile.mkdtemp(prefix="kiln-golden-ptx-python-")
os.environ["KILN_CACHE_DIR"] = _CACHE
sys.path.insert(0, str(ROOT / "kernels" / "python"))
sys.path.insert(0, str(ROOT / "scripts"))

import kiln  # noqa: E402
import kiln_kernels  # noqa: E402
from kiln_kernels import (cross_entropy, flash_attention, flash_attention_bwd,  # noqa: E402
                          flash_attention_persistent, kl_div, layernorm, matmul, rmsnorm, rope,
                          softmax, swiglu)
from kiln_kernels._utils import next_power_of_2, num_warps_for, row_block  # noqa: E402
from golden_files import GoldenSet  # noqa: E402

# ------------------------------------------------------------------ launch arguments
# A case gives the kernel's arguments as its host wrapper passes them for one benchmark shape;
# launch_spec turns each into the signature string a launch specializes on, by the launcher's
# rules (python/src/Launcher.cpp, readArg and specOf): ints are i32 (i64 past 32 bits), `:1`
# when 1 and `:16` when a multiple of 16; floats fp32; tensors `*dtype:16` (torch allocations
# are 16-byte aligned); None a constant; tensor descriptors their dtype, block and which
# extents are multiples of 16.


class Ptr:
    """A tensor argument of element type `dtype` ("fp16", "bf16", "fp32", "i64", "fp8e4nv")."""

    def __init__(self, dtype):
        self.dtype = dtype


class Desc:
    """kiln.TensorDescriptor.from_tensor(t, block) of a contiguous tensor t of `shape`."""

    def __init__(self, dtype, shape, block):
        self.dtype, self.shape, self.block = dtype, tuple(shape), tuple(block)


def launch_spec(value):
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        ty = "i32" if -2**31 <= value < 2**31 else "i64"
        return ty + (":1" if value == 1 else ":16" if value % 16 == 0 else "")
    if isinstance(value, float):
        return "fp32"
    if isinstance(value, Ptr):
        return f"*{value.dtype}:16"
    if isinstance(value, Desc):
        # kiln.compile spells a descriptor "tensordesc<fp16[128, 64]>" and assumes no extent a
        # multiple of 16; a launch on the benchmark's shapes marks those that are ('D'):
        # "@DD" carries the launcher's marks to _descriptor_spec_with_extents below.
        flags = "".join("D" if e % 16 == 0 else "-" for e in value.shape)
        return f"tensordesc<{value.dtype}[{', '.join(map(str, value.block))}]>@{flags}"
    raise TypeError(f"no launch spec for {value!r}")


def _install_descriptor_extents():
    """kiln.compile's descriptor spec with the launcher's extent marks: the public spelling
    takes none, so "tensordesc<...>@DD" is split here and the marks replace its "--". Without
    this hook (kiln.runtime.jit._descriptor_spec renamed) the "@DD" suffix makes kiln.compile
    fail loudly rather than compile another variant."""
    jit_mod = sys.modules["kiln.runtime.jit"]
    plain = jit_mod._descriptor_spec

    def with_extents(where, s):
        s, _, flags = s.partition("@")
        spec = plain(where, s)
        if not flags:
            return spec
        head, _, old = spec.rpartition(":")
        if len(old) != len(flags) or set(old) != {"-"}:
            raise SystemExit(f"golden_ptx_python: unexpected descriptor spec '{spec}' from "
                             f"kiln.runtime.jit._descriptor_spec; update "
                             f"_install_descriptor_extents")
        return f"{head}:{flags}"
    jit_mod._descriptor_spec = with_extents


class Case:
    """One kernel at one configuration: `args` its runtime arguments (None: a constant, as a
    launch passes it), `consts` its tl.constexpr values."""

    def __init__(self, fn, config, args, consts, num_warps, num_stages=3, source=""):
        self.fn, self.config, self.args, self.consts = fn, config, args, consts
        self.num_warps, self.num_stages, self.source = num_warps, num_stages, source
        self.name = fn.info.name

    def compile(self, arch):
        sig = {k: launch_spec(v) for k, v in self.args.items() if v is not None}
        consts = dict(self.consts, **{k: None for k, v in self.args.items() if v is None})
        return kiln.compile(self.fn, signature=sig, constexprs=consts, target=arch,
                            num_warps=self.num_warps, num_stages=self.num_stages)


def contiguous_strides(shape):
    strides, s = [], 1
    for e in reversed(shape):
        strides.append(s)
        s *= e
    return tuple(reversed(strides))


# ------------------------------------------------------------------ the cases
# H100: 132 SMs (the norms' backward splits rows over 2 programs per SM).
SMS = 132
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8e4nv": 1}


def softmax_cases():
    """bench/bench_llm_ops.py bench_softmax: fp32 and bf16 at 32768x1024, 8192x8192 and
    4096x32768; log-softmax at 8192; the looped forward at 32768 with max_fused=8192; the host
    code of kiln_kernels.softmax (softmax_forward / softmax_backward)."""
    cases = []

    def fwd(dt, M, N, log=False, max_fused=32768, tag=""):
        block, single = row_block(N, max_fused)
        rows = softmax.rows_per_program(block, ITEMSIZE[dt]) if single else 1
        common = dict(out_ptr=Ptr(dt), in_ptr=Ptr(dt), in_stride=N, out_stride=N)
        cfg = f"{dt}_{M}x{N}{'_log' if log else ''}{tag}"
        if rows > 1:
            cases.append(Case(softmax.softmax_fwd_rows_kernel, cfg,
                              dict(common, n_rows=M, n_cols=N),
                              dict(ROWS=rows, BLOCK=block, LOG=log),
                              num_warps_for(rows * block)))
        else:
            fn = softmax.softmax_fwd_kernel if single else softmax.softmax_fwd_loop_kernel
            cases.append(Case(fn, cfg, dict(common, n_cols=N), dict(BLOCK=block, LOG=log),
                              num_warps_for(block)))

    def bwd(dt, M, N, log=False, max_fused=32768):
        block, single = row_block(N, max_fused)
        fn = softmax.softmax_bwd_kernel if single else softmax.softmax_bwd_loop_kernel
        cases.append(Case(fn, f"{dt}_{M}x{N}{'_log' if log else ''}",
                          dict(dx_ptr=Ptr(dt), dy_ptr=Ptr(dt), y_ptr=Ptr(dt), dx_stride=N,
                               dy_stride=N, y_stride=N, n_cols=N),
                          dict(BLOCK=block, LOG=log), num_warps_for(block)))

    fwd("fp32", 32768, 1024)           # one row per program, BLOCK 1024, 4 warps
    fwd("bf16", 32768, 1024)           # two rows per program (softmax_fwd_rows_kernel)
    fwd("fp32", 8192, 8192)
    fwd("bf16", 8192, 8192)
    fwd("bf16", 8192, 8192, log=True)  # log-softmax
    fwd("bf16", 4096, 32768)           # the longest row kept in one tile, 16 warps
    fwd("bf16", 4096, 32768, max_fused=8192, tag="_maxfused8192")  # softmax_fwd_loop_kernel
    bwd("fp32", 32768, 1024)
    bwd("bf16", 8192, 8192)
    bwd("bf16", 4096, 32768)
    # Not in the benchmark: rows longer than MAX_FUSED_SIZE take the looped backward
    # (softmax_backward on 65536-element rows: BLOCK 32768, 16 warps); log-softmax backward.
    bwd("bf16", 1024, 65536)
    bwd("bf16", 8192, 8192, log=True)
    return cases


def norm_cases():
    """bench_llm_ops.py bench_rmsnorm (bf16 16384x4096 and 8192x8192) and bench_layernorm
    (bf16 16384x4096); rmsnorm_forward / rmsnorm_backward / layernorm_* host code."""
    cases = []

    def rows_split(n_rows):
        programs = max(1, min(n_rows, SMS * 2))
        rpp = -(-n_rows // programs)
        return rpp

    for M, N in ((16384, 4096), (8192, 8192)):
        block = next_power_of_2(N)
        cfg = f"bf16_{M}x{N}"
        cases.append(Case(rmsnorm.rmsnorm_fwd_kernel, cfg,
                          dict(y_ptr=Ptr("bf16"), x_ptr=Ptr("bf16"), w_ptr=Ptr("bf16"),
                               rstd_ptr=Ptr("fp32"), y_stride=N, x_stride=N, n_cols=N, eps=1e-6),
                          dict(BLOCK=block), num_warps_for(block)))
        cases.append(Case(rmsnorm.rmsnorm_bwd_kernel, cfg,
                          dict(dx_ptr=Ptr("bf16"), dy_ptr=Ptr("bf16"), x_ptr=Ptr("bf16"),
                               w_ptr=Ptr("bf16"), rstd_ptr=Ptr("fp32"),
                               dw_partial_ptr=Ptr("fp32"), dx_stride=N, dy_stride=N,
                               x_stride=N, n_rows=M, n_cols=N,
                               rows_per_program=rows_split(M)),
                          dict(BLOCK=block), num_warps_for(block)))
    M, N = 16384, 4096
    block = next_power_of_2(N)
    cases.append(Case(layernorm.layernorm_fwd_kernel, f"bf16_{M}x{N}",
                      dict(y_ptr=Ptr("bf16"), x_ptr=Ptr("bf16"), w_ptr=Ptr("bf16"),
                           b_ptr=Ptr("bf16"), mean_ptr=Ptr("fp32"), rstd_ptr=Ptr("fp32"),
                           y_stride=N, x_stride=N, n_cols=N, eps=1e-5),
                      dict(BLOCK=block), num_warps_for(block)))
    cases.append(Case(layernorm.layernorm_bwd_kernel, f"bf16_{M}x{N}",
                      dict(dx_ptr=Ptr("bf16"), dy_ptr=Ptr("bf16"), x_ptr=Ptr("bf16"),
                           w_ptr=Ptr("bf16"), mean_ptr=Ptr("fp32"), rstd_ptr=Ptr("fp32"),
                           dw_partial_ptr=Ptr("fp32"), db_partial_ptr=Ptr("fp32"),
                           dx_stride=N, dy_stride=N, x_stride=N, n_rows=M, n_cols=N,
                           rows_per_program=rows_split(M)),
                      dict(BLOCK=block), num_warps_for(block)))
    return cases


def loss_cases():
    """bench_llm_ops.py bench_cross_entropy (fp32 and bf16 8192x32000, int64 targets,
    ignore_index -100), bench_kl_div (fp32 4096x32000, batchmean); the backward's
    scale_kernel at cross_entropy.scale_inplace's BLOCK 4096 / 8 warps on the same logits."""
    cases = []
    M, V = 8192, 32000
    for dt in ("fp32", "bf16"):
        block = min(next_power_of_2(V), cross_entropy.CE_BLOCK)
        cases.append(Case(cross_entropy.cross_entropy_kernel, f"{dt}_{M}x{V}",
                          dict(x_ptr=Ptr(dt), target_ptr=Ptr("i64"), loss_ptr=Ptr("fp32"),
                               x_stride=V, n_cols=V, ignore_index=-100, scale=1.0 / M),
                          dict(BLOCK=block),
                          cross_entropy.ce_num_warps(block, V, ITEMSIZE[dt])))
    cases.append(Case(cross_entropy.scale_kernel, f"bf16_{M}x{V}",
                      dict(x_ptr=Ptr("bf16"), scale_ptr=Ptr("fp32"), n=M * V),
                      dict(BLOCK=4096), 8))
    M, N = 4096, 32000
    block = min(next_power_of_2(N), kl_div.KL_BLOCK)
    consts = dict(BLOCK=block, LOG_TARGET=False, ELEMENTWISE=False)
    cases.append(Case(kl_div.kl_div_fwd_kernel, f"fp32_{M}x{N}_batchmean",
                      dict(input_ptr=Ptr("fp32"), target_ptr=Ptr("fp32"), loss_ptr=Ptr("fp32"),
                           in_stride=N, t_stride=N, loss_stride=0, n_cols=N),
                      consts, num_warps_for(block)))
    cases.append(Case(kl_div.kl_div_bwd_kernel, f"fp32_{M}x{N}_batchmean",
                      dict(grad_ptr=Ptr("fp32"), target_ptr=Ptr("fp32"), go_ptr=Ptr("fp32"),
                           g_stride=N, t_stride=N, go_stride=0, n_cols=N, scale=1.0 / M),
                      consts, num_warps_for(block)))
    # Not in the benchmark: reduction="none" (ELEMENTWISE) with log_target, the other branches.
    consts = dict(BLOCK=block, LOG_TARGET=True, ELEMENTWISE=True)
    cases.append(Case(kl_div.kl_div_fwd_kernel, f"fp32_{M}x{N}_none_logtarget",
                      dict(input_ptr=Ptr("fp32"), target_ptr=Ptr("fp32"), loss_ptr=Ptr("fp32"),
                           in_stride=N, t_stride=N, loss_stride=N, n_cols=N),
                      consts, num_warps_for(block)))
    cases.append(Case(kl_div.kl_div_bwd_kernel, f"fp32_{M}x{N}_none_logtarget",
                      dict(grad_ptr=Ptr("fp32"), target_ptr=Ptr("fp32"), go_ptr=Ptr("fp32"),
                           g_stride=N, t_stride=N, go_stride=N, n_cols=N, scale=1.0),
                      consts, num_warps_for(block)))
    return cases


def elementwise_cases():
    """bench_llm_ops.py bench_swiglu (bf16 4096x14336) and bench_rope (bf16 B4 S4096, 32 query
    and 8 key heads, D 128; cos/sin [S, D]), forward and backward."""
    cases = []
    n = 4096 * 14336
    B = swiglu.SWIGLU_BLOCK
    cases.append(Case(swiglu.swiglu_fwd_kernel, "bf16_4096x14336",
                      dict(c_ptr=Ptr("bf16"), a_ptr=Ptr("bf16"), b_ptr=Ptr("bf16"), n=n),
                      dict(BLOCK=B), 8))
    cases.append(Case(swiglu.swiglu_bwd_kernel, "bf16_4096x14336",
                      dict(da_ptr=Ptr("bf16"), db_ptr=Ptr("bf16"), dc_ptr=Ptr("bf16"),
                           a_ptr=Ptr("bf16"), b_ptr=Ptr("bf16"), n=n),
                      dict(BLOCK=B), 8))
    Bt, S, D = 4, 4096, 128
    for H, who in ((32, "q"), (8, "k")):
        sb, ss, sh, _ = contiguous_strides((Bt, S, H, D))
        for backward in (False, True):
            cases.append(Case(
                rope.rope_kernel, f"bf16_{who}_b{Bt}_s{S}_h{H}_d{D}_{'bwd' if backward else 'fwd'}",
                dict(out_ptr=Ptr("bf16"), x_ptr=Ptr("bf16"), cos_ptr=Ptr("bf16"),
                     sin_ptr=Ptr("bf16"), seq_len=S, n_heads=H, x_sb=sb, x_ss=ss, x_sh=sh,
                     o_sb=sb, o_ss=ss, o_sh=sh, c_sb=0, c_ss=D),
                dict(HALF=D // 2, BLOCK_H=next_power_of_2(H), BLOCK_D=next_power_of_2(D // 2),
                     BACKWARD=backward), 4))
    return cases


def attention_cases():
    """bench/bench_attention.py (fp16, B4 H32 S4096, D 128 by default, causal both, LSE not
    written; --head-dim 64, --dtype bf16): its default path, the descriptor kernel at
    descriptor_tile_config's tiles, and with --descriptors off the pointer kernel at
    tile_config's (overlap both); the forward with the logsumexp as
    attention(..., return_lse=True) runs it
    for bench/bench_attention_bwd.py; the backward's three kernels at bwd_tile_config's tiles
    (D 128: dK/dV 64x128, dQ 128x64, 8 warps, 2 stages; D 64: 3 stages), causal both."""
    cases = []
    Bt, H, S = 4, 32, 4096

    def fwd(dt, D, causal, overlap=None, lse=False):
        bm, bn, nw, ns = flash_attention.tile_config(D)
        if overlap is None:
            overlap = flash_attention.overlap_default(D)
        st = contiguous_strides((Bt, H, S, D))
        args = dict(Q=Ptr(dt), K=Ptr(dt), V=Ptr(dt), Out=Ptr(dt),
                    LSE=Ptr("fp32") if lse else None, sm_scale=D ** -0.5)
        for p in "qkvo":
            row = "m" if p in "qo" else "n"
            args.update({f"stride_{p}{a}": s for a, s in zip(("z", "h", row, "k"), st)})
        args.update(Z=Bt, H=H, N_CTX=S)
        cfg = (f"{dt}_d{D}{'_causal' if causal else ''}{'_overlap' if overlap else '_plain'}"
               f"{'_lse' if lse else ''}")
        cases.append(Case(flash_attention._attn_fwd, cfg, args,
                          dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                               EVEN_N=S % bn == 0, OVERLAP=overlap, GROUP=1), nw, ns))

    def fwd_desc(dt, D, causal, lse=False, overlap=False):
        # attention_forward's default for contiguous tensors with whole blocks (these):
        # _attn_fwd_desc through (B * H * S, D) descriptors at descriptor_tile_config's tiles
        bm, bn, nw, ns = flash_attention.descriptor_tile_config(
            D, causal, "fa3" if overlap == 2 else overlap)
        rows = Bt * H * S
        args = dict(desc_q=Desc(dt, (rows, D), (bm, D)), desc_k=Desc(dt, (rows, D), (bn, D)),
                    desc_v=Desc(dt, (rows, D), (bn, D)), desc_o=Desc(dt, (rows, D), (bm, D)),
                    LSE=Ptr("fp32") if lse else None, sm_scale=D ** -0.5, H=H, N_CTX=S)
        cfg = (f"{dt}_d{D}{'_causal' if causal else ''}_desc{'_lse' if lse else ''}"
               f"{'_fa3' if overlap == 2 else '_overlap' if overlap else ''}")
        cases.append(Case(flash_attention._attn_fwd_desc, cfg, args,
                          dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, GROUP=1,
                               OVERLAP=overlap, LONGEST_FIRST=causal), nw, ns))

    for causal in (False, True):
        fwd_desc("fp16", 128, causal)             # bench_attention's default path
        fwd_desc("fp16", 64, causal)
    fwd_desc("bf16", 128, False)
    fwd_desc("fp16", 128, True, lse=True)         # the training forward (attention())
    fwd_desc("fp16", 128, False, overlap=True)    # overlap=True: the rotated loop
    fwd_desc("fp16", 128, False, overlap=2)       # overlap="fa3": FA3's order, p @ v carried
    fwd_desc("fp16", 128, True, overlap=2)
    def fwd_persistent(dt, D, lse=False):
        # attention_forward's default non-causal at D 128 on sm_90 (overlap="persistent"):
        # one program an SM (132 on the H100) over the B * H * S / BLOCK_M query blocks
        bm, bn, nw, ns = flash_attention.descriptor_tile_config(D, False, "persistent")
        rows = Bt * H * S
        args = dict(Q=Ptr(dt), desc_k=Desc(dt, (rows, D), (bn, D)),
                    desc_v=Desc(dt, (rows, D), (bn, D)), Out=Ptr(dt),
                    LSE=Ptr("fp32") if lse else None, sm_scale=D ** -0.5, H=H, N_CTX=S,
                    n_tiles=rows // bm)
        cases.append(Case(flash_attention_persistent._attn_fwd_persistent,
                          f"{dt}_d{D}{'_lse' if lse else ''}", args,
                          dict(HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, GROUP=1), nw, ns))

    fwd_persistent("fp16", 128)                   # bench_attention's default path, non-causal
    fwd_persistent("fp16", 128, lse=True)         # the training forward (attention())
    # the pointer kernel: strided inputs, partial blocks, --descriptors off
    for causal in (False, True):
        fwd("fp16", 128, causal)                  # the default: rotated loop at D 128
        fwd("fp16", 128, causal, overlap=False)   # bench_attention's plain column
        fwd("fp16", 64, causal)                   # --head-dim 64 (plain loop by default)
    fwd("bf16", 128, False)                       # --dtype bf16
    fwd("fp16", 128, True, lse=True)              # the training forward (attention())

    def bwd(dt, D, causal):
        (m1, n1), (m2, n2), nw, ns = flash_attention_bwd.bwd_tile_config(D)
        st = contiguous_strides((Bt, H, S, D))
        bounds = bool(S % n1 or S % m2)

        def strides(p, row):
            return {f"stride_{p}{a}": s for a, s in zip(("z", "h", row, "k"), st)}
        tag = f"{dt}_d{D}{'_causal' if causal else ''}"
        if not causal:  # the delta kernel does not depend on the mask
            cases.append(Case(flash_attention_bwd._attn_bwd_delta, f"{dt}_d{D}",
                              dict(O=Ptr(dt), DO=Ptr(dt), Delta=Ptr("fp32"), **strides("o", "m"),
                                   **strides("d", "m"), H=H, N_CTX=S),
                              dict(HEAD_DIM=D, BLOCK_M=m2), nw))
        common = dict(**strides("q", "m"), **strides("k", "n"), **strides("v", "n"),
                      **strides("d", "m"))
        cases.append(Case(flash_attention_bwd._attn_bwd_dkdv, tag,
                          dict(Q=Ptr(dt), K=Ptr(dt), V=Ptr(dt), DO=Ptr(dt), DK=Ptr(dt),
                               DV=Ptr(dt), LSE=Ptr("fp32"), Delta=Ptr("fp32"),
                               sm_scale=D ** -0.5, **common, **strides("g", "n"),
                               **strides("u", "n"), H=H, N_CTX=S),
                          dict(HEAD_DIM=D, BLOCK_M=m1, BLOCK_N=n1, CAUSAL=causal,
                               BOUNDS=bounds, GROUP=1), nw, ns))
        cases.append(Case(flash_attention_bwd._attn_bwd_dq, tag,
                          dict(Q=Ptr(dt), K=Ptr(dt), V=Ptr(dt), DO=Ptr(dt), DQ=Ptr(dt),
                               LSE=Ptr("fp32"), Delta=Ptr("fp32"), sm_scale=D ** -0.5,
                               **common, **strides("g", "m"), H=H, N_CTX=S),
                          dict(HEAD_DIM=D, BLOCK_M=m2, BLOCK_N=n2, CAUSAL=causal,
                               BOUNDS=bounds, GROUP=1), nw, ns))

    for causal in (False, True):
        bwd("fp16", 128, causal)
        bwd("fp16", 64, causal)   # --head-dim 64
    return cases


def matmul_cases():
    """kiln_kernels.matmul.matmul as bench/bench_matmul.py epilogue calls it (fp16 and bf16,
    descriptors: matmul_tma_kernel at config_for's tiles, 128x256x64 on 8 warps with 4
    stages) and bench/bench_matmul.py library-fp8 (e4m3 operands, B column-major, fp16 out:
    matmul_kernel, 128x256x128 on 8 warps with 3 stages)."""
    cases = []

    def tma(dt, M, N, K, bias, act):
        bm, bn, bk, warps, stages = matmul.config_for(M, N, K)
        cfg = f"{dt}_{M}x{N}x{K}_{'bias_' if bias else ''}{act or 'none'}"
        cases.append(Case(matmul.matmul_tma_kernel, cfg,
                          dict(a_desc=Desc(dt, (M, K), (bm, bk)),
                               b_desc=Desc(dt, (K, N), (bk, bn)),
                               c_desc=Desc(dt, (M, N), (bm, bn)),
                               bias_ptr=Ptr(dt), M=M, N=N, K=K),  # bias_arg = c without a bias
                          dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, HAS_BIAS=bias,
                               ACTIVATION=act or ""), warps, stages))

    tma("fp16", 4096, 4096, 4096, True, "relu")
    tma("bf16", 8192, 8192, 8192, True, "gelu")
    tma("fp16", 8192, 11008, 4096, False, "silu")
    tma("bf16", 8192, 4096, 11008, True, None)
    tma("fp16", 4000, 4000, 4000, True, "gelu")   # masked edges (K % 64 != 0)
    # Not in the benchmarks: config_for's smaller tiles (128x128x64, 4 warps, 4 stages).
    tma("fp16", 1024, 1024, 1024, False, None)

    def fp8(M, N, K, bias, act):
        bm, bn, bk, warps, stages = matmul.config_for(M, N, K, fp8=True)
        cfg = f"fp8e4nv_{M}x{N}x{K}_bcol_{'bias_' if bias else ''}{act or 'none'}"
        cases.append(Case(matmul.matmul_kernel, cfg,
                          dict(a_ptr=Ptr("fp8e4nv"), b_ptr=Ptr("fp8e4nv"), c_ptr=Ptr("fp16"),
                               bias_ptr=Ptr("fp16"), M=M, N=N, K=K,
                               stride_am=K, stride_ak=1,      # a [M, K] row-major
                               stride_bk=1, stride_bn=K,      # b = [N, K].t(): column-major
                               stride_cm=N, stride_cn=1),
                          dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, HAS_BIAS=bias,
                               ACTIVATION=act or ""), warps, stages))

    fp8(4096, 4096, 4096, False, None)
    fp8(8192, 11008, 4096, True, "gelu")
    return cases


CASES = (softmax_cases() + norm_cases() + loss_cases() + elementwise_cases() +
         attention_cases() + matmul_cases())

# Device functions: compiled inline into the kernels named, in their cases.
HELPERS = {
    "_attn_fwd_inner": "_attn_fwd",
    "_attn_fwd_inner_overlap": "_attn_fwd",
    "_overlap_softmax": "_attn_fwd",
    "_softmax_step": "_attn_fwd",
    "_attn_fwd_inner_desc": "_attn_fwd_desc",
    "_attn_fwd_inner_desc_overlap": "_attn_fwd_desc",
    "_attn_fwd_inner_desc_fa3": "_attn_fwd_desc",
    "_bwd_dkdv_inner": "_attn_bwd_dkdv",
    "_bwd_dkdv_head": "_attn_bwd_dkdv",
    "_bwd_dq_inner": "_attn_bwd_dq",
    "_load_q": "_attn_fwd_persistent",
    "_store_tile": "_attn_fwd_persistent",
    "_epilogue": "matmul_tma_kernel",
    "_tile": "matmul_tma_kernel",
}
# @kiln.jit functions of the library with no case, and why (none today).
NOT_COMPILED = {}
# (kernel, config, arch) that kiln.compile cannot build, and why (none today).
UNSUPPORTED = {}


def library_functions():
    """{name: JITFunction} of every @kiln.jit function defined in kiln_kernels."""
    found = {}
    for m in pkgutil.iter_modules(kiln_kernels.__path__):
        mod = importlib.import_module(f"kiln_kernels.{m.name}")
        for v in vars(mod).values():
            if isinstance(v, kiln.JITFunction) and v.info.fn.__module__ == mod.__name__:
                found[v.info.name] = v
    return found


def check_coverage():
    problems = []
    cased = {c.name for c in CASES}
    for name in sorted(library_functions()):
        if name in cased:
            continue
        if name in HELPERS:
            if HELPERS[name] not in cased:
                problems.append(f"{name}: its caller {HELPERS[name]} has no case")
        elif name not in NOT_COMPILED:
            problems.append(f"{name}: a @kiln.jit function of kiln_kernels with no case in "
                            f"CASES (nor in HELPERS or NOT_COMPILED)")
    files = [f"{c.name}.{c.config}" for c in CASES]
    dups = sorted({f for f in files if files.count(f) > 1})
    if dups:
        problems.append(f"cases with one name: {dups}")
    return problems


def normalize(ptx):
    """PTX as stored: a path of this checkout (none today) would tie it to one directory."""
    return ptx.replace(str(ROOT), "<root>")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="rewrite the golden files")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case's time")
    args = ap.parse_args()
    start = time.monotonic()
    _install_descriptor_extents()
    print(f"golden PTX (python): kiln from {pathlib.Path(kiln.__file__).parent}, "
          f"kernels from {pathlib.Path(kiln_kernels.__file__).parent}")
    problems = check_coverage()
    if problems:
        print("\n".join(problems))
        print("golden PTX (python): every @kiln.jit function of kiln_kernels needs a case, a "
              "HELPERS entry or a NOT_COMPILED reason")
        return 1
    for name, why in NOT_COMPILED.items():
        print(f"not compiled: {name}: {why}")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    files, failed = GoldenSet(GOLDEN, "golden/python"), []
    for case in CASES:
        for arch in TARGETS:
            name = f"{case.name}.{case.config}.{arch}.ptx"
            why = UNSUPPORTED.get((case.name, case.config, arch))
            if why:
                print(f"not compiled: {name}: {why}")
                continue
            t0 = time.monotonic()
            try:
                ptx = normalize(case.compile(arch).asm["ptx"])
            except Exception as e:  # noqa: BLE001 - reported, and the run fails
                files.expected.add(name)
                failed.append(f"{name}: kiln.compile failed: {type(e).__name__}: {e}")
                continue
            if args.verbose:
                print(f"  {name}: {time.monotonic() - t0:.2f} s")
            files.record(name, ptx, args.update)
    took = time.monotonic() - start
    if failed:
        print("\n".join(failed))
        print(f"golden PTX (python): {len(failed)} cases failed to compile; a case that cannot "
              f"be compiled for a target goes in UNSUPPORTED with the reason")
        return 1
    return files.finish(args.update, "golden PTX (python)", "scripts/golden_ptx_python.py",
                        f"{len(CASES)} cases, {len(files.expected)} files ({took:.1f} s)")

if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        shutil.rmtree(_CACHE, ignore_errors=True)
