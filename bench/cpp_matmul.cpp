//===- cpp_matmul.cpp - The C++ DSL's tutorial matmul behind a C entry ----===//
//
// This file implements libkiln-cpp-matmul.so for bench/bench_matmul.py's `cpp` variant: one C
// function that launches kiln::kernels::matmul (kernels/cpp/matmul.cpp, Triton's tutorial 03
// in the C++ DSL) on device pointers, so that Python can time the C++ door beside Kiln's
// Python door, Triton and cuBLAS in one process, on the same tensors and stream.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <cstring>
#include <exception>

/// c = a @ b (contiguous row-major fp16) on `stream` with the given tiles, warps and stages.
/// Returns 0, or -1 with the error's message in `error` (`errorSize` bytes).
extern "C" __attribute__((visibility("default"))) int
kiln_cpp_matmul(uint64_t a, uint64_t b, uint64_t c, int32_t M, int32_t N, int32_t K, void *stream,
                int blockM, int blockN, int blockK, int groupM, unsigned warps, unsigned stages,
                char *error, size_t errorSize) {
  try {
    kiln::kernels::MatmulConfig cfg;
    cfg.blockM = blockM, cfg.blockN = blockN, cfg.blockK = blockK, cfg.groupM = groupM;
    cfg.warps = warps, cfg.stages = stages;
    kiln::kernels::matmul(static_cast<kiln::rt::CUstream>(stream), a, b, c, M, N, K, cfg);
    return 0;
  } catch (const std::exception &e) {
    if (errorSize) {
      std::strncpy(error, e.what(), errorSize - 1);
      error[errorSize - 1] = 0;
    }
    return -1;
  }
}
