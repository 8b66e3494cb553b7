#!/usr/bin/env python3
"""A driver for a profiler, one named case a run: the kernel a #23 results file measured, at its
shape and configuration, launched under Kiln (or, --peer triton, its Triton twin on the same
source through bench/common.py, where one exists) --calls times (3), then the device
synchronized and the output checked against a torch reference: "CASE rel err X" (exit 1 when
X is past the case's bound, 2 when the case cannot run). The ncu before/after pairs of
issue #23's compiler fixes (bench/results/2026-11-28-ncu-evidence-index.md) profile one launch
of the case's kernel (the second: the first compiles), the "before" with a temporary
KILN_PROBE_<NAME>=1 switch and a fresh KILN_CACHE_DIR. It generalizes bench/ncu_pointer_matmul.py
and bench/ncu_attention_desc.py; the kernels, launchers and inputs are the benchmarks' and
tests' own (bench/cliff_sources*.py, bench/cliffs_*.py, bench/bench_cliffs.py,
kernels/python/kiln_kernels, libkiln-cpp-kernels.so, test/python), none copied.

    python3 bench/ncu_cases.py --list                  # cases, kernel regexes, fixes
    python3 bench/ncu_cases.py CASE [--peer triton] [--calls 3] [--config 128x64x8x3]
    ncu --clock-control none --kernel-name regex:K --launch-skip 1 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section LaunchStats \\
        --section InstructionStats --section MemoryWorkloadAnalysis --csv --page details \\
        python3 bench/ncu_cases.py CASE
    (regex:K as --list prints it, e.g. regex:^attn_fwd$; the output: bench/ncu_summary.py)

Needs kiln, torch and the GPU (kernels/python, bench/ and test/python on the path; the C++
cases libkiln-cpp-kernels.so: $KILN_CPP_KERNELS, else build/bench/ or the GPU bundle's,
common.cpp_kernels); --list needs none of them. --config overrides the case's tiles (its own
x-separated fields, in the order --list prints them). Descriptors made in kernels get their
scratch allocator here (kiln.set_allocator, and Triton's under --peer triton).

Cases (fix commit: what the results file measured; fp16, 4x32x4096 attention, unless said):

  attn_fwd_desc_d128        9902fd0 (s24 fix 2): tutorial 06's forward through host
                            descriptors, cliff_sources_attention.attn_fwd_desc, D 128,
                            non-causal, 128x128, 8 warps, 3 stages (bench/ncu_attention_desc.py's)
  attn_fwd_ptr_d128         f45bb96 / 9cafc52 (s25 tiles): the pointer forward attn_fwd, D 128,
                            non-causal, 128x128x8x3 (the 4k row of the A/B; its 16k and causal
                            rows moved alike)
  mm_ptr_4000               4253b6e (s29 section 3): tutorial 03's pointer matmul
                            cliff_sources.mm_ptr (B stored K x N, bench_cliffs' `ptr`), fp16
                            4000^3, 128x256x64, 8 warps, 4 stages: s29's A/B ran Kiln at that
                            config (its bench_cliffs table does not print the pick; tutorial
                            09's list has it)
  mm_tutorial_4000          4253b6e (s29 section 3): the same algorithm as bench_matmul.py's
                            pointer variant runs it (kernel_sources.matmul_kernel, B K x N), fp16
                            4000^3, 128x256x64x8x4: the kernel of the index row's 0.917 ->
                            0.997 (mm_ptr_4000 is bench_cliffs' formulation of it)
  attn_fwd_fa2_causal_d128  954fe88 (s30 section 1): attn_fwd_fa2 causal, D 128, 128x128x8x3
                            (Kiln's pick in s34's full run)
  cpp_matmul_4096           f281b8d (s32 section 1): the C++ DSL's tutorial matmul
                            (kernels/cpp/matmul.cpp) through libkiln-cpp-kernels.so as
                            bench_matmul.py's cpp variant calls it, fp16 4096^3, A M x K, B K x N,
                            128x256x64, 8 warps, 4 stages, GROUP_M 8. No Triton twin
  moe_ptr                   bfa97fe, cab74af (s37 section 1, s38 section 1): bench_cliffs' moe
                            section, cliff_sources.mm_moe with W by pointers, fp16, 8 experts,
                            8192 routed rows (4096 tokens, top-2; bench_cliffs' routing),
                            N 2048, K 4096, 128x256x64x8x3, one program an SM. The files
                            measured unsloth's grouped GEMM forward (not in the repository) at
                            this shape and config; mm_moe is the repository's closest
  moe_desc                  16f9117, 13eaac3 (s38 section 2): mm_moe with W through its 3-D
                            descriptor (W_DESC), as moe_ptr
  moe_desc_all              2302926 (s38 section 3): every operand by descriptors as unsloth's
                            TMA mode (X over NUM_TOKENS * TOPK rows: the int32 argument times a
                            constant the fix gave a tensor map): cliff_sources.mm_moe_desc_all
                            (mm_moe's walk; bench_cliffs' moe section has no such row), as
                            moe_ptr
  attn_fwd_d64              6b72ab9 (s21 call 14): the pointer forward attn_fwd, D 64,
                            non-causal, 128x64x8x3
  attn_fwd_causal_d64       a140cd9 (s26 section 2): attn_fwd causal, D 64, 128x64x8x3 (3-slot
                            rings: the slot wrap's compare and select). s26's ncu "before"
                            profiled the causal D 64 backward (5-slot rings): attn_bwd_d64_causal
  attn_bwd_d64              1a378ab, cab74af (s28 section 1, s38 section 1): tutorial 06's
  attn_bwd_d64_causal       backward, cliff_sources_attention.attn_bwd (after attn_bwd_preprocess;
                            O and M from the same library's attn_fwd at 128x64x8x3), D 64,
                            32x128x128x32, 4 warps, 5 stages (bench_cliffs' pick)
  fa3_d128                  c68ee38 (s33 sections 6-7, s34 section 1): kiln_kernels'
                            FlashAttention-3-order forward, warp-specialized
                            (attention_forward(overlap="fa3"): _attn_fwd_desc, 128x128x8x3),
                            D 128, non-causal (the fix's C7515 was the C++ door's: fa3_cpp_d128)
  fa3_cpp_d128              c68ee38: the C++ DSL's attentionFa3 (kernels/cpp/attention.cpp)
                            through libkiln-cpp-kernels.so as bench_cpp_attention.py calls it,
                            D 128, 128x128, 8 warps, 3 stages. No Triton twin
  group_norm_bwd            c8ef194 (s21 fix 3): cliff_sources_norms.group_norm_bwd through
                            cliffs_norms.launch, bf16 16x512x32x4096, BLOCK_SIZE 4096, 16 warps
                            (Kiln's pick in s21 call 6); the partial sums' torch kernels follow
  attn_fwd_peel             a62fad2 (s33 section 5): kiln_kernels' pointer path, its rotated
                            loop not warp-specialized (attention_forward(descriptors=False):
                            _attn_fwd, OVERLAP, 128x128x8x3), D 128, non-causal
  fa3_d64                   5377df6 (s35 section 1): attention_forward(overlap="fa3") at D 64,
                            non-causal, 128x64x8x3: _attn_fwd_desc warp-specialized (the
                            library's own D 64 tiles, 128x128x8x2, give a loop that is not:
                            no setmaxnreg, nothing for .maxnreg to change; at 128x128x8x3
                            ptxas allocates 168 registers with or without it; s35 does not
                            print its tiles)
  dd_int8_4096              dc63c1a (s40 section 5): test_descriptors_8bit.device_8bit_kernel
                            (descriptors made in the kernel, B stored N x K), int8 -> int32
                            4096^3, 128x256x128, 8 warps, 3 stages: what s40 timed (bench_cliffs'
                            mm_device_desc_persistent is 16-bit)
  dot_128_ns1               056b1bb (s37 section 2): test_wgmma_selection.prefill_scores_kernel
                            (lightllm's prefill scores, the test the fix added): BM = BN = D =
                            128, 8 warps, num_stages=1, n = 32768 keys; one program an SM, each
                            the same block (the test launches one; the same stores)
  fp8_cast                  46a7957 (s37 section 3): test_fp8.roundtrip_kernel (the round trip
                            the commit counted): fp32 -> e4m3 -> fp32, 64M elements, BLOCK
                            1024, 4 warps (not timed in any file)
  fp8_cast_f16              46a7957 / f99d9d2: test_fp8.widths_kernel from fp16 (cvt of f16
                            pairs: e4m3, back to fp16 and to bf16), 64M elements, BLOCK 1024
"""
import argparse
import math
import os
import sys
import traceback
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

