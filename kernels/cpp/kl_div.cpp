//===- kl_div.cpp - Elementwise KL divergence in the C++ DSL --------------===//
//
// This file implements kernels/kl_div.mlir in kiln::lang: out[i] = p[i] * (log p[i] - log q[i]).
// Masked lanes load 1.0 so that their logarithms stay finite.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

using namespace kiln::lang;

const kiln::kernels::KLDivKernel &kiln::kernels::klDivKernel() {
  static const KLDivKernel kernel =
      kiln::kernel("kl_div", [](Ptr<f32> p, Ptr<f32> q, Ptr<f32> out, I32 n, Const<int> BLOCK) {
        auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
        auto mask = offs < n;
        auto pv = load(p + offs, mask, 1.0);
        auto qv = load(q + offs, mask, 1.0);
        store(out + offs, pv * (log(pv) - log(qv)), mask);
      });
  return kernel;
}

void kiln::kernels::klDiv(rt::CUstream stream, rt::CUdeviceptr p, rt::CUdeviceptr q,
                          rt::CUdeviceptr out, int32_t n, int block) {
  klDivKernel()(grid(cdiv(n, block)), stream, p, q, out, n, block);
}
