//===- vector_add.cpp - Vector add in the C++ DSL -------------------------===//
//
// This file implements kernels/vector_add.mlir in kiln::lang: out[i] = x[i] + y[i].
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

using namespace kiln::lang;

const kiln::kernels::VectorAddKernel &kiln::kernels::vectorAddKernel() {
  static const VectorAddKernel kernel =
      kiln::kernel("vector_add", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n, Const<int> BLOCK) {
        auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
        auto mask = offs < n;
        store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
      });
  return kernel;
}

void kiln::kernels::vectorAdd(rt::CUstream stream, rt::CUdeviceptr x, rt::CUdeviceptr y,
                              rt::CUdeviceptr out, int32_t n, int block) {
  vectorAddKernel()(grid(cdiv(n, block)), stream, x, y, out, n, block);
}