TEST_PY = os.path.join(common.REPO, "test", "python")


class Case(types.SimpleNamespace):
    """name, commits, kernel (the ncu regex, without `regex:`), about, twin (a Triton twin
    exists), tol (the largest relative error that passes), cfg (default tiles), make(ctx,
    cfg) -> (call, rel_err): one launch, and the error of the output it wrote."""


CASES = {}


def case(name, commits, kernel, about, cfg, tol=1e-2, twin=True):
    def register(make):
        CASES[name] = Case(name=name, commits=commits, kernel=kernel, about=about, cfg=cfg,
                           tol=tol, twin=twin, make=make)
        return make
    return register


# ---------------------------------------------------------------- helpers

class Ctx:
    """What a case builds on: torch, the library ("kiln" or "triton"), the module of a source
    under it (src), its TensorDescriptor, the SM count."""

    def __init__(self, peer):
        import torch
        import kiln
        self.torch, self.peer, self.kiln = torch, peer, kiln
        common.setup_paths()
        if TEST_PY not in sys.path:
            sys.path.append(TEST_PY)
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count

        def alloc(size, align, stream):
            return torch.empty(size, dtype=torch.int8, device="cuda")
        kiln.set_allocator(alloc)  # scratch for descriptors made in kernels
        if peer == "triton":
            triton, why = common.triton_or_none()
            if triton is None:
                raise RuntimeError(f"--peer triton: Triton unavailable ({why})")
            triton.set_allocator(alloc)
            from triton.tools.tensor_descriptor import TensorDescriptor
            self.td = TensorDescriptor
        else:
            self.td = kiln.TensorDescriptor

    def src(self, module):
        """`module` (a Kiln source) under this run's library: itself, or its Triton twin."""
        return module if self.peer == "kiln" else common.twin(module)

    def randn(self, *shape, dtype=None):
        return self.torch.randn(*shape, device="cuda", dtype=dtype or self.torch.float16)


