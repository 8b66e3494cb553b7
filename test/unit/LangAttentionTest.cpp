//===- LangAttentionTest.cpp - A FlashAttention-2 loop in the C++ DSL -----===//
//
// This file tests the C++ door on an attention forward written as FlashAttention-2's Triton
// style writes it (K and V tiles by pointers computed from the loop's start_n, the online
// softmax): on sm_90a the compiler copies K and V with the TMA (attention tiles, as from
// Python), and `for_range_ws` (tl.range(..., warp_specialize=True)) gives the loop a producer
// warpgroup. GPU_* run it against a double-precision reference and skip without a GPU.
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include "Kernels.h"
#include "LangTestSupport.h"
#include "examples/MatmulCheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace kiln::lang;

namespace {

using kiln::test::contains;
using kiln::test::kAligned;

Compiled compileAttention(const Target &target, bool ws) {
  // (4, 32, 4096, 128) contiguous: strides 32 * 4096 * 128, 4096 * 128, 128.
  return kiln::kernels::attentionFa2Kernel().compile(target, kAligned, kAligned, kAligned, kAligned,
                                                     0.088f, 32 * 4096 * 128, 4096 * 128, 128, 32,
                                                     4096, 128, 128, 128, ws);
}

} // namespace

TEST(LangAttention, KAndVThroughTheTMAOnSm90a) {
  Compiled c = compileAttention(Target{"sm_90a", 8, 3, 0, /*tma_pointer_tiles=*/true}, false);
  EXPECT_EQ(c.tensor_maps.size(), 2u) << c.mlir; // K and V
  EXPECT_TRUE(contains(c.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global")) << c.ptx;
  Compiled p = compileAttention(Target{"sm_90a", 8, 3, 0, false}, false);
  EXPECT_TRUE(p.tensor_maps.empty());
  EXPECT_FALSE(contains(p.ptx, "cp.async.bulk.tensor")) << p.ptx;
}

TEST(LangAttention, ForRangeWsMarksTheLoop) {
  std::string text = kiln::kernels::attentionFa2Kernel().mlir(
      kAligned, kAligned, kAligned, kAligned, 0.088f, 32 * 4096 * 128, 4096 * 128, 128, 32, 4096,
      128, 128, 128, true);
  EXPECT_TRUE(contains(text, "kiln.warp_specialize")) << text;
  EXPECT_FALSE(contains(kiln::kernels::attentionFa2Kernel().mlir(
                            kAligned, kAligned, kAligned, kAligned, 0.088f, 32 * 4096 * 128,
                            4096 * 128, 128, 32, 4096, 128, 128, 128, false),
                        "kiln.warp_specialize"));
  // On sm_90a with the TMA rings: a producer warpgroup (setmaxnreg) beside the 8 warps.
  Compiled c = compileAttention(Target{"sm_90a", 8, 3, 0, true}, true);
  EXPECT_TRUE(contains(c.ptx, "setmaxnreg.dec.sync.aligned.u32")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "setmaxnreg.inc.sync.aligned.u32")) << c.ptx;
  // Without TMA rings (plain sm_90) the mark is only a hint.
  Compiled plain = compileAttention(Target{"sm_90", 8, 3, 0, true}, true);
  EXPECT_FALSE(contains(plain.ptx, "setmaxnreg")) << plain.ptx;
}

TEST(LangAttention, GPU_Fa2LoopMatchesReference) {
  if (!kiln::rt::hasGPU())
    GTEST_SKIP() << "no GPU";
  using kiln::examples::fromHalf;
  using kiln::examples::toHalf;
  const int B = 1, H = 2, S = 512, D = 64;
  const size_t n = size_t(B) * H * S * D;
  std::vector<uint16_t> q(n), k(n), v(n), out(n, 0x7e00);
  std::vector<float> qf(n), kf(n), vf(n);
  for (size_t i = 0; i < n; ++i) {
    q[i] = toHalf(qf[i] = float(int(i * 7 % 17) - 8) / 16.0f);
    k[i] = toHalf(kf[i] = float(int(i * 5 % 13) - 6) / 16.0f);
    v[i] = toHalf(vf[i] = float(int(i * 3 % 11) - 5) / 8.0f);
  }
  const float scale = 0.125f;
  // Reference in double: softmax(q k^T * scale) v per head.
  std::vector<double> ref(n);
  for (int h = 0; h < B * H; ++h)
    for (int i = 0; i < S; ++i) {
      std::vector<double> s(S);
      double mx = -1e300, l = 0;
      for (int j = 0; j < S; ++j) {
        double dotv = 0;
        for (int d = 0; d < D; ++d)
          dotv += double(qf[(size_t(h) * S + i) * D + d]) * kf[(size_t(h) * S + j) * D + d];
        s[j] = dotv * scale;
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j < S; ++j)
        l += (s[j] = std::exp(s[j] - mx));
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int j = 0; j < S; ++j)
          o += s[j] * vf[(size_t(h) * S + j) * D + d];
        ref[(size_t(h) * S + i) * D + d] = o / l;
      }
    }
  for (bool ws : {false, true}) {
    kiln::rt::DeviceBuffer dq(n * 2), dk(n * 2), dv(n * 2), dout(n * 2);
    dq.copyFromHost(q.data(), n * 2);
    dk.copyFromHost(k.data(), n * 2);
    dv.copyFromHost(v.data(), n * 2);
    dout.copyFromHost(out.data(), n * 2);
    kiln::kernels::attentionFa2Kernel()(grid(S / 128, B * H).num_warps(8).num_stages(3), nullptr,
                                        dq, dk, dv, dout, scale, H * S * D, S * D, D, H, S, D, 128,
                                        64, ws);
    kiln::rt::synchronize();
    std::vector<uint16_t> got(n);
    dout.copyToHost(got.data(), n * 2);
    double err = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      double g = fromHalf(got[i]);
      err += (g - ref[i]) * (g - ref[i]);
      norm += ref[i] * ref[i];
    }
    EXPECT_LT(std::sqrt(err / norm), 5e-3) << "ws = " << ws; // NaN fails too
  }
}
