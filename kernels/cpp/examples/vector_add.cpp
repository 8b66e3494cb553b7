//===- vector_add.cpp - Run the C++ DSL vector add and check it -----------===//
//
// This file implements an example: allocate two vectors on the GPU, add them with
// kiln::kernels::vectorAdd and compare the result bit for bit with the host's float sums,
// for a size that is a multiple of 16 and one that is not (two specializations).
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using kiln::rt::Buffer;

/// Kernels run on the GPU, or on the host backend without one ($KILN_BACKEND=cpu forces it).
static bool onHost() { return kiln::lang::jit().isHost(); }

static bool run(int32_t n) {
  std::mt19937 rng(n);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> x(n), y(n), out(n), ref(n);
  for (int32_t i = 0; i < n; ++i) {
    x[i] = dist(rng);
    y[i] = dist(rng);
    ref[i] = x[i] + y[i];
  }
  size_t bytes = size_t(n) * sizeof(float);
  Buffer dx(bytes, onHost()), dy(bytes, onHost()), dout(bytes, onHost());
  dx.copyFromHost(x.data(), bytes);
  dy.copyFromHost(y.data(), bytes);
  dout.fill32(0xffffffffu);
  kiln::kernels::vectorAdd(nullptr, dx.get(), dy.get(), dout.get(), n);
  if (!onHost())
    kiln::rt::synchronize();
  dout.copyToHost(out.data(), bytes);
  int32_t mismatches = 0;
  for (int32_t i = 0; i < n; ++i)
    mismatches += std::memcmp(&out[i], &ref[i], sizeof(float)) != 0;
  std::printf("vector_add n=%d: %s (%d mismatches)\n", n, mismatches ? "FAIL" : "PASS", mismatches);
  return mismatches == 0;
}

int main() {
  try {
    std::printf("%s on the %s\n", "vector_add", onHost() ? "host (CPU backend)" : "GPU");
    bool ok = run(1 << 20);
    ok &= run(1000003);
    return ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::printf("vector_add: FAIL: %s\n", e.what());
    return 1;
  }
}