def relerr(out, ref):
    return common.relerr(out, ref)


def attention_inputs(ctx, B, H, S, D):
    ctx.torch.manual_seed(0)
    return tuple(ctx.randn(B, H, S, D) for _ in range(3))


def sdpa(ctx, q, k, v, causal):
    return ctx.torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def tutorial_forward(ctx, D, causal, cfg):
    """cliff_sources_attention.attn_fwd through cliffs_attention.fwd_launcher, 4x32x4096."""
    import cliff_sources_attention as src
    import cliffs_attention as ca
    torch = ctx.torch
    S = 4096
    q, k, v = attention_inputs(ctx, 4, 32, S, D)
    o = torch.full_like(q, float("nan"))
    m = torch.empty(4, 32, S, device="cuda", dtype=torch.float32)
    call = ca.fwd_launcher(ctx.src(src), q, k, v, o, m, causal, cfg)
    return call, lambda: relerr(o, sdpa(ctx, q, k, v, causal))


def library_forward(ctx, D, causal, **kw):
    """kiln_kernels.flash_attention.attention_forward (the twin's under Triton)."""
    from kiln_kernels import flash_attention as fa
    q, k, v = attention_inputs(ctx, 4, 32, 4096, D)
    o = ctx.torch.full_like(q, float("nan"))
    mod = ctx.src(fa)
    return (lambda: mod.attention_forward(q, k, v, o, causal=causal, **kw),
            lambda: relerr(o, sdpa(ctx, q, k, v, causal)))


