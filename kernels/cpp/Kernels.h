//===- Kernels.h - Kiln's C++ kernel library ----------------------*- C++ -*-===//
//
// This file declares the kernels of kernels/ written in the C++ DSL (kiln::lang): vector add,
// elementwise KL divergence, a masked 2-D strided copy, Triton's tutorial matmul and attention
// forwards in FlashAttention-2's and FlashAttention-3's orders. Each comes as
// the kernel object (to trace, compile or launch with any specialization) and as a launcher with
// the usual grid.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KERNELS_CPP_KERNELS_H
#define KILN_KERNELS_CPP_KERNELS_H

#include "kiln/kiln.h"

namespace kiln::kernels {

using lang::Const;
using lang::f16;
using lang::f32;
using lang::I32;
using lang::Ptr;

/// out[i] = x[i] + y[i] for i < n; BLOCK elements per program.
using VectorAddKernel =
    lang::Kernel<void(Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n, Const<int> BLOCK)>;
const VectorAddKernel &vectorAddKernel();
/// Launches vector add over n elements on `stream`.
void vectorAdd(rt::CUstream stream, rt::CUdeviceptr x, rt::CUdeviceptr y, rt::CUdeviceptr out,
               int32_t n, int block = 1024);

/// out[i] = p[i] * (log p[i] - log q[i]) for i < n; BLOCK elements per program.
using KLDivKernel =
    lang::Kernel<void(Ptr<f32> p, Ptr<f32> q, Ptr<f32> out, I32 n, Const<int> BLOCK)>;
const KLDivKernel &klDivKernel();
void klDiv(rt::CUstream stream, rt::CUdeviceptr p, rt::CUdeviceptr q, rt::CUdeviceptr out,
           int32_t n, int block = 1024);

/// dst[r * dst_stride + c] = src[r * src_stride + c] for r < M, c < N (an M x N fp32 matrix
/// with row strides in elements); a BLOCK_M x BLOCK_N tile per program.
using Copy2DKernel = lang::Kernel<void(Ptr<f32> src, Ptr<f32> dst, I32 M, I32 N, I32 src_stride,
                                       I32 dst_stride, Const<int> BLOCK_M, Const<int> BLOCK_N)>;
const Copy2DKernel &copy2DKernel();
void copy2D(rt::CUstream stream, rt::CUdeviceptr src, rt::CUdeviceptr dst, int32_t M, int32_t N,
            int32_t srcStride, int32_t dstStride, int blockM = 32, int blockN = 64);

/// c = a @ b for row-major fp16 a (M x K), b (K x N) and c (M x N), as Triton's tutorial 03
/// writes it (pointer tiles, grouped order, masked K edge; fp32 accumulation); one BLOCK_M x
/// BLOCK_N tile of c per program. Strides in elements.
using MatmulKernel = lang::Kernel<void(Ptr<f16> a, Ptr<f16> b, Ptr<f16> c, I32 M, I32 N, I32 K,
                                       I32 stride_am, I32 stride_ak, I32 stride_bk, I32 stride_bn,
                                       I32 stride_cm, I32 stride_cn, Const<int> BLOCK_M,
                                       Const<int> BLOCK_N, Const<int> BLOCK_K, Const<int> GROUP_M)>;
const MatmulKernel &matmulKernel();
/// Tiles, warps and ring stages of a matmul launch (defaults: the tutorial's fp16 H100 pick).
struct MatmulConfig {
  int blockM = 128, blockN = 256, blockK = 64, groupM = 8;
  unsigned warps = 8, stages = 3;
};
/// Launches c = a @ b on contiguous row-major matrices.
void matmul(rt::CUstream stream, rt::CUdeviceptr a, rt::CUdeviceptr b, rt::CUdeviceptr c, int32_t M,
            int32_t N, int32_t K, const MatmulConfig &cfg = {});

/// Non-causal attention of (B, H, N_CTX, HEAD_DIM) fp16 tensors sharing their strides (the
/// head dimension contiguous), FlashAttention-2's Triton style; N_CTX a multiple of BLOCK_M
/// and BLOCK_N. WS: the key loop is for_range_ws (a producer warpgroup on sm_90a).
using Fa2AttentionKernel =
    lang::Kernel<void(Ptr<f16> Q, Ptr<f16> K, Ptr<f16> V, Ptr<f16> Out, lang::F32 sm_scale,
                      I32 stride_z, I32 stride_h, I32 stride_n, I32 H, I32 N_CTX,
                      Const<int> HEAD_DIM, Const<int> BLOCK_M, Const<int> BLOCK_N, Const<bool> WS)>;
const Fa2AttentionKernel &attentionFa2Kernel();
/// Launches it on contiguous (B, H, S, D) q, k, v and out.
void attentionFa2(rt::CUstream stream, rt::CUdeviceptr q, rt::CUdeviceptr k, rt::CUdeviceptr v,
                  rt::CUdeviceptr out, int32_t B, int32_t H, int32_t S, int32_t D, float smScale,
                  bool warpSpecialize, int blockM = 128, int blockN = 64, unsigned warps = 8,
                  unsigned stages = 3);

/// Non-causal attention of contiguous (B, H, N_CTX, HEAD_DIM) fp16 tensors in
/// FlashAttention-3's order, as kiln_kernels.flash_attention's default at D = 128 on sm_90a
/// (its descriptor path): descriptors made in the kernel over the (ROWS = B * H * N_CTX,
/// HEAD_DIM) views (the TMA copies their blocks on sm_90a); iteration j issues q @ k_j and
/// p_(j-1) @ v_(j-1) together and runs the softmax of block j beside the second; the loop
/// (step 1 over N_CTX / BLOCK_N + 1 iterations) is for_range_ws, so on sm_90a a producer
/// warpgroup issues the copies, the two consumer warpgroups take turns at the tensor cores,
/// and the compiler peels the first iteration's p @ v of zeros and the last one's unread
/// q @ k. N_CTX a multiple of BLOCK_M and BLOCK_N; 16-byte-aligned tensors. On the H100
/// (session 33) it first ran 0.70x the Python door's kernel: ptxas serialized its wgmmas
/// (C7515) over a wait the peel left on a constant; without that wait (c68ee38) ptxas keeps
/// them asynchronous (test/kilnc/wgmma-not-serialized.test), not yet timed on a GPU.
using Fa3AttentionKernel = lang::Kernel<void(
    Ptr<f16> Q, Ptr<f16> K, Ptr<f16> V, Ptr<f16> Out, lang::F32 sm_scale, I32 ROWS, I32 N_CTX,
    Const<int> HEAD_DIM, Const<int> BLOCK_M, Const<int> BLOCK_N)>;
const Fa3AttentionKernel &attentionFa3Kernel();
/// Launches it on contiguous (B, H, S, D) q, k, v and out (128x128 tiles, 8 warps, 3 stages:
/// the library's at D = 128).
void attentionFa3(rt::CUstream stream, rt::CUdeviceptr q, rt::CUdeviceptr k, rt::CUdeviceptr v,
                  rt::CUdeviceptr out, int32_t B, int32_t H, int32_t S, int32_t D, float smScale,
                  int blockM = 128, int blockN = 128, unsigned warps = 8, unsigned stages = 3);

} // namespace kiln::kernels

#endif // KILN_KERNELS_CPP_KERNELS_H
