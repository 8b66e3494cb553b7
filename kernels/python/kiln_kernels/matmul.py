"""Matmul C = act(A @ B + bias) for fp16/bf16 and fp8 (e4m3fn, e5m2), fp32 accumulation, with
an optional fused epilogue: a bias per output column and an activation ("relu", "gelu" (tanh
form), "silu").

Two kernels of Triton's tutorial structure (grouped program order, GROUP_M row blocks share
their B columns in L2):
  - `matmul_tma_kernel` reads A and B through tensor descriptors and stores C through one: on
    sm_90a the TMA copies the operand blocks into the multi-stage rings wgmma reads and
    stores C from shared memory; elsewhere (sm_80, the CPU) the same accesses lower to masked
    loads and stores. The descriptors' rules: a contiguous last dimension, row strides of a
    multiple of 16 bytes, 16-byte aligned bases.
  - `matmul_kernel` takes pointers and strides (any layout, K masked), for inputs the
    descriptors do not take (rows not a multiple of 8 elements, transposed views).
fp8 operands take `matmul_kernel` (tensor descriptors take 16-bit operands only) with
BLOCK_K = 128: on sm_90a, wgmma m64nNk32 with both operands K-major in their rings (a
row-major B is transposed on its way there, a column-major B, `b.t()` of a contiguous [N, K],
is copied as it is and is the fast case).
`matmul(a, b, bias=None, activation=None, out=None, out_dtype=None)` picks the kernel and
the tiles.
"""
import kiln
import kiln.language as tl

from ._utils import torch

ACTIVATIONS = (None, "relu", "gelu", "silu")
# The fp8 dtypes this torch has (matmul takes them as operands).
FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2")
                   if torch is not None and hasattr(torch, n))


@kiln.jit
def _epilogue(acc, bias_ptr, off_n, N, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
              BLOCK_N: tl.constexpr):
    if HAS_BIAS:
        cols = off_n + tl.arange(0, BLOCK_N)
        bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "gelu":
        # tanh form: x * sigmoid(2 * sqrt(2 / pi) * (x + 0.044715 x^3))
        acc = acc / (1.0 + tl.exp(-1.5957691216057308 * (acc + 0.044715 * acc * acc * acc)))
    elif ACTIVATION == "silu":
        acc = acc / (1.0 + tl.exp(-acc))
    return acc


@kiln.jit
def _tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    return pid_m * BLOCK_M, pid_n * BLOCK_N


@kiln.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, bias_ptr, M, N, K, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    off_m, off_n = _tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    acc = _epilogue(acc, bias_ptr, off_n, N, HAS_BIAS, ACTIVATION, BLOCK_N)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@kiln.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                  stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    off_m, off_n = _tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = off_m + tl.arange(0, BLOCK_M)
    rn = off_n + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = _epilogue(acc, bias_ptr, off_n, N, HAS_BIAS, ACTIVATION, BLOCK_N)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def config_for(M, N, K, fp8=False):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): 128 x 256 tiles on 8 warps (two
    warpgroups of m64n256 wgmmas) with 4 stages where that still gives every SM of an H100
    a tile; 128 x 128 on 4 warps below that. fp8: BLOCK_K 128 (128 x 256 x 128 on 8 warps
    with 3 stages was Kiln's fastest in bench/bench_matmul.py fp8; 128 x 128 x 128 on 8
    warps with 4 stages below that)."""
    if fp8:
        return (128, 256, 128, 8, 3) if M * N >= 132 * 128 * 256 else (128, 128, 128, 8, 4)
    if M * N >= 132 * 128 * 256:
        return 128, 256, 64, 8, 4
    return 128, 128, 64, 4, 4


def _takes_descriptor(t):
    """Whether a 2-D tensor meets the tensor descriptor rules (TMA's)."""
    es = t.element_size()
    return (t.stride(1) == 1 and (t.stride(0) * es) % 16 == 0 and t.data_ptr() % 16 == 0
            and t.size(0) > 0)


def matmul(a, b, bias=None, activation=None, out=None, out_dtype=None):
    """act(a @ b + bias): `a` [M, K] and `b` [K, N] of one dtype, fp16, bf16, float8_e4m3fn or
    float8_e5m2, `bias` [N] (any float dtype), `activation` one of None, "relu", "gelu" (tanh
    form), "silu". Returns (or writes into `out`) an [M, N] tensor of `out_dtype` (fp16, bf16
    or fp32; default: the inputs' dtype, fp16 for fp8 inputs)."""
    if torch is None:
        raise RuntimeError("kiln_kernels.matmul needs torch")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"matmul: expected 2-D a and b, found {a.dim()}-D and {b.dim()}-D")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: expected a [M, K] and b [K, N], found {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16) + FP8_DTYPES:
        raise TypeError(f"matmul: expected a and b both float16, both bfloat16, both "
                        f"float8_e4m3fn or both float8_e5m2, found {a.dtype} and {b.dtype}")
    fp8 = a.dtype in FP8_DTYPES
    if out_dtype is None:
        out_dtype = out.dtype if out is not None else torch.float16 if fp8 else a.dtype
    if out_dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"matmul: expected out_dtype float16, bfloat16 or float32, found "
                        f"{out_dtype}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"matmul: expected activation in {ACTIVATIONS}, found {activation!r}")
    M, K = a.shape
    N = b.shape[1]
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != N):
        raise ValueError(f"matmul: expected a bias of shape [{N}], found {tuple(bias.shape)}")
    c = out if out is not None else torch.empty((M, N), dtype=out_dtype, device=a.device)
    if tuple(c.shape) != (M, N) or c.dtype != out_dtype:
        raise ValueError(f"matmul: expected out [{M}, {N}] {out_dtype}, found "
                         f"{tuple(c.shape)} {c.dtype}")
    if M == 0 or N == 0:
        return c
    bm, bn, bk, warps, stages = config_for(M, N, K, fp8)
    grid = (kiln.cdiv(M, bm) * kiln.cdiv(N, bn),)
    has_bias = bias is not None
    bias_arg = bias if has_bias else c  # never read without HAS_BIAS
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, HAS_BIAS=has_bias,
                ACTIVATION=activation or "", num_warps=warps, num_stages=stages)
    if K > 0 and not fp8 and all(_takes_descriptor(t) for t in (a, b, c)):
        desc = kiln.TensorDescriptor.from_tensor
        matmul_tma_kernel[grid](desc(a, [bm, bk]), desc(b, [bk, bn]), desc(c, [bm, bn]),
                                bias_arg, M, N, K, **meta)
    else:
        matmul_kernel[grid](a, b, c, bias_arg, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                            b.stride(1), c.stride(0), c.stride(1), **meta)
    return c