def cpp_lib():
    """libkiln-cpp-kernels.so (common.cpp_kernels): its C++ DSL kernels compile at their first
    launch through libkiln, so the compiler's switches and cache apply to them too."""
    return common.cpp_kernels(os.environ.get("KILN_CPP_KERNELS", ""))


# ---------------------------------------------------------------- cases

@case("attn_fwd_desc_d128", "9902fd0", "^attn_fwd_desc$",
      "tutorial 06 forward, host descriptors, D128 4x32x4096", (128, 128, 8, 3))
def _attn_fwd_desc_d128(ctx, cfg):
    import cliff_sources_attention as src
    import cliffs_attention as ca
    torch = ctx.torch
    q, k, v = attention_inputs(ctx, 4, 32, 4096, 128)
    o = torch.full_like(q, float("nan"))
    m = torch.empty(4, 32, 4096, device="cuda", dtype=torch.float32)
    call = ca.fwd_desc_launcher(ctx.src(src), ctx.td, q, k, v, o, m, False, cfg)
    return call, lambda: relerr(o, sdpa(ctx, q, k, v, False))


@case("attn_fwd_ptr_d128", "f45bb96,9cafc52", "^attn_fwd$",
      "tutorial 06 pointer forward, D128 4x32x4096", (128, 128, 8, 3))
def _attn_fwd_ptr_d128(ctx, cfg):
    return tutorial_forward(ctx, 128, False, cfg)


@case("mm_ptr_4000", "4253b6e", "^mm_ptr$",
      "tutorial 03 pointer matmul (B K x N), fp16 4000^3", (128, 256, 64, 8, 4))
def _mm_ptr_4000(ctx, cfg):
    import bench_cliffs
    import cliff_sources as cs
    torch = ctx.torch
    M = N = K = 4000
    torch.manual_seed(0)
    a = ctx.randn(M, K)
    b = ctx.randn(N, K)
    b_kn = b.T.contiguous()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    lib = types.SimpleNamespace(TensorDescriptor=ctx.td)
    call = bench_cliffs.launcher("ptr", ctx.src(cs), lib, a, b, c, cfg, ctx.sms, b_kn)
    return call, lambda: relerr(c, a.float() @ b.float().T)


@case("mm_tutorial_4000", "4253b6e", "^matmul_kernel$",
      "tutorial matmul (bench_matmul.py pointer: kernel_sources.matmul_kernel), fp16 4000^3",
      (128, 256, 64, 8, 4))
def _mm_tutorial_4000(ctx, cfg):
    import bench_matmul
    import kernel_sources as ks
    torch = ctx.torch
    M = N = K = 4000
    torch.manual_seed(0)
    a = ctx.randn(M, K)
    b = ctx.randn(K, N)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    call = bench_matmul.ptr_launch(ctx.src(ks).matmul_kernel, a, b, c, cfg)
    return call, lambda: relerr(c, a.float() @ b.float())


@case("attn_fwd_fa2_causal_d128", "954fe88", "^attn_fwd_fa2$",
      "FlashAttention-2-style forward (pointers from start_n), causal, D128 4x32x4096",
      (128, 128, 8, 3))
