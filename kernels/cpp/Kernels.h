//===- Kernels.h - Kiln's C++ kernel library ----------------------*- C++ -*-===//
//
// This file declares the kernels of kernels/ written in the C++ DSL (kiln::lang): vector add,
// elementwise KL divergence and a masked 2-D strided copy. Each comes as the kernel object (to
// trace, compile or launch with any specialization) and as a launcher with the usual grid.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KERNELS_CPP_KERNELS_H
#define KILN_KERNELS_CPP_KERNELS_H

#include "kiln/kiln.h"

namespace kiln::kernels {

using lang::Const;
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

} // namespace kiln::kernels

#endif // KILN_KERNELS_CPP_KERNELS_H
