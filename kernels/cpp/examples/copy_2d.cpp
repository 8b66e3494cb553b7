//===- copy_2d.cpp - Run the C++ DSL 2-D strided copy and check it --------===//
//
// This file implements an example: copy an M x N fp32 matrix between buffers with different
// row strides using kiln::kernels::copy2D, and check that the copy is exact and that the
// destination's padding (columns N..dst_stride) is untouched.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <cstdio>
#include <cstring>
#include <vector>

using kiln::rt::Buffer;

/// Kernels run on the GPU, or on the host backend without one ($KILN_BACKEND=cpu forces it).
static bool onHost() { return kiln::lang::jit().isHost(); }

static bool run(int32_t M, int32_t N, int32_t srcStride, int32_t dstStride) {
  constexpr uint32_t kPoison = 0xdeadbeefu;
  std::vector<float> src(size_t(M) * srcStride), dst(size_t(M) * dstStride);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = float(i % 65521) * 0.25f - 1000.0f;
  Buffer dsrc(src.size() * 4, onHost()), ddst(dst.size() * 4, onHost());
  dsrc.copyFromHost(src.data(), src.size() * 4);
  ddst.fill32(kPoison);
  kiln::kernels::copy2D(nullptr, dsrc.get(), ddst.get(), M, N, srcStride, dstStride);
  if (!onHost())
    kiln::rt::synchronize();
  ddst.copyToHost(dst.data(), dst.size() * 4);
  int64_t bad = 0;
  for (int32_t r = 0; r < M; ++r)
    for (int32_t c = 0; c < dstStride; ++c) {
      const float &got = dst[size_t(r) * dstStride + c];
      if (c < N) {
        bad += std::memcmp(&got, &src[size_t(r) * srcStride + c], 4) != 0;
      } else {
        uint32_t bits;
        std::memcpy(&bits, &got, 4);
        bad += bits != kPoison;
      }
    }
  std::printf("copy_2d %dx%d (strides %d, %d): %s (%lld wrong elements)\n", M, N, srcStride,
              dstStride, bad ? "FAIL" : "PASS", (long long)bad);
  return bad == 0;
}

int main() {
  try {
    std::printf("%s on the %s\n", "copy_2d", onHost() ? "host (CPU backend)" : "GPU");
    bool ok = run(256, 512, 512, 528);
    ok &= run(1000, 300, 320, 336);
    ok &= run(77, 45, 61, 50);
    return ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::printf("copy_2d: FAIL: %s\n", e.what());
    return 1;
  }
}