def _attn_fwd_fa2_causal_d128(ctx, cfg):
    import cliff_sources_attention as src
    import cliffs_attention as ca
    q, k, v = attention_inputs(ctx, 4, 32, 4096, 128)
    o = ctx.torch.full_like(q, float("nan"))
    call = ca.fwd_fa2_launcher(ctx.src(src), q, k, v, o, True, cfg)
    return call, lambda: relerr(o, sdpa(ctx, q, k, v, True))


@case("cpp_matmul_4096", "f281b8d", "^matmul",
      "C++ DSL tutorial matmul (libkiln-cpp-kernels.so), fp16 4096^3", (128, 256, 64, 8, 4),
      twin=False)
def _cpp_matmul_4096(ctx, cfg):
    import bench_matmul
    torch = ctx.torch
    M = N = K = 4096
    torch.manual_seed(0)
    a = ctx.randn(M, K)
    b = ctx.randn(K, N)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    cpp = bench_matmul.load_cpp_matmul(os.environ.get("KILN_CPP_KERNELS", ""))
    stream = torch.cuda.current_stream().cuda_stream
    return lambda: cpp(a, b, c, cfg, stream), lambda: relerr(c, a.float() @ b.float())


def moe(ctx, cfg, mode):
    """bench_cliffs' moe section's first shape (8 experts, 8192 routed rows, N 2048, K 4096)
    and routing; mode "ptr" / "desc" (mm_moe's W_DESC) / "desc_all" (mm_moe_desc_all)."""
    import cliff_sources as cs
    torch = ctx.torch
    E, TOPK, N, K = 8, 2, 2048, 4096
    T = 4096 * TOPK
    torch.manual_seed(0)
    m_sizes = torch.bincount(torch.randint(0, E, (T,)), minlength=E).to(torch.int32).cuda()
    x = ctx.randn(T, K)
    w = ctx.randn(E, N, K) * 0.05
    y = torch.full((T, N), float("nan"), device="cuda", dtype=torch.float16)
    BM, BN, BK, warps, stages = cfg
    mod = ctx.src(cs)
    meta = dict(N=N, K=K, NUM_SMS=ctx.sms, BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK,
                num_warps=warps, num_stages=stages)
    if mode == "desc_all":
        def call():
            mod.mm_moe_desc_all[(ctx.sms,)](x, w, y, m_sizes, E, T // TOPK, TOPK=TOPK, **meta)
    else:
        def call():
            mod.mm_moe[(ctx.sms,)](x, w, y, m_sizes, E, W_DESC=mode == "desc", **meta)

    def err():
        bounds = [0] + torch.cumsum(m_sizes, 0).tolist()
        ref = torch.cat([x[bounds[e]:bounds[e + 1]].float() @ w[e].float().T
                         for e in range(E)])
        return relerr(y, ref)
    return call, err


MOE_CFG = (128, 256, 64, 8, 3)


@case("moe_ptr", "bfa97fe,cab74af", "^mm_moe$",
      "MoE expert GEMMs (bench_cliffs mm_moe), X and W by pointers, fp16 8x8192x2048x4096",
      MOE_CFG)
def _moe_ptr(ctx, cfg):
    return moe(ctx, cfg, "ptr")


@case("moe_desc", "16f9117,13eaac3", "^mm_moe$",
      "mm_moe with W through a 3-D device descriptor, fp16 8x8192x2048x4096", MOE_CFG)
def _moe_desc(ctx, cfg):
    return moe(ctx, cfg, "desc")


@case("moe_desc_all", "2302926", "^mm_moe_desc_all$",
      "MoE expert GEMMs, X (NUM_TOKENS * TOPK rows), W, Y by device descriptors", MOE_CFG)
def _moe_desc_all(ctx, cfg):
    return moe(ctx, cfg, "desc_all")


@case("attn_fwd_d64", "6b72ab9", "^attn_fwd$", "tutorial 06 pointer forward, D64 4x32x4096",
      (128, 64, 8, 3))
def _attn_fwd_d64(ctx, cfg):
    return tutorial_forward(ctx, 64, False, cfg)


@case("attn_fwd_causal_d64", "a140cd9", "^attn_fwd$",
      "tutorial 06 pointer forward, causal, D64 4x32x4096", (128, 64, 8, 3))
def _attn_fwd_causal_d64(ctx, cfg):
    return tutorial_forward(ctx, 64, True, cfg)


def tutorial_backward(ctx, D, causal, cfg, fwd_cfg=(128, 64, 8, 3)):
    """cliff_sources_attention's preprocess and attn_bwd (cliffs_attention.bwd_launcher) on
    the O and M of the same library's attn_fwd; error: the largest of dQ's, dK's, dV's."""
    import cliff_sources_attention as src
    import cliffs_attention as ca
    torch = ctx.torch
    B, H, S = 4, 32, 4096
    q, k, v = attention_inputs(ctx, B, H, S, D)
    do = ctx.randn(B, H, S, D)
    mod = ctx.src(src)
    o = torch.empty_like(q)
    m = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    ca.fwd_launcher(mod, q, k, v, o, m, causal, fwd_cfg)()
    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    delta = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    call = ca.bwd_launcher(mod, q, k, v, o, m, do, dq, dk, dv, delta, causal, cfg)

    def err():
        qr, kr, vr = (x.detach().clone().requires_grad_() for x in (q, k, v))
        ref = torch.autograd.grad(sdpa(ctx, qr, kr, vr, causal), (qr, kr, vr), do)
        return max(relerr(g, r) for g, r in zip((dq, dk, dv), ref))
    return call, err


@case("attn_bwd_d64", "1a378ab,cab74af", "^attn_bwd$",
      "tutorial 06 backward, D64 4x32x4096", (32, 128, 128, 32, 4, 5))
def _attn_bwd_d64(ctx, cfg):
    return tutorial_backward(ctx, 64, False, cfg)


@case("attn_bwd_d64_causal", "1a378ab,cab74af", "^attn_bwd$",
      "tutorial 06 backward, causal, D64 4x32x4096", (32, 128, 128, 32, 4, 5))
def _attn_bwd_d64_causal(ctx, cfg):
    return tutorial_backward(ctx, 64, True, cfg)


def library_tiles(cfg):
    bm, bn, nw, ns = cfg
    return dict(block_m=bm, block_n=bn, num_warps=nw, num_stages=ns)


@case("fa3_d128", "c68ee38", "^_attn_fwd_desc$",
      "kiln_kernels forward, FlashAttention-3 order (warp-specialized), D128 4x32x4096",
      (128, 128, 8, 3))
def _fa3_d128(ctx, cfg):
    return library_forward(ctx, 128, False, overlap="fa3", descriptors=True,
                           **library_tiles(cfg))


@case("fa3_cpp_d128", "c68ee38", "^attention_fa3",
      "C++ DSL attentionFa3 (libkiln-cpp-kernels.so), D128 4x32x4096", (128, 128, 8, 3),
      twin=False)
def _fa3_cpp_d128(ctx, cfg):
    torch = ctx.torch
    B, H, S, D = 4, 32, 4096, 128
    q, k, v = attention_inputs(ctx, B, H, S, D)
    o = torch.full_like(q, float("nan"))
    import bench_cpp_attention
    lib = cpp_lib()
    f = bench_cpp_attention.bind_attention(lib)[1]
    stream = torch.cuda.current_stream().cuda_stream
    bm, bn, nw, ns = cfg

    def call():
        lib.call(f, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), B, H, S, D,
                 1.0 / math.sqrt(D), stream, bm, bn, nw, ns)
    return call, lambda: relerr(o, sdpa(ctx, q, k, v, False))


