"""Triton kernels with no Kiln Python source to take a twin of (bench/common.py builds
every other Triton peer from the Kiln source: the same text under Triton; the tutorial-style
attention of bench_attention.py's `triton_tutorial` column is bench/cliff_sources_attention.py's
twin).

  KL divergence and one-row softmax (bench_peers.py): the Triton side of kiln-bench's
  kernels, which are MLIR (kernels/*.mlir), not Python, so there is no Kiln Python source to
  take a twin of; the softmax is the one-row formulation of ANCHORS.md's runs (fp32, no
  int64 row offset, no log variant).

Imported once Triton is known to be there.
"""
import triton
import triton.language as tl


# ====================================================================== KL divergence, softmax


@triton.jit
def kl_kernel(p_ptr, q_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=1.0)
    q = tl.load(q_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + offs, p * (tl.log(p) - tl.log(q)), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)
