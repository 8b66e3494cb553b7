//===- cpp_kernels.cpp - The C++ DSL's kernels behind C entries -----------===//
//
// This file implements libkiln-cpp-kernels.so for bench/bench_matmul.py's `cpp` variant and
// bench/bench_cpp_attention.py: C functions that launch kiln::kernels::matmul (Triton's
// tutorial 03 in the C++ DSL) and kiln::kernels::attentionFa2 on device pointers, so that
// Python can time the C++ door beside Kiln's Python door, Triton and torch in one process, on
// the same tensors and stream.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <cstring>
#include <exception>

namespace {
/// Runs `launch`; 0, or -1 with the exception's message in `error` (`errorSize` bytes).
template <class F> int guarded(F &&launch, char *error, size_t errorSize) {
  try {
    launch();
    return 0;
  } catch (const std::exception &e) {
    if (errorSize) {
      std::strncpy(error, e.what(), errorSize - 1);
      error[errorSize - 1] = 0;
    }
    return -1;
  }
}
} // namespace

/// c = a @ b (contiguous row-major fp16) on `stream` with the given tiles, warps and stages.
/// Returns 0, or -1 with the error's message in `error` (`errorSize` bytes).
extern "C" __attribute__((visibility("default"))) int
kiln_cpp_matmul(uint64_t a, uint64_t b, uint64_t c, int32_t M, int32_t N, int32_t K, void *stream,
                int blockM, int blockN, int blockK, int groupM, unsigned warps, unsigned stages,
                char *error, size_t errorSize) {
  return guarded(
      [&] {
        kiln::kernels::MatmulConfig cfg;
        cfg.blockM = blockM, cfg.blockN = blockN, cfg.blockK = blockK, cfg.groupM = groupM;
        cfg.warps = warps, cfg.stages = stages;
        kiln::kernels::matmul(static_cast<kiln::rt::CUstream>(stream), a, b, c, M, N, K, cfg);
      },
      error, errorSize);
}

/// Non-causal attention of contiguous (B, H, S, D) fp16 q, k, v into out on `stream`
/// (kiln::kernels::attentionFa2; ws: the key loop warp-specialized). 0, or -1 and `error`.
extern "C" __attribute__((visibility("default"))) int
kiln_cpp_attention_fa2(uint64_t q, uint64_t k, uint64_t v, uint64_t out, int32_t B, int32_t H,
                       int32_t S, int32_t D, float smScale, int ws, void *stream, int blockM,
                       int blockN, unsigned warps, unsigned stages, char *error, size_t errorSize) {
  return guarded(
      [&] {
        kiln::kernels::attentionFa2(static_cast<kiln::rt::CUstream>(stream), q, k, v, out, B, H, S,
                                    D, smScale, ws != 0, blockM, blockN, warps, stages);
      },
      error, errorSize);
}

/// The same attention in FlashAttention-3's order (kiln::kernels::attentionFa3: descriptors
/// made in the kernel, the warp-specialized loop). 0, or -1 and `error`.
extern "C" __attribute__((visibility("default"))) int
kiln_cpp_attention_fa3(uint64_t q, uint64_t k, uint64_t v, uint64_t out, int32_t B, int32_t H,
                       int32_t S, int32_t D, float smScale, void *stream, int blockM, int blockN,
                       unsigned warps, unsigned stages, char *error, size_t errorSize) {
  return guarded(
      [&] {
        kiln::kernels::attentionFa3(static_cast<kiln::rt::CUstream>(stream), q, k, v, out, B, H, S,
                                    D, smScale, blockM, blockN, warps, stages);
      },
      error, errorSize);
}