@case("group_norm_bwd", "c8ef194", "^group_norm_bwd$",
      "Liger-style group-norm backward (cliffs_norms), bf16 16x512x32x4096", (4096, 16))
def _group_norm_bwd(ctx, cfg):
    import cliffs_norms as cn
    import cliff_sources_norms as ks
    t, ref = cn.make_inputs(ctx.torch, "group_norm_bwd", (16, 512, 32, 64 * 64), "cuda")
    out = cn.new_outputs(ctx.torch, "group_norm_bwd", t)
    call = cn.launch(ctx.src(ks), "group_norm_bwd", t, out, cfg, ctx.sms)
    return call, lambda: cn.error(common, out, ref)


@case("attn_fwd_peel", "a62fad2", "^_attn_fwd$",
      "kiln_kernels pointer forward, rotated loop (not warp-specialized), D128 4x32x4096",
      (128, 128, 8, 3))
def _attn_fwd_peel(ctx, cfg):
    return library_forward(ctx, 128, False, descriptors=False, **library_tiles(cfg))


@case("fa3_d64", "5377df6", "^_attn_fwd_desc$",
      "kiln_kernels forward, FlashAttention-3 order (warp-specialized), D64 4x32x4096",
      (128, 64, 8, 3))
def _fa3_d64(ctx, cfg):
    return library_forward(ctx, 64, False, overlap="fa3", descriptors=True,
                           **library_tiles(cfg))


