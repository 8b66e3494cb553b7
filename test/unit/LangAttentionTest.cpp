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
#include <functional>
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

/// fp16 q, k, v of (1, 2, 512, 64) and softmax(q k^T * scale) v in double.
struct AttentionCase {
  static constexpr int B = 1, H = 2, S = 512, D = 64;
  static constexpr size_t n = size_t(B) * H * S * D;
  static constexpr float scale = 0.125f;
  std::vector<uint16_t> q, k, v;
  std::vector<double> ref;

  AttentionCase() : q(n), k(n), v(n), ref(n) {
    using kiln::examples::toHalf;
    std::vector<float> qf(n), kf(n), vf(n);
    for (size_t i = 0; i < n; ++i) {
      q[i] = toHalf(qf[i] = float(int(i * 7 % 17) - 8) / 16.0f);
      k[i] = toHalf(kf[i] = float(int(i * 5 % 13) - 6) / 16.0f);
      v[i] = toHalf(vf[i] = float(int(i * 3 % 11) - 5) / 8.0f);
    }
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
  }

  /// Runs `launch(q, k, v, out)` on copies (host buffers on the host backend; out starts as
  /// NaN); the relative error of its output against the reference (NaN where any output is).
  double run(const std::function<void(kiln::rt::CUdeviceptr, kiln::rt::CUdeviceptr,
                                      kiln::rt::CUdeviceptr, kiln::rt::CUdeviceptr)> &launch) {
    const bool host = kiln::lang::jit().isHost();
    kiln::rt::Buffer dq(n * 2, host), dk(n * 2, host), dv(n * 2, host), dout(n * 2, host);
    std::vector<uint16_t> out(n, 0x7e00);
    dq.copyFromHost(q.data(), n * 2);
    dk.copyFromHost(k.data(), n * 2);
    dv.copyFromHost(v.data(), n * 2);
    dout.copyFromHost(out.data(), n * 2);
    auto ptr = [](const kiln::rt::Buffer &x) { return kiln::rt::CUdeviceptr(x.get()); };
    launch(ptr(dq), ptr(dk), ptr(dv), ptr(dout));
    if (!host)
      kiln::rt::synchronize();
    dout.copyToHost(out.data(), n * 2);
    double err = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      double g = kiln::examples::fromHalf(out[i]);
      err += (g - ref[i]) * (g - ref[i]);
      norm += ref[i] * ref[i];
    }
    return std::sqrt(err / norm);
  }
};

TEST(LangAttention, GPU_Fa2LoopMatchesReference) {
  if (!kiln::rt::hasGPU())
    GTEST_SKIP() << "no GPU";
  AttentionCase c;
  const int B = c.B, H = c.H, S = c.S, D = c.D;
  for (bool ws : {false, true}) {
    double err = c.run([&](auto q, auto k, auto v, auto out) {
      kiln::kernels::attentionFa2Kernel()(grid(S / 128, B * H).num_warps(8).num_stages(3), nullptr,
                                          q, k, v, out, c.scale, H * S * D, S * D, D, H, S, D, 128,
                                          64, ws);
    });
    EXPECT_LT(err, 5e-3) << "ws = " << ws; // NaN fails too
  }
}

TEST(LangAttention, Fa3LoopIsWarpSpecializedAndPeeled) {
  // On sm_90a: Q, K, V and Out through the TMA, a producer warpgroup, and the peeled first and last
  // iterations (16 wgmmas in the loop, 8 + 8 outside it: no idle dot).
  Compiled c = kiln::kernels::attentionFa3Kernel().compile(
      Target{"sm_90a", 8, 3, 0, true}, kAligned, kAligned, kAligned, kAligned, 0.088f,
      4 * 32 * 4096, 4096, 128, 128, 128);
  EXPECT_EQ(c.tensor_maps.size(), 4u) << c.mlir; // Q, K, V, Out
  EXPECT_TRUE(contains(c.ptx, "setmaxnreg.dec.sync.aligned.u32")) << c.ptx;
  size_t wgmmas = 0;
  for (size_t at = c.ptx.find("wgmma.mma_async"); at != std::string::npos;
       at = c.ptx.find("wgmma.mma_async", at + 1))
    ++wgmmas;
  EXPECT_EQ(wgmmas, 32u);
}

TEST(LangAttention, Fa3LoopRunsOnTheHost) {
  // The host backend reads the descriptors' blocks itself (masked accesses) and runs the
  // loop as written: the rotated order's first and last iterations included.
  if (!kiln::lang::jit().isHost())
    GTEST_SKIP() << "the GPU test below runs it there";
  AttentionCase c;
  double err = c.run([&](auto q, auto k, auto v, auto out) {
    kiln::kernels::attentionFa3(nullptr, q, k, v, out, c.B, c.H, c.S, c.D, c.scale, 64, 64, 4, 3);
  });
  EXPECT_LT(err, 5e-3); // NaN fails too
}

TEST(LangAttention, LaunchersRejectShapesTheKernelsWouldReadWrong) {
  // Checked before anything launches (null pointers never reach a kernel): a ragged S would
  // silently drop or misread its last keys, as the kernels mask nothing.
  auto message = [](const std::function<void()> &launch) -> std::string {
    try {
      launch();
    } catch (const kiln::rt::Error &e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_TRUE(contains(
      message([] { kiln::kernels::attentionFa3(nullptr, 0, 0, 0, 0, 1, 2, 1000, 128, 0.1f); }),
      "attention_fa3: expected S (1000) a multiple of BLOCK_M (128) and BLOCK_N (128)"));
  EXPECT_TRUE(contains(
      message([] { kiln::kernels::attentionFa2(nullptr, 0, 0, 0, 0, 1, 2, 192, 64, 0.1f, false); }),
      "attention_fa2: expected S (192) a multiple of BLOCK_M (128)"));
  EXPECT_TRUE(contains(
      message([] { kiln::kernels::attentionFa3(nullptr, 0, 0, 0, 0, 1, 2, 512, 80, 0.1f); }),
      "head dimension of 16, 32, 64, 128 or 256, found 80"));
  EXPECT_TRUE(contains(
      message([] { kiln::kernels::attentionFa2(nullptr, 0, 0, 0, 0, 0, 2, 512, 64, 0.1f, false); }),
      "expected positive B, H and S"));
}

TEST(LangAttention, GPU_Fa3LoopMatchesReference) {
  if (!kiln::rt::hasGPU())
    GTEST_SKIP() << "no GPU";
  AttentionCase c;
  for (int blockN : {64, 128}) {
    double err = c.run([&](auto q, auto k, auto v, auto out) {
      kiln::kernels::attentionFa3(nullptr, q, k, v, out, c.B, c.H, c.S, c.D, c.scale, 128, blockN);
    });
    EXPECT_LT(err, 5e-3) << "BLOCK_N = " << blockN; // NaN fails too
  }
}
