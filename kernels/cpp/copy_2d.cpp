//===- copy_2d.cpp - Masked 2-D strided copy in the C++ DSL ---------------===//
//
// This file implements kernels/copy_2d.mlir in kiln::lang: a BLOCK_M x BLOCK_N tile per
// program, rows[:, None] and cols[None, :] broadcast into the tile's offsets and mask.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

using namespace kiln::lang;

const kiln::kernels::Copy2DKernel &kiln::kernels::copy2DKernel() {
  static const Copy2DKernel kernel =
      kiln::kernel("copy_2d", [](Ptr<f32> src, Ptr<f32> dst, I32 M, I32 N, I32 src_stride,
                                 I32 dst_stride, Const<int> BLOCK_M, Const<int> BLOCK_N) {
        auto rows = (program_id(0) * BLOCK_M + arange(0, BLOCK_M))[{Slice_, None_}];
        auto cols = (program_id(1) * BLOCK_N + arange(0, BLOCK_N))[{None_, Slice_}];
        auto mask = (rows < M) & (cols < N);
        auto tile = load(src + (rows * src_stride + cols), mask);
        store(dst + (rows * dst_stride + cols), tile, mask);
      });
  return kernel;
}

void kiln::kernels::copy2D(rt::CUstream stream, rt::CUdeviceptr src, rt::CUdeviceptr dst, int32_t M,
                           int32_t N, int32_t srcStride, int32_t dstStride, int blockM,
                           int blockN) {
  copy2DKernel()(grid(cdiv(M, blockM), cdiv(N, blockN)), stream, src, dst, M, N, srcStride,
                 dstStride, blockM, blockN);
}