@case("dd_int8_4096", "dc63c1a", "^device_8bit_kernel$",
      "int8 matmul through descriptors made in the kernel (B N x K), 4096^3",
      (128, 256, 128, 8, 3), tol=0.0)
def _dd_int8_4096(ctx, cfg):
    import test_descriptors_8bit as t8
    torch = ctx.torch
    M = N = K = 4096
    BM, BN, BK, warps, stages = cfg
    torch.manual_seed(0)
    a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)  # N x K
    c = torch.full((M, N), -1, device="cuda", dtype=torch.int32)
    mod = ctx.src(t8)
    grid = (math.ceil(M / BM), math.ceil(N / BN))

    def call():
        mod.device_8bit_kernel[grid](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, B_NK=True,
                                     ACC=mod.tl.int32, num_warps=warps, num_stages=stages)
    return call, lambda: relerr(c, a.double() @ b.double().T)


@case("dot_128_ns1", "056b1bb", "^prefill_scores_kernel$",
      "lightllm prefill scores: 128x128x128 fp16 dot at num_stages=1 (one program an SM)",
      (128, 128, 128, 8, 1))
def _dot_128_ns1(ctx, cfg):
    import test_wgmma_selection as tw
    torch = ctx.torch
    BM, BN, D, warps, stages = cfg
    n = 32768
    torch.manual_seed(0)
    q = ctx.randn(BM, D)
    k = ctx.randn(n, D)
    out = torch.full((BM, BN), float("nan"), device="cuda", dtype=torch.float32)
    mod = ctx.src(tw)

    def call():
        mod.prefill_scores_kernel[(ctx.sms,)](q, k, out, n, BM=BM, BN=BN, D=D,
                                              num_warps=warps, num_stages=stages)

    def err():  # the sum over key blocks of q @ k_block^T
        ksum = k.double().view(n // BN, BN, D).sum(0)
        return relerr(out, q.double() @ ksum.T)
    return call, err


FP8_N = 1 << 26


@case("fp8_cast", "46a7957", "^roundtrip_kernel$",
      "fp32 -> fp8 e4m3 -> fp32 round trip, 64M elements", (1024, 4), tol=0.0)
def _fp8_cast(ctx, cfg):
    import test_fp8
    torch = ctx.torch
    block, warps = cfg
    torch.manual_seed(0)
    x = ctx.randn(FP8_N, dtype=torch.float32) * 3
    q = torch.zeros(FP8_N, device="cuda", dtype=torch.float8_e4m3fn)
    y = torch.full((FP8_N,), float("nan"), device="cuda", dtype=torch.float32)
    mod = ctx.src(test_fp8)

    def call():
        mod.roundtrip_kernel[(math.ceil(FP8_N / block),)](x, q, y, FP8_N, FMT=mod.tl.float8e4nv,
                                                          BLOCK=block, num_warps=warps)

    def err():
        want = x.to(torch.float8_e4m3fn)
        if not torch.equal(q.view(torch.uint8), want.view(torch.uint8)):
            return math.inf  # not bit for bit torch's codes
        return relerr(y, want.float())
    return call, err


@case("fp8_cast_f16", "46a7957,f99d9d2", "^widths_kernel$",
      "fp16 -> fp8 e4m3 -> fp16 and bf16 (cvt of f16 pairs), 64M elements", (1024, 4),
      tol=0.0)
def _fp8_cast_f16(ctx, cfg):
    import test_fp8
    torch = ctx.torch
    block, warps = cfg
    torch.manual_seed(0)
    x = ctx.randn(FP8_N) * 3
    q = torch.zeros(FP8_N, device="cuda", dtype=torch.float8_e4m3fn)
    y = torch.full((FP8_N,), float("nan"), device="cuda", dtype=torch.float16)
    z = torch.full((FP8_N,), float("nan"), device="cuda", dtype=torch.bfloat16)
    mod = ctx.src(test_fp8)

    def call():
        mod.widths_kernel[(math.ceil(FP8_N / block),)](x, q, y, z, FP8_N,
                                                       FMT=mod.tl.float8e4nv, BLOCK=block,
                                                       num_warps=warps)

    def err():
        want = x.to(torch.float8_e4m3fn)
        if not torch.equal(q.view(torch.uint8), want.view(torch.uint8)):
            return math.inf
        return max(relerr(y, want.to(torch.float16)), relerr(z, want.to(torch.bfloat16)))
    return call, err


# ---------------------------------------------------------------- main

def list_cases(out=sys.stdout):
    """One line a case: name, the ncu kernel filter, fix commits, what runs (tab-separated)."""
    for c in CASES.values():
        print(f"{c.name}\tregex:{c.kernel}\t{c.commits}\t{c.about} "
              f"[{common.fmt_config(c.cfg)}]{'' if c.twin else ' (no Triton twin)'}",
              file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", nargs="?", help="a case of --list")
    ap.add_argument("--list", action="store_true", help="the cases and their kernel regexes")
    ap.add_argument("--peer", choices=("kiln", "triton"), default="kiln",
                    help="triton: the Triton twin on the same source (default: Kiln)")
    ap.add_argument("--calls", type=int, default=3, help="launches before the check (3)")
    ap.add_argument("--config", default=None,
                    help="the case's tiles, x-separated, in its own order (see --list)")
    args = ap.parse_args(argv)
    if args.list:
        list_cases()
        return 0
    if args.case not in CASES:
        ap.error(f"expected a case of --list, found {args.case!r}")
    c = CASES[args.case]
    if args.peer == "triton" and not c.twin:
        print(f"{c.name}: no Triton twin (a C++ DSL kernel)", file=sys.stderr)
        return 2
    cfg = c.cfg
    if args.config:
        cfg = tuple(int(v) for v in args.config.split("x"))
        if len(cfg) != len(c.cfg):
            ap.error(f"{c.name}: --config takes {len(c.cfg)} fields "
                     f"({common.fmt_config(c.cfg)}), found {args.config!r}")
    try:
        ctx = Ctx(args.peer)
        call, err = c.make(ctx, cfg)
        for _ in range(args.calls):
            call()
        ctx.torch.cuda.synchronize()
        e = err()
    except Exception:
        traceback.print_exc()
        print(f"{c.name}: could not run under {args.peer}", file=sys.stderr)
        return 2
    print(f"{c.name} rel err {e:.3e}", flush=True)
    return 0 if e <= c.tol else 1


if __name__ == "__main__":
    sys.exit(main())
